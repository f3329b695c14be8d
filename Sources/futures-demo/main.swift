// futures-demo: the seeds' scenario on real files.
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
let picture = Data((0..<4096).map { UInt8(truncatingIfNeeded: $0 &* 31) })

print("swift-futures demo, working in \(directory.path)")
print("1. Setting up: the person record on disk, the picture only on the server")

// Set-up, then the scenario, as one chain: any step's error falls through to the one handler below.
let scenario = Future.zipSetUp(disk.save(ada), server.save(picture: picture, named: ada.picture))
    .flatMap { _ -> Future<Person> in
        print("2. Loading the person from disk")
        return disk.loadPerson()
    }
    .flatMap { person -> Future<(Person, Data, String)> in
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
    .always { _ in try? FileManager.default.removeItem(at: directory) }

// Errors from every step are reported here, in one place.
switch await scenario.result {
case .success(let (person, data, source)):
    print("4. Done: \(person.name)'s picture, \(data.count) bytes, from the \(source)")
    print("Cleaned up \(directory.path)")
case .failure(let error):
    FileHandle.standardError.write(Data("futures-demo: failed: \(error)\n".utf8))
    exit(1)
case .cancelled:
    FileHandle.standardError.write(Data("futures-demo: cancelled\n".utf8))
    exit(1)
}

extension Future where Value == Void {
    /// Waits for two set-up steps; the first failure wins. (`Future.zip` arrives with the combinators.)
    static func zipSetUp(_ first: Future<Void>, _ second: Future<Void>) -> Future<Void> {
        first.flatMap(on: .immediate) { second }
    }
}
