import Dispatch
import Foundation
import Futures

/// A person record, as OAPromise's example's `loadFromDisk` loads it.
struct Person: Codable, Sendable {
    let name: String
    /// File name of the person's picture.
    let picture: String
}

/// A folder holding person records and pictures: the "disk" and the "server" of the example.
struct PictureLibrary: Sendable {
    let name: String
    let folder: URL

    /// Writes `person` as `person.json`.
    func save(_ person: Person) -> Future<Void> {
        Future(on: .global()) {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            try JSONEncoder().encode(person).write(to: folder.appendingPathComponent("person.json"))
        }
    }

    /// Writes a picture file.
    func save(picture: Data, named fileName: String) -> Future<Void> {
        Future(on: .global()) {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            try picture.write(to: folder.appendingPathComponent(fileName))
        }
    }

    /// Loads `person.json` on a background queue, reporting progress as it reads.
    func loadPerson() -> Future<Person> {
        Future { promise in
            DispatchQueue.global().async {
                do {
                    let data = try readInChunks(folder.appendingPathComponent("person.json"), promise: promise)
                    promise.succeed(try JSONDecoder().decode(Person.self, from: data))
                } catch {
                    promise.fail(error)
                }
            }
        }
    }

    /// Loads a picture on a background queue, reporting progress as it reads; fails if this
    /// library does not have it.
    func loadPicture(of person: Person) -> Future<Data> {
        Future { promise in
            DispatchQueue.global().async {
                let url = folder.appendingPathComponent(person.picture)
                guard FileManager.default.fileExists(atPath: url.path) else {
                    promise.fail(DemoError.missingPicture(person.picture, library: name))
                    return
                }
                do {
                    promise.succeed(try readInChunks(url, promise: promise))
                } catch {
                    promise.fail(error)
                }
            }
        }
    }
}

/// Reads a file in 8 KiB chunks, reporting the fraction read as the promise's progress and
/// stopping early if the promise's future was cancelled.
func readInChunks<Value>(_ url: URL, promise: Promise<Value>) throws -> Data {
    let handle = try FileHandle(forReadingFrom: url)
    defer { try? handle.close() }
    let size = max(try FileManager.default.attributesOfItem(atPath: url.path)[.size] as? Int ?? 0, 1)
    var data = Data()
    while let chunk = try handle.read(upToCount: 8_192), !chunk.isEmpty {
        if promise.isCancelled { throw CancellationError() }
        data.append(chunk)
        promise.progress = Double(data.count) / Double(size)
    }
    return data
}

enum DemoError: Error, CustomStringConvertible {
    case missingPicture(String, library: String)
    case usage(String)

    var description: String {
        switch self {
        case .missingPicture(let file, let library): "\(library) has no picture \(file)"
        case .usage(let message): message
        }
    }
}
