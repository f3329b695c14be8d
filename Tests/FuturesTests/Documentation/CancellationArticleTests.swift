// The examples of the DocC article "Cancellation", compiled and run.
import Foundation
import FuturesTestHelpers
import Testing
import Futures

func countWords(in text: String) -> Future<Int> {
    let promise = Promise<Int>()
    DispatchQueue.global().async {
        var count = 0
        for _ in text.split(separator: " ") {
            if promise.isCancelled { return }   // nobody wants the result any more
            count += 1
        }
        promise.succeed(count)
    }
    return promise.future
}

final class UploadScreen: Sendable {
    let upload: Future<Int>
    let status: Future<String>

    init(upload: Future<Int>) {
        self.upload = upload
        status = upload.observe().map { bytes in "Uploaded \(bytes) bytes" }
    }

    func leave() { status.cancel() }          // stop watching; the upload goes on
    func cancelUpload() { upload.cancel() }   // stop the upload; the status sees .cancelled
}

@Suite("Cancellation article")
struct CancellationArticleTests {
    @Test func discardingAChain() async {
        let gate = DispatchSemaphore(value: 0)
        defer { gate.signal() }
        let disk = Disk(person: ada, gate: gate)   // still loading when the chain is discarded
        let picture = loadPerson(from: disk)
            .flatMap { person in person.loadPicture(from: disk) }
        // The user left: discard the chain, up to the operation in flight.
        picture.cancel()
        #expect(await picture.result.isCancelled)
    }

    @Test func stoppingTheWork() async throws {
        #expect(try await countWords(in: "one two three").value == 3)
    }

    @Test func observingWithoutOwning() async {
        let upload = Promise<Int>()
        let screen = UploadScreen(upload: upload.future)
        screen.leave()
        #expect(upload.future.isPending)
        #expect(await screen.status.result.isCancelled)
        let second = UploadScreen(upload: upload.future)
        second.cancelUpload()
        #expect(upload.isCancelled)
        #expect(await second.status.result.isCancelled)
    }

    @Test func cleaningUp() async {
        let printed = PrintedLines()
        @Sendable func print(_ items: any Sendable...) { printed.record(items) }
        let upload = Future<Int>.cancelled
        print("show the spinner")
        upload.whenComplete { _ in
            print("hide the spinner")   // on success, failure and cancellation alike
        }
        #expect(await upload.result.isCancelled)
        #expect(await printed.first(2) == ["show the spinner", "hide the spinner"])
    }

    @Test func tokens() async {
        let gate = DispatchSemaphore(value: 0)
        defer { gate.signal() }
        let disk = Disk(person: ada, gate: gate)   // still loading when the screen closes
        let screen = CancellationSource()
        let avatar = loadPerson(from: disk)
            .flatMap { $0.loadPicture(from: server) }
            .cancellable(by: screen.token)
        screen.cancel()   // the screen closed: `avatar` is cancelled, and withdraws from its chain
        #expect(await avatar.result.isCancelled)
    }

    @Test func timeLimits() async throws {
        let person = loadPerson(from: server).timeout(after: .seconds(10))
        #expect(try await person.value.name == "Ada")
    }
}
