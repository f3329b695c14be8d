// The bridge is built with the package trait FuturesNIO: `swift test --traits FuturesNIO`.
#if FuturesNIO
import Foundation
import FuturesTestHelpers
import Futures
import FuturesNIO
import NIOCore
import NIOPosix
import Testing

typealias Recorder<Element: Sendable> = FuturesTestHelpers.Recorder<Element>

struct Boom: Error, Equatable {}

/// Every test runs on a real two-thread event loop group.
@Suite struct FutureFromEventLoopFutureTests {
    let group = MultiThreadedEventLoopGroup(numberOfThreads: 2)

    @Test func succeedsWithTheEventLoopFuturesValue() async throws {
        let loop = group.next()
        let promise = loop.makePromise(of: Int.self)
        let future = Future(promise.futureResult)
        #expect(future.isPending)
        promise.succeed(42)
        #expect(try await future.value == 42)
        try await group.shutdownGracefully()
    }

    @Test func failsWithTheEventLoopFuturesError() async throws {
        let loop = group.next()
        let future = Future<Int>(loop.makeFailedFuture(Boom()))
        #expect(await future.result.error as? Boom == Boom())
        try await group.shutdownGracefully()
    }

    @Test func anErrorThatMeansCancellationCancelsIt() async throws {
        let loop = group.next()
        let future = Future<Int>(loop.makeFailedFuture(CancellationError()))
        #expect(await future.result.isCancelled)
        try await group.shutdownGracefully()
    }

    @Test func cancellingTheFutureLeavesTheEventLoopFutureAlone() async throws {
        let loop = group.next()
        let promise = loop.makePromise(of: Int.self)
        let future = Future(promise.futureResult)
        #expect(future.cancel())
        promise.succeed(1)
        #expect(try await promise.futureResult.get() == 1)
        #expect(future.outcome?.isCancelled == true)
        try await group.shutdownGracefully()
    }

    @Test func theExampleRuns() async throws {
        let loop = group.next()
        let greeting = Future(loop.makeSucceededFuture("hello"))
        let shout = greeting.map(on: .eventLoop(loop)) { $0.uppercased() }
        #expect(try await shout.value == "HELLO")
        try await group.shutdownGracefully()
    }
}

@Suite struct EventLoopFutureFromFutureTests {
    let group = MultiThreadedEventLoopGroup(numberOfThreads: 2)

    @Test func aCompletedFutureGivesACompletedEventLoopFuture() async throws {
        let loop = group.next()
        let converted = Future(value: 7).eventLoopFuture(on: loop)
        #expect(converted.eventLoop === loop)
        #expect(try await converted.get() == 7)
        try await group.shutdownGracefully()
    }

    @Test func aPendingFutureCompletesItLaterOnTheLoop() async throws {
        let loop = group.next()
        let promise = Promise<Int>()
        let converted = promise.future.eventLoopFuture(on: loop)
        let onLoop = Recorder<Bool>()
        converted.whenComplete { _ in onLoop.append(loop.inEventLoop) }
        // Completed from a thread that is not the loop's.
        DispatchQueue.global().async { _ = promise.succeed(5) }
        #expect(try await converted.get() == 5)
        try await loop.submit {}.get()   // the whenComplete above ran before this
        #expect(onLoop.all == [true])
        try await group.shutdownGracefully()
    }

    @Test func aFailureFailsItWithTheSameError() async throws {
        let loop = group.next()
        let promise = Promise<Int>()
        let converted = promise.future.eventLoopFuture(on: loop)
        _ = promise.fail(Boom())
        await #expect(throws: Boom.self) { try await converted.get() }
        try await group.shutdownGracefully()
    }

    @Test func aCancelledFutureFailsItWithCancellationError() async throws {
        let loop = group.next()
        let promise = Promise<Int>()
        let pending = promise.future.eventLoopFuture(on: loop)
        _ = promise.future.cancel()
        await #expect(throws: CancellationError.self) { try await pending.get() }
        let completed = Future<Int>.cancelled.eventLoopFuture(on: loop)
        await #expect(throws: CancellationError.self) { try await completed.get() }
        try await group.shutdownGracefully()
    }

    @Test func theConversionIsAConsumerThatKeepsTheFutureFromBeingCancelled() async throws {
        let loop = group.next()
        // Without a conversion, the map is the only consumer: cancelling it cancels the source.
        let alone = Promise<Int>()
        _ = alone.future.map { $0 + 1 }.cancel()
        #expect(alone.isCancelled)

        let source = Promise<Int>()
        let converted = source.future.eventLoopFuture(on: loop)
        _ = source.future.map { $0 + 1 }.cancel()
        #expect(!source.isCancelled)
        _ = source.succeed(3)
        #expect(try await converted.get() == 3)
        try await group.shutdownGracefully()
    }

    @Test func aRoundTripKeepsTheValue() async throws {
        let loop = group.next()
        let back = Future(Future(value: "round").eventLoopFuture(on: loop)).eventLoopFuture(on: group.next())
        #expect(try await back.get() == "round")
        try await group.shutdownGracefully()
    }
}

@Suite struct EventLoopExecutorTests {
    let group = MultiThreadedEventLoopGroup(numberOfThreads: 2)

    @Test func callbacksRunOnTheLoop() async throws {
        let loop = group.next()
        let promise = Promise<Int>()
        let onLoop = promise.future.map(on: .eventLoop(loop)) { _ in loop.inEventLoop }
        DispatchQueue.global().async { _ = promise.succeed(1) }
        #expect(try await onLoop.value)
        try await group.shutdownGracefully()
    }

    @Test func currentInsideALoopCallbackStaysOnTheLoop() async throws {
        let loop = group.next()
        let chain = Future(value: 1)
            .map(on: .eventLoop(loop)) { $0 + 1 }
            .map { _ in loop.inEventLoop }   // `.current`, registered outside any callback
        // The second map was registered here, not on the loop: it runs on `.global()`.
        #expect(try await chain.value == false)

        let nested = Future(value: 1).flatMap(on: .eventLoop(loop)) { value in
            // Registered inside a callback running on the loop: `.current` resolves to the loop.
            Future(value: value).map { _ in loop.inEventLoop }
        }
        #expect(try await nested.value)
        try await group.shutdownGracefully()
    }

    @Test func neverRunsACallbackInsideTheRegisteringCall() async throws {
        let loop = group.next()
        let order = Recorder<String>()
        try await loop.submit {
            Future(value: 1).whenSuccess(on: .eventLoop(loop)) { _ in order.append("callback") }
            order.append("registered")
        }.get()
        try await loop.submit {}.get()   // the queued callback ran before this task
        #expect(order.all == ["registered", "callback"])
        try await group.shutdownGracefully()
    }

    @Test func theExecutorKeepsItsLoop() async throws {
        let loop = group.next()
        #expect(EventLoopExecutor(loop).eventLoop === loop)
        let spelled: EventLoopExecutor = .eventLoop(loop)
        #expect(spelled.eventLoop === loop)
        try await group.shutdownGracefully()
    }
}
/// The context carried into callbacks (``FutureContext``) crosses the bridge.
@Suite struct NIOContextTests {
    let group = MultiThreadedEventLoopGroup(numberOfThreads: 2)

    init() { _ = contextCarriersInstalled }

    @Test func aCallbackOnAFutureOfAnEventLoopFutureRunsOnTheLoopWithTheContextOfItsRegistration() async throws {
        let loop = group.next()
        let nioPromise = loop.makePromise(of: Int.self)
        let future = Future(nioPromise.futureResult)
        let seen = Recorder<String?>()
        let mapped = TestContext.$label.withValue("registered") {
            future.map(on: .eventLoop(loop)) { value in
                seen.append(loop.inEventLoop ? TestContext.label : "off the loop")
                return value + 1
            }
        }
        TestContext.$label.withValue("completer") { nioPromise.succeed(1) }
        #expect(try await mapped.value == 2)
        #expect(seen.all == ["registered"])
        try await group.shutdownGracefully()
    }

    @Test func workOnAnEventLoopExecutorRunsWithTheContextOfTheCall() async throws {
        let loop = group.next()
        let future = TestContext.$label.withValue("made") { Future(on: .eventLoop(loop)) { TestContext.label } }
        #expect(try await future.value == "made")
        try await group.shutdownGracefully()
    }
}
#endif
