import Foundation
import Futures

/// A person record, as the seeds' `loadFromDisk` loads it.
struct Person: Codable, Sendable {
    let name: String
    /// File name of the person's picture.
    let picture: String
}

/// A folder holding person records and pictures: the "disk" and the "server" of the seeds.
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

    /// Loads `person.json` on a background queue.
    func loadPerson() -> Future<Person> {
        Future(on: .global()) {
            let data = try Data(contentsOf: folder.appendingPathComponent("person.json"))
            return try JSONDecoder().decode(Person.self, from: data)
        }
    }

    /// Loads a picture on a background queue; fails if this library does not have it.
    func loadPicture(of person: Person) -> Future<Data> {
        Future(on: .global()) {
            let url = folder.appendingPathComponent(person.picture)
            guard FileManager.default.fileExists(atPath: url.path) else {
                throw DemoError.missingPicture(person.picture, library: name)
            }
            return try Data(contentsOf: url)
        }
    }
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
