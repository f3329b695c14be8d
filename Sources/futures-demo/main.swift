// futures-demo: a person-and-picture loading scenario on real files.
//
// Writes a person record and a picture to a temporary folder, loads the person, then the picture,
// falls back to a second source when the first has no picture, handles every error in one place,
// and prints what happened. Exits 0 on success, 1 with a message on a real failure.
//
//     swift run futures-demo [--directory PATH]
import Foundation
import Futures

func log(_ message: String) {
    print("  \(message)")
}

func parseDirectory(_ arguments: [String]) throws -> URL {
    var arguments = arguments.dropFirst()
    var directory = FileManager.default.temporaryDirectory
        .appendingPathComponent("swift-futures-demo-\(UUID().uuidString)")
    while let argument = arguments.popFirst() {
        switch argument {
        case "--directory":
            guard let path = arguments.popFirst() else { throw DemoError.usage("--directory needs a path") }
            directory = URL(fileURLWithPath: path)
        case "-h", "--help":
            print("usage: futures-demo [--directory PATH]")
            exit(0)
        default:
            throw DemoError.usage("unknown argument \(argument); usage: futures-demo [--directory PATH]")
        }
    }
    return directory
}

let directory: URL
do {
    directory = try parseDirectory(CommandLine.arguments)
} catch {
    FileHandle.standardError.write(Data("futures-demo: \(error)\n".utf8))
    exit(2)
}

let disk = PictureLibrary(name: "disk", folder: directory.appendingPathComponent("disk"))
let server = PictureLibrary(name: "server", folder: directory.appendingPathComponent("server"))
let ada = Person(name: "Ada Lovelace", picture: "ada.png")
let picture = Data((0..<65_536).map { UInt8(truncatingIfNeeded: $0 &* 31) })

print("swift-futures demo, working in \(directory.path)")
print("1. Setting up: the person record on disk, the picture only on the server")

/// Loading the person takes about 30% of the work, the picture 70% (OAPromise's example).
func loadPersonAndPicture() -> Future<(Person, Data, String)> {
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

let bar = ProgressBar()
scenario.whenProgress(on: .queue(bar.queue)) { bar.show($0) }

// Errors from every step are reported here, in one place.
switch await scenario.result {
case .success(let (person, data, source)):
    bar.finish()
    print("4. Done: \(person.name)'s picture, \(data.count) bytes, from the \(source)")
    print("Cleaned up \(directory.path)")
case .failure(let error):
    FileHandle.standardError.write(Data("futures-demo: failed: \(error)\n".utf8))
    exit(1)
case .cancelled:
    FileHandle.standardError.write(Data("futures-demo: cancelled\n".utf8))
    exit(1)
}


/// Prints the scenario's progress as a text bar, one line per change of at least 10%.
final class ProgressBar: @unchecked Sendable {
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
