import ArgumentParser
import Foundation
import Futures

/// `futures-demo tour`: a person-and-picture loading scenario on real files.
///
/// Writes a person record and a picture to a temporary folder, loads the person, then the picture,
/// falls back to a second source when the first has no picture, handles every error in one place,
/// and prints what happened. Exits 0 on success, 1 with a message on a real failure.
struct Tour: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Load a person and their picture from files, with a fallback source and a progress bar.",
        discussion: "The scenario of the promise libraries this one learned from, on a few kilobytes of temporary files. It is what runs when no subcommand is given."
    )

    @Option(help: ArgumentHelp("The folder to work in (default: a new temporary folder).", valueName: "path"))
    var directory: String?

    func run() async throws {
        let folder = directory.map { URL(fileURLWithPath: $0) } ?? FileManager.default.temporaryDirectory
            .appendingPathComponent("swift-futures-demo-\(UUID().uuidString)")
        let status = await Self.scenario(in: folder)
        if status != 0 { throw ExitCode(status) }
    }

    static func scenario(in directory: URL) async -> Int32 {
        let disk = PictureLibrary(name: "disk", folder: directory.appendingPathComponent("disk"))
        let server = PictureLibrary(name: "server", folder: directory.appendingPathComponent("server"))
        let ada = Person(name: "Ada Lovelace", picture: "ada.png")
        let picture = Data((0..<65_536).map { UInt8(truncatingIfNeeded: $0 &* 31) })

        print("swift-futures demo, working in \(directory.path)")
        print("1. Setting up: the person record on disk, the picture only on the server")

        /// Loading the person takes about 30% of the work, the picture 70% (OAPromise's example).
        @Sendable func loadPersonAndPicture() -> Future<(Person, Data, String)> {
            disk.loadPerson().flatMap(progressWeight: 0.3) { person -> Future<(Person, Data, String)> in
                log("loaded \(person.name)")
                print("3. Loading \(person.picture)")
                return disk.loadPicture(of: person)
                    .map { (person, $0, "disk") }
                    .flatMapError { error in
                        log("first source failed: \(error)")
                        log("falling back to the server")
                        return server.loadPicture(of: person).map { (person, $0, "server") }
                    }
            }
        }

        // Set-up, then the scenario, as one chain: any step's error falls through to the one handler below.
        let scenario = Future.zip(disk.save(ada), server.save(picture: picture, named: ada.picture))
            .flatMap(progressWeight: 0.1) { _ -> Future<(Person, Data, String)> in
                print("2. Loading the person from disk, then the picture")
                return loadPersonAndPicture()
            }
            .always { _ in try? FileManager.default.removeItem(at: directory) }

        let bar = TourProgressBar()
        scenario.whenProgress(on: .queue(bar.queue)) { bar.show($0) }

        // Errors from every step are reported here, in one place.
        switch await scenario.result {
        case .success(let (person, data, source)):
            bar.finish()
            print("4. Done: \(person.name)'s picture, \(data.count) bytes, from the \(source)")
            print("Cleaned up \(directory.path)")
        case .failure(let error):
            FileHandle.standardError.write(Data("futures-demo: failed: \(error)\n".utf8))
            return 1
        case .cancelled:
            FileHandle.standardError.write(Data("futures-demo: cancelled\n".utf8))
            return 1
        }
        return 0
    }
}

func log(_ message: String) {
    print("  \(message)")
}

/// Prints the scenario's progress as a text bar, one line per change of at least 10%.
final class TourProgressBar: @unchecked Sendable {
    // Safety: `lastShown` is only touched on `queue`, a serial queue (see `show` and `finish`).
    let queue = DispatchQueue(label: "progress-bar")
    private var lastShown = -1.0

    func show(_ fraction: Double) {
        guard fraction - lastShown >= 0.1 || (fraction == 1 && lastShown < 1) else { return }
        lastShown = fraction
        let filled = Int((fraction * 20).rounded())
        let line = String(repeating: "#", count: filled) + String(repeating: ".", count: 20 - filled)
        print("  [\(line)] \(Int((fraction * 100).rounded()))%")
    }

    /// Waits until every progress line queued so far has been printed.
    func finish() { queue.sync {} }
}
