import Foundation
import Testing
@testable import Futures

@Suite("Errors that mean cancellation")
struct CancellationIndicatingTests {
    enum DownloadError: Error, CancellationIndicating {
        case aborted, corrupt
        var indicatesCancellation: Bool { self == .aborted }
    }

    @Test func documentedExample() {
        enum DownloadError: Error, CancellationIndicating {
            case aborted, corrupt
            var indicatesCancellation: Bool { self == .aborted }
        }

        let download = Future<Data>(error: DownloadError.aborted)
        // download.outcome is .cancelled
        #expect(download.outcome?.isCancelled == true)
    }

    @Test func anErrorThatSaysSoCancelsWhereverCancellationErrorDoes() {
        // Failing a promise.
        let promise = Promise<Int>()
        promise.fail(DownloadError.aborted)
        #expect(promise.future.outcome?.isCancelled == true)
        // Throwing from a transform.
        let thrown = Future(value: 1).map(on: .immediate) { _ -> Int in throw DownloadError.aborted }
        #expect(thrown.outcome?.isCancelled == true)
        // Returning it from mapError.
        let mapped = Future<Int>(error: TestError()).mapError(on: .immediate) { _ in DownloadError.aborted }
        #expect(mapped.outcome?.isCancelled == true)
        // Outcomes made from results and throwing bodies.
        #expect(Outcome<Int>(Result<Int, DownloadError>.failure(.aborted)).isCancelled)
        #expect(Outcome<Int> { throw DownloadError.aborted }.isCancelled)
        // Completing with an outcome or a Result.
        let completed = Promise<Int>()
        completed.complete(.failure(DownloadError.aborted))
        #expect(completed.future.outcome?.isCancelled == true)
        let fromResult = Promise<Int>()
        fromResult.complete(with: Result<Int, any Error>.failure(DownloadError.aborted))
        #expect(fromResult.future.outcome?.isCancelled == true)
    }

    @Test func anErrorThatSaysNoFailsAsUsual() {
        let future = Future<Int>(error: DownloadError.corrupt)
        #expect(future.outcome?.error as? DownloadError == .corrupt)
        let recovered = future.recover(on: .immediate) { _ in 1 }
        #expect(recovered.outcome?.value == 1)
    }

    @Test func aCancellingErrorSkipsFailureHandlersAndReachesCancellationHandlers() {
        let promise = Promise<Int>()
        let failures = Counter()
        let cancellations = Counter()
        promise.future.whenFailure(on: .immediate) { _ in failures.increment() }
        promise.future.whenCancelled(on: .immediate) { cancellations.increment() }
        let recovered = promise.future.recover(on: .immediate) { _ in 0 }
        promise.fail(DownloadError.aborted)
        #expect(failures.value == 0)
        #expect(cancellations.value == 1)
        #expect(recovered.outcome?.isCancelled == true, "recover never sees a cancellation")
    }

    @Test func urlErrorCancelledAndCocoaUserCancelledMeanCancellation() {
        #expect(Future<Int>(error: URLError(.cancelled)).outcome?.isCancelled == true)
        #expect(Future<Int>(error: URLError(.timedOut)).outcome?.error is URLError)
        #expect(Future<Int>(error: CocoaError(.userCancelled)).outcome?.isCancelled == true)
        #expect(Future<Int>(error: CocoaError(.fileNoSuchFile)).outcome?.error is CocoaError)
    }

    @Test func anAsyncFutureWhoseTaskThrowsACancellingErrorIsCancelled() async {
        let future = Future<Int> { throw URLError(.cancelled) }
        #expect(await future.result.isCancelled)
    }

    @Test func nsErrorsWithTheCancelledCodesMeanCancellation() {
        let urlCancelled: any Error = NSError(domain: NSURLErrorDomain, code: NSURLErrorCancelled)
        let userCancelled: any Error = NSError(domain: NSCocoaErrorDomain, code: NSUserCancelledError)
        let otherURLError: any Error = NSError(domain: NSURLErrorDomain, code: NSURLErrorTimedOut)
        let otherDomain: any Error = NSError(domain: "example", code: NSURLErrorCancelled)
        #expect(Future<Int>(error: urlCancelled).outcome?.isCancelled == true)
        #expect(Future<Int>(error: userCancelled).outcome?.isCancelled == true)
        #expect(Future<Int>(error: otherURLError).outcome?.error != nil)
        #expect(Future<Int>(error: otherDomain).outcome?.error != nil)
    }
}
