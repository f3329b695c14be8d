import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import FuturesURLSession
import Futures
import FuturesTestSupport
import Testing

// The examples of the "Networking with URLSession" article and the README, against the test server.
// The time limit is generous for the reason given on `FutureURLSessionTests`.

@Suite(.timeLimit(.minutes(20))) struct NetworkingWithURLSessionTests {
    @Test func loadingAPage() async throws {
        let server = try TestServer()
        let url = server.url("/large")
        let printedSize = Promise<String>()
        let printedAll = Promise<Void>()
        @Sendable func print(_ items: any Sendable...) {
            let line = items.map { "\($0)" }.joined(separator: " ")
            if line.hasSuffix("bytes") { _ = printedSize.succeed(line) }
            if line == "100%" { _ = printedAll.succeed(()) }
        }

        let session = FutureURLSession()
        let page = session.data(for: URLRequest(url: url))
        page.whenProgress { print("\(Int($0 * 100))%") }
        page.whenSuccess { data, response in print(data.count, "bytes") }

        // A failed request throws here, rather than leaving the test waiting for lines never printed.
        _ = try await page.value
        // The callbacks run on `.global()`, after the page has arrived.
        #expect(try await printedSize.future.value == "1048576 bytes")
        #expect(await printedAll.future.result.isSuccess)
        try await server.shutdown()
    }

    @Test func cancellingADownload() async throws {
        let server = try TestServer()
        let url = server.url("/trickle")
        let session = FutureURLSession()
        let download = session.download(for: URLRequest(url: url))
        download.cancel()   // cancels the task; the future ends .cancelled
        #expect(download.outcome?.isCancelled == true)
        try await server.shutdown()
    }

    @Test func aTimeoutCancelsTheRequest() async throws {
        let server = try TestServer()
        let url = server.url("/trickle")
        let clock = ManualClock()
        let session = FutureURLSession()
        let slow = session.data(for: URLRequest(url: url))
            .timeout(after: .seconds(10), clock: clock)
            .map { data, _ in data.count }
        // Once bytes flow, ten seconds pass on the manual clock.
        let started = Promise<Void>()
        slow.whenProgress(on: .immediate) { _ in _ = started.succeed(()) }
        _ = await started.future.result
        clock.advance(by: .seconds(10))
        #expect(await slow.result.error as? FutureError == .timedOut)
        // The timeout withdrew the request's last consumer: the task was cancelled.
        #expect(await server.clientLeftTrickle.result.isSuccess)
        try await server.shutdown()
    }
}
