import Foundation
import FuturesTestHelpers
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Futures
import FuturesURLSession
import Synchronization
import Testing

typealias Recorder<Element: Sendable> = FuturesTestHelpers.Recorder<Element>

/// Every test starts its own server on 127.0.0.1 and its own session. The time limit stops a hung
/// test before CI's limit of a step (30 minutes), and is generous because under ThreadSanitizer on
/// two cores a test's every step waits for a thread of a pool that the busiest tests of other
/// suites keep busy for minutes.
@Suite(.timeLimit(.minutes(20))) struct FutureURLSessionTests {
    @Test func loadsASmallBody() async throws {
        let server = try TestServer()
        let session = FutureURLSession()
        let (data, response) = try await session.data(for: server.request("/small")).value
        #expect(data == TestServer.smallBody)
        #expect((response as? HTTPURLResponse)?.statusCode == 200)
        try await server.shutdown()
    }

    /// On Linux, Swift concurrency's tasks and `DispatchQueue.global()` share one pool of threads,
    /// and a process can keep every one of them busy; its transfers must still end.
    @Test func aRequestEndsWhileEveryThreadOfThePoolIsBusy() async throws {
        let server = try TestServer()
        let session = FutureURLSession()
        let (body, poolStayedBusy) = await offThePool {
            let busy = BusyPool()
            let body = try? session.data(for: server.request("/small")).wait().0
            return (body, busy.release())
        }
        #expect(body == TestServer.smallBody)
        #expect(poolStayedBusy, "the request ended only once a thread of the pool came free")
        try await server.shutdown()
    }

    @Test func anHTTPErrorStatusIsAResponse() async throws {
        let server = try TestServer()
        let (_, response) = try await FutureURLSession().data(for: server.request("/missing")).value
        #expect((response as? HTTPURLResponse)?.statusCode == 404)
        try await server.shutdown()
    }

    @Test func reportsProgressAsBytesArrive() async throws {
        let server = try TestServer()
        // The server sends its second half only once the client reported the first: a session that
        // reported progress only at the end would never finish, and a loaded machine cannot receive
        // the whole body in one read and report nothing between 0 and 1.
        let page = FutureURLSession().data(for: server.request("/halves"))
        let seen = Recorder<Double>()
        page.whenProgress(on: .immediate) { progress in
            seen.append(progress)
            if progress >= 0.5 { server.openGate() }
        }
        let (data, _) = try await page.value
        #expect(data == TestServer.halvesBody)
        let progress = seen.all
        #expect(progress.contains { $0 > 0 && $0 < 1 })
        #expect(progress == progress.sorted())
        #expect(progress.last == 1)
        try await server.shutdown()
    }

    @Test func cancellingTheFutureCancelsTheTask() async throws {
        let server = try TestServer()
        let page = FutureURLSession().data(for: server.request("/trickle"))
        page.whenProgress(on: .immediate) { _ in _ = page.cancel() }
        // The server sees the connection close: the task itself stopped, not only the future.
        #expect(await server.clientLeftTrickle.result.isSuccess)
        #expect(page.outcome?.isCancelled == true)
        try await server.shutdown()
    }

    @Test func aWithdrawnConsumerCancelsTheTask() async throws {
        let server = try TestServer()
        let page = FutureURLSession().data(for: server.request("/trickle"))
        let size = page.map { data, _ in data.count }
        page.whenProgress(on: .immediate) { _ in _ = size.cancel() }
        #expect(await server.clientLeftTrickle.result.isSuccess)
        #expect(await page.result.isCancelled)
        try await server.shutdown()
    }

    @Test func invalidatingTheSessionCancelsItsTasks() async throws {
        let server = try TestServer()
        let session = FutureURLSession()
        let page = session.data(for: server.request("/trickle"))
        page.whenProgress(on: .immediate) { _ in session.invalidateAndCancel() }
        // The task ends with URLError.cancelled, which means cancellation.
        #expect(await page.result.isCancelled)
        let later = session.data(for: server.request("/small"))
        #expect(later.outcome?.error is FutureURLSession.InvalidatedError)
        try await server.shutdown()
    }

    @Test func invalidatingWithManyTasksInFlightEndsEveryFuture() async throws {
        let server = try TestServer()
        let session = longWaitSession()
        let pages = (0..<20).map { _ in session.data(for: server.request("/trickle")) }
        // Whichever transfer starts first: the session runs only a few connections to one host at
        // once, in no promised order, and a trickle never ends by itself.
        let started = Promise<Void>()
        for page in pages { page.whenProgress(on: .immediate) { _ in _ = started.succeed(()) } }
        _ = await started.future.result
        session.invalidateAndCancel()
        for page in pages {
            let result = await page.result
            #expect(result.isCancelled, "ended \(result)")
        }
        try await server.shutdown()
    }

    @Test func finishingTasksAndInvalidatingLetsRunningTasksFinish() async throws {
        let server = try TestServer()
        let session = FutureURLSession()
        let page = session.data(for: server.request("/large"))
        session.finishTasksAndInvalidate()
        #expect(try await page.value.0 == TestServer.largeBody)
        let later = session.data(for: server.request("/small"))
        #expect(later.outcome?.error is FutureURLSession.InvalidatedError)
        session.invalidateAndCancel()   // already invalidated: nothing happens
        try await server.shutdown()
    }

    @Test func theSharedSessionCannotBeInvalidated() async throws {
        let server = try TestServer()
        FutureURLSession.shared.invalidateAndCancel()
        FutureURLSession.shared.finishTasksAndInvalidate()
        let (data, _) = try await FutureURLSession.shared.data(for: server.request("/small")).value
        #expect(data == TestServer.smallBody)
        try await server.shutdown()
    }

    @Test func aReleasedSessionFinishesItsTasks() async throws {
        let server = try TestServer()
        weak var released: FutureURLSession?
        let page: Future<(Data, URLResponse)>
        do {
            let session = FutureURLSession()
            released = session
            page = session.data(for: server.request("/large"))
        }
        #expect(released == nil)
        #expect(try await page.value.0 == TestServer.largeBody)
        try await server.shutdown()
    }

    @Test func aRefusedConnectionIsAnErrorNotACancellation() async throws {
        let port = try TestServer.refusedPort()
        let request = URLRequest(url: URL(string: "http://127.0.0.1:\(port)/small")!, timeoutInterval: TestServer.timeout)
        let outcome = await FutureURLSession().data(for: request).result
        #expect(!outcome.isCancelled)
        #expect(outcome.error is URLError)
    }

    @Test func downloadsIntoAFileTheCallerOwns() async throws {
        let server = try TestServer()
        let download = FutureURLSession().download(for: server.request("/halves"))
        let seen = Recorder<Double>()
        download.whenProgress(on: .immediate) { progress in
            seen.append(progress)
            if progress >= 0.5 { server.openGate() }
        }
        let (file, response) = try await download.value
        #expect((response as? HTTPURLResponse)?.statusCode == 200)
        #expect(try Data(contentsOf: file) == TestServer.halvesBody)
        #expect(seen.all.contains { $0 > 0 && $0 < 1 }, "progress reported: \(seen.all)")
        try FileManager.default.removeItem(at: file)
        try await server.shutdown()
    }

    @Test func uploadsAndReportsBytesSent() async throws {
        let server = try TestServer()
        var request = server.request("/echo")
        request.httpMethod = "POST"
        let upload = FutureURLSession().upload(for: request, from: TestServer.largeBody)
        let (echoed, _) = try await upload.value
        #expect(echoed == TestServer.largeBody)
        try await server.shutdown()
    }

    /// The server reads nothing until the test saw a fraction sent, so the upload cannot be over
    /// before the handler is registered, however loaded the machine: 64 MiB is more than the
    /// sockets' buffers hold.
    @Test func reportsTheBytesSentWhileTheUploadRuns() async throws {
        let server = try TestServer()
        var request = server.request("/held")
        request.httpMethod = "POST"
        let body = Data(count: 64 << 20)
        let upload = longWaitSession().upload(for: request, from: body)
        let seen = Recorder<Double>()
        let partway = Promise<Void>()
        upload.whenProgress(on: .immediate) { fraction in
            seen.append(fraction)
            if fraction > 0 && fraction < 1 { _ = partway.succeed(()) }
        }
        _ = await partway.future.result
        server.openGate()
        let (count, _) = try await upload.value
        #expect(String(decoding: count, as: UTF8.self) == String(body.count))
        #expect(seen.all.contains { $0 > 0 && $0 < 1 }, "progress reported: \(seen.all)")
        #expect(seen.all == seen.all.sorted())
        try await server.shutdown()
    }
}

/// A session whose requests wait ``TestServer/timeout`` too: a session's own limit (60 s by
/// default) applies to a request that waits for one of the few connections to a host, and a slow
/// run (a sanitizer's) can keep a request waiting behind transfers that never end by themselves.
private func longWaitSession() -> FutureURLSession {
    let configuration = URLSessionConfiguration.default
    configuration.timeoutIntervalForRequest = TestServer.timeout
    return FutureURLSession(configuration: configuration)
}

/// Keeps every thread of the shared concurrent pool busy (as many blocks of `DispatchQueue.global()`
/// as the machine has cores, each spinning without a lock, which would let the pool add a thread)
/// from its creation, which returns once they all run, until ``release()``. So that a test whose
/// code needs the pool ends rather than hangs, the blocks give up on their own after ``limit``.
private final class BusyPool: Sendable {
    private let running = Atomic(0)
    private let released = Atomic(false)
    private let gaveUp = Atomic(false)

    static let limit: TimeInterval = 120

    init() {
        let threads = ProcessInfo.processInfo.activeProcessorCount
        let giveUp = Date(timeIntervalSinceNow: Self.limit)
        for _ in 0..<threads {
            DispatchQueue.global().async { [self] in
                running.add(1, ordering: .releasing)
                while !released.load(ordering: .acquiring) {
                    if Date() > giveUp {
                        gaveUp.store(true, ordering: .releasing)
                        break
                    }
                }
            }
        }
        while running.load(ordering: .acquiring) < threads { sched_yield() }
    }

    /// Lets the blocks end; `true` if none had given up.
    func release() -> Bool {
        released.store(true, ordering: .releasing)
        return !gaveUp.load(ordering: .acquiring)
    }
}
