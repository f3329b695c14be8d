import Foundation
import FuturesTestSupport
import FuturesTestHelpers
import Testing
import Futures

/// The short forms a first user reaches for.
@Suite("Conveniences")
struct ConveniencesTests {
    struct Failure: Error {}

    @Test func aVoidPromiseSucceedsWithoutAnArgument() {
        let promise = Promise<Void>()
        #expect(promise.succeed())
        #expect(!promise.succeed())
        #expect(promise.future.outcome?.isSuccess == true)
    }

    @Test func aSynchronousClosureRunsInATask() async throws {
        @Sendable func work() throws -> Int { 6 }
        let answer = Future { 42 }
        let worked = Future { try work() }
        let thrown = Future<Int> { () throws -> Int in throw Failure() }
        #expect(try await answer.value == 42)
        #expect(try await worked.value == 6)
        #expect(await thrown.result.error is Failure)
    }

    @Test func theOtherClosureFormsKeepTheirMeaning() async throws {
        @Sendable func fetch() async throws -> Int { 9 }
        // A closure that takes the promise runs inline, before the initialiser returns.
        let wrapped = Future<Int> { promise in promise.succeed(1) }
        #expect(wrapped.outcome?.value == 1)
        let awaited = Future { try await fetch() }
        #expect(try await awaited.value == 9)
        let onExecutor = Future(on: .immediate) { 3 }
        #expect(onExecutor.outcome?.value == 3)
    }

    @Test func futureErrorsMatchInOneLine() async throws {
        let printed = PrintedLines()
        @Sendable func print(_ items: any Sendable...) { printed.record(items) }
        let clock = ManualClock()
        let never = Promise<Int>()
        let slow = never.future.timeout(after: .seconds(1), clock: clock)
        clock.advance(by: .seconds(1))
        // The README's three forms: a catch clause, an outcome, a test.
        do {
            _ = try await slow.value
        } catch FutureError.timedOut {
            print("too slow")
        }
        if case .failure(FutureError.timedOut) = await slow.result { print("too slow") }
        await #expect(throws: FutureError.timedOut) { try await slow.value }
        #expect(printed.all == ["too slow", "too slow"])
        // A case with associated values, without them:
        let broken = Future<Int> { _ in }
        #expect({ if case .failure(FutureError.brokenPromise) = broken.outcome { true } else { false } }())
        withExtendedLifetime(never) {}
    }
}
