// The README's tour, compiled and run. `.ci/check-examples` checks that every Swift block of
// README.md and of the DocC articles appears in a test file, line for line.
import Foundation
import FuturesTestHelpers
import Testing
import Futures

// MARK: - The world the examples live in

struct Person: Sendable {
    let name: String
    func loadPicture(from disk: Disk) -> Future<Data> {
        Future(on: .global()) { try disk.readPicture(of: self) }
    }
}

struct Disk: Sendable {
    var person: Person?
    var pictures: [String: Data] = [:]
    /// When set, reads wait until the test opens it: a deterministic "still loading".
    var gate: DispatchSemaphore?

    func readPerson() throws -> Person {
        gate?.wait()
        guard let person else { throw CocoaError(.fileNoSuchFile) }
        return person
    }

    func readPicture(of person: Person) throws -> Data {
        guard let data = pictures[person.name] else { throw CocoaError(.fileNoSuchFile) }
        return data
    }
}

struct Uploader: Sendable {
    func upload(_ person: Person) async throws -> Int { person.name.count }
}

@MainActor final class Screen {
    var shown: [String] = []
    var onShow: () -> Void = {}
    func show(_ image: String) {
        shown.append(image)
        onShow()
    }
}

func thumbnail(of person: Person) -> String { "thumbnail of \(person.name)" }

func save(_ picture: Future<Data>, to disk: Disk) -> Future<Int> { picture.map { $0.count } }

func legacyFetch(_ url: URL, completion: @escaping @Sendable (Data?, (any Error)?) -> Void) {
    DispatchQueue.global().async { completion(Data(url.absoluteString.utf8), nil) }
}

let ada = Person(name: "Ada")
let disk = Disk(person: ada, pictures: [:])
let server = Disk(person: ada, pictures: ["Ada": Data([1, 2, 3])])
let uploader = Uploader()
let url = URL(string: "https://example.com/ada")!

// MARK: - Giving promises

func loadPerson(from disk: Disk) -> Future<Person> {
    let promise = Promise<Person>()
    DispatchQueue.global().async {
        do { promise.succeed(try disk.readPerson()) }
        catch { promise.fail(error) }
    }
    return promise.future
}

@Suite("README tour")
struct ReadmeTourTests {
    @Test func receivingValues() async throws {
        let printed = PrintedLines()
        @Sendable func print(_ items: any Sendable...) { printed.record(items) }
        loadPerson(from: disk).whenSuccess { person in
            print("Loaded \(person.name)")
        }
        #expect(try await loadPerson(from: disk).value.name == "Ada")
        #expect(await printed.first(1) == ["Loaded Ada"])
    }

    @Test func chainingErrorsInOnePlaceRecovering() async throws {
        let printed = PrintedLines()
        @Sendable func print(_ items: any Sendable...) { printed.record(items) }
        let picture = loadPerson(from: disk)
            .flatMap { person in person.loadPicture(from: disk) }
            .flatMapError { _ in
                // Nothing on disk: try the server.
                loadPerson(from: server).flatMap { $0.loadPicture(from: server) }
            }
        picture.whenComplete { outcome in
            switch outcome {
            case .success(let data): print("Picture loaded: \(data.count) bytes")
            case .failure(let error): print("Failed to load the picture: \(error)")
            case .cancelled: print("Cancelled")
            }
        }
        #expect(try await picture.value == Data([1, 2, 3]))
        #expect(await printed.first(1) == ["Picture loaded: 3 bytes"])
    }

    @Test func cleaningUpAlways() async throws {
        let printed = PrintedLines()
        @Sendable func print(_ items: any Sendable...) { printed.record(items) }
        let picture = Future(value: Data([1, 2]))
        let saved = save(picture, to: disk)
            .always { _ in print("hide the progress indicator") }
        #expect(try await saved.value == 2)
        #expect(printed.all == ["hide the progress indicator"], "`always` runs before the outcome passes on")
    }

    @Test func asyncAwaitBothWays() async throws {
        let person = try await loadPerson(from: disk).value
        let uploaded = Future { try await uploader.upload(person) }
        #expect(try await uploaded.value == 3)
    }

    @Test func cancelling() {
        let printed = PrintedLines()
        @Sendable func print(_ items: any Sendable...) { printed.record(items) }
        let download = Promise<Data>()
        download.onCancel { print("stop the download") }
        let text = download.future.map { String(decoding: $0, as: UTF8.self) }
        download.future.cancel()   // prints "stop the download"; `text` is cancelled too
        #expect(text.outcome?.isCancelled == true)
        #expect(download.isCancelled)
        #expect(printed.all == ["stop the download"])
    }

    @Test func observingWithoutConsuming() {
        let upload = Promise<Int>()
        let status = upload.future.observe().map { bytes in "Uploaded \(bytes) bytes" }
        status.cancel()   // the screen went away; the upload goes on
        #expect(upload.future.isPending)
    }

    @Test func tokensAndTime() async throws {
        let screen = CancellationSource()
        let avatar = loadPerson(from: server)
            .timeout(after: .seconds(10))
            .cancellable(by: screen.token)
        let retried = Future.retry(attempts: 3, backoff: .exponential(initial: .milliseconds(10), factor: 2)) {
            loadPerson(from: server)
        }
        screen.cancel()   // `avatar` is cancelled; `retried` goes on
        // The load may have finished before the cancel (then cancelling changes nothing); the
        // deterministic rules are pinned in CancellationTokenTests and TimeTests.
        let outcome = await avatar.result
        #expect(outcome.isCancelled || outcome.value?.name == "Ada")
        #expect(try await retried.value.name == "Ada")
    }

    @Test func progress() async throws {
        let printed = PrintedLines()
        @Sendable func print(_ items: any Sendable...) { printed.record(items) }
        let picture = loadPerson(from: disk).flatMap(progressWeight: 0.3) { person in
            person.loadPicture(from: server)
        }
        picture.whenProgress { print("combined progress = \($0)") }
        #expect(try await picture.value == Data([1, 2, 3]))
        #expect(await printed.contains("combined progress = 1.0"))
    }

    @Test @MainActor func executors() async {
        let screen = Screen()
        await withCheckedContinuation { (shown: CheckedContinuation<Void, Never>) in
            screen.onShow = { shown.resume() }
            loadPerson(from: disk)
                .map(on: .global(qos: .utility)) { person in thumbnail(of: person) }
                .whenSuccess(on: .main) { image in
                    screen.show(image)   // main-actor state, no assumeIsolated
                }
        }
        #expect(screen.shown == ["thumbnail of Ada"])
    }

    @Test func wrappingCallbackApis() async throws {
        let data = Future<Data> { promise in
            legacyFetch(url) { data, error in promise.complete(value: data, error: error) }
        }
        #expect(try await data.value == Data(url.absoluteString.utf8))
    }
}
