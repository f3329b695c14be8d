// The bridge is built with the package trait FuturesNIO: `swift test --traits FuturesNIO`.
#if FuturesNIO
import Futures
import FuturesNIO
import NIOCore
import NIOPosix
import Testing

// The examples of the "Using with SwiftNIO" article, run on a real event loop.

func lookUpUser(id: Int, on loop: any EventLoop) -> EventLoopFuture<String> {
    loop.makeSucceededFuture("user \(id)")
}

@Suite struct UsingWithSwiftNIOTests {
    let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)

    @Test func fromSwiftNIOToFuturesAndBack() async throws {
        let loop = group.next()
        let user = Future(lookUpUser(id: 7, on: loop))
        let greeting = user.map(on: .eventLoop(loop)) { "Hello, \($0)" }
        let reply: EventLoopFuture<String> = greeting.eventLoopFuture(on: loop)
        #expect(try await reply.get() == "Hello, user 7")
        try await group.shutdownGracefully()
    }

    @Test func cancellation() async throws {
        let loop = group.next()
        let pending = Promise<String>()
        let converted = pending.future.eventLoopFuture(on: loop)
        pending.future.cancel()
        // `converted` fails with CancellationError.
        await #expect(throws: CancellationError.self) { try await converted.get() }
        try await group.shutdownGracefully()
    }

    @Test func callbacksOnTheLoop() async throws {
        let loop = group.next()
        let rows = Future(value: [3, 1, 2])
            .map(on: .eventLoop(loop)) { $0.sorted() }
            .flatMap(on: .eventLoop(loop)) { sorted in
                // Registered on the loop: `.current` is the loop.
                Future(value: sorted).map { $0.count }
            }
        #expect(try await rows.value == 3)
        try await group.shutdownGracefully()
    }
}
#endif
