import Dispatch
import Testing
import FuturesTestSupport
@testable import Futures

@Suite("Outcome transforms")
struct FutureOutcomeTransformTests {
    @Test func mapOutcomeSeesEveryOutcome() {
        func describe(_ future: Future<Int>) -> String? {
            future.mapOutcome(on: .immediate) { outcome -> String in
                switch outcome {
                case .success(let value): "value \(value)"
                case .failure(let error): "error \((error as? TestError)?.code ?? -1)"
                case .cancelled: "cancelled"
                }
            }.outcome?.value
        }
        #expect(describe(Future(value: 3)) == "value 3")
        #expect(describe(Future(error: TestError(code: 5))) == "error 5")
        #expect(describe(.cancelled) == "cancelled")
    }

    @Test func mapOutcomeTurnsAnUpstreamCancellationIntoAValueWhoeverCancelled() {
        // Cancelled by its producer.
        let promise = Promise<Int>()
        let byProducer = promise.future.mapOutcome(on: .immediate) { $0.isCancelled ? -1 : 0 }
        promise.cancel()
        #expect(byProducer.outcome?.value == -1)

        // Cancelled directly by someone holding the source (another branch of the program).
        let other = Promise<Int>()
        let source = other.future.map(on: .immediate) { $0 }
        let recovered = source.mapOutcome(on: .immediate) { $0.isCancelled ? -2 : 0 }
        source.cancel()
        #expect(recovered.outcome?.value == -2)
        withExtendedLifetime(other) {}
    }

    @Test func throwingFromMapOutcomeFailsAndAnErrorThatMeansCancellationCancels() {
        let failed = Future(value: 1).mapOutcome(on: .immediate) { _ -> Int in throw TestError(code: 8) }
        #expect((failed.outcome?.error as? TestError)?.code == 8)
        let cancelled = Future(value: 1).mapOutcome(on: .immediate) { _ -> Int in throw CancellationError() }
        #expect(cancelled.outcome?.isCancelled == true)
    }

    @Test func aCancelledMapOutcomeNeverRunsItsClosureInline() {
        let runs = Counter()
        let promise = Promise<Int>()
        let derived = promise.future.mapOutcome(on: .immediate) { _ in runs.increment() }
        // The derived future is the source's only consumer: cancelling it cancels the source,
        // whose callbacks then run with `.cancelled`; the closure must not.
        #expect(derived.cancel())
        #expect(promise.isCancelled)
        #expect(runs.value == 0)
        #expect(derived.outcome?.isCancelled == true)
    }

    @Test func aMapOutcomeCancelledBeforeItsJobRunsNeverRunsItsClosure() {
        let executor = ManualExecutor()
        let runs = Counter()
        let promise = Promise<Int>()
        let derived = promise.future.mapOutcome(on: executor) { _ in runs.increment() }
        promise.succeed(1)
        #expect(executor.queuedCount == 1)
        #expect(derived.cancel())
        _ = executor.runAll()
        #expect(runs.value == 0)
        #expect(derived.outcome?.isCancelled == true)
    }

    @Test func flatMapOutcomeCancelledBeforeItsJobRunsNeverRunsItsClosure() {
        let executor = ManualExecutor()
        let runs = Counter()
        let promise = Promise<Int>()
        let derived = promise.future.flatMapOutcome(on: executor) { _ -> Future<Int> in
            runs.increment()
            return Future(value: 0)
        }
        promise.cancel()
        #expect(derived.cancel())
        _ = executor.runAll()
        #expect(runs.value == 0)
    }

    @Test func mapOutcomeIsAConsumerOfItsSource() {
        let promise = Promise<Int>()
        let shared = promise.future.map(on: .immediate) { $0 }
        let first = shared.mapOutcome(on: .immediate) { $0.value ?? 0 }
        let second = shared.mapOutcome(on: .immediate) { $0.value ?? 0 }
        first.cancel()
        #expect(shared.isPending, "another consumer still needs it")
        second.cancel()
        #expect(shared.outcome?.isCancelled == true, "the last consumer withdrew")
        #expect(promise.isCancelled)
    }

    @Test func flatMapOutcomeRecoversFromCancellationWithAnotherFuture() {
        let promise = Promise<String>()
        let fallback = Promise<String>()
        let picture = promise.future.flatMapOutcome(on: .immediate) { outcome in
            outcome.isCancelled ? fallback.future : Future(outcome: outcome)
        }
        promise.cancel()
        #expect(picture.isPending, "waits for the fallback")
        fallback.succeed("placeholder")
        #expect(picture.outcome?.value == "placeholder")
        #expect(Future(value: "real").flatMapOutcome(on: .immediate) { Future(outcome: $0) }.outcome?.value == "real")
        let thrown = Future(value: 1).flatMapOutcome(on: .immediate) { _ -> Future<Int> in throw TestError(code: 2) }
        #expect((thrown.outcome?.error as? TestError)?.code == 2)
    }

    @Test func mapOutcomeRunsOnItsExecutor() async {
        let queue = DispatchQueue(label: "mapOutcome")
        let key = DispatchSpecificKey<Bool>()
        queue.setSpecific(key: key, value: true)
        let onQueue = await Future<Int>.cancelled.mapOutcome(on: .queue(queue)) { _ in
            DispatchQueue.getSpecific(key: key) == true
        }.result
        #expect(onQueue.value == true)
    }

    @Test func documentedExamples() {
        func upload() -> Future<Void> { Future(error: TestError(code: 1)) }
        func loadPicture() -> Future<String> { .cancelled }
        @Sendable func loadPlaceholder() -> Future<String> { Future(value: "placeholder") }

        let status = upload().mapOutcome { outcome -> String in
            switch outcome {
            case .success: "sent"
            case .failure(let error): "failed: \(error)"
            case .cancelled: "cancelled"
            }
        }
        let picture = loadPicture().flatMapOutcome { outcome in
            outcome.isCancelled ? loadPlaceholder() : Future(outcome: outcome)
        }
        let nested: Future<Future<Int>> = Future(value: Future(value: 1))
        let flat: Future<Int> = nested.flatten()

        // `.current` from a test's thread: the steps hop to the global queue.
        let group = DispatchGroup()
        for future in [status.map(on: .immediate) { _ in }, picture.map(on: .immediate) { _ in }] {
            group.enter()
            future.whenComplete(on: .immediate) { _ in group.leave() }
        }
        #expect(group.wait(timeout: .now() + 10) == .success)
        #expect(status.outcome?.value?.hasPrefix("failed: ") == true)
        #expect(picture.outcome?.value == "placeholder")
        #expect(flat.outcome?.value == 1)
    }

    @Test func flattenCollapsesAFutureOfAFuture() {
        let outer = Promise<Future<Int>>()
        let inner = Promise<Int>()
        let flat = outer.future.flatten()
        outer.succeed(inner.future)
        #expect(flat.isPending)
        inner.succeed(7)
        #expect(flat.outcome?.value == 7)
        #expect(Future<Future<Int>>(error: TestError()).flatten().outcome?.error is TestError)
        #expect(Future<Future<Int>>.cancelled.flatten().outcome?.isCancelled == true)
        #expect(Future(value: Future<Int>.cancelled).flatten().outcome?.isCancelled == true)
    }

    // Deprecated, so that calling the deprecated overload compiles without a warning here. The
    // overload exists to warn users; CI checks that the warning appears (see `.ci/run`).
    @available(*, deprecated)
    @Test func mapReturningAFutureStillMakesAFutureOfAFuture() {
        let nested = Future(value: 1).map(on: .immediate) { Future(value: $0 + 1) }
        let inner: Future<Int>? = nested.outcome?.value
        #expect(inner?.outcome?.value == 2)
    }
}
