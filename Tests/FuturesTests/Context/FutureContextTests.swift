import Dispatch
import Foundation
import Futures
import FuturesTestHelpers
import FuturesTestSupport
import Synchronization
import Testing

/// Runs `body` with `label` as the value ``TestContextCarrier`` carries.
@discardableResult
private func with<R>(_ label: String?, _ body: () throws -> R) rethrows -> R {
    try TestContext.$label.withValue(label, operation: body)
}

/// Where a callback ran, and the label current there.
private struct Sighting: Hashable, Sendable {
    let kind: String
    let label: String?
}

/// Records, for each callback, the label current while it ran.
private final class Sightings: Sendable {
    let recorder = Recorder<Sighting>()

    func note(_ kind: String) { recorder.append(Sighting(kind: kind, label: TestContext.label)) }

    var all: [Sighting] { recorder.all }
    var kinds: Set<String> { Set(all.map(\.kind)) }
    var labels: Set<String?> { Set(all.map(\.label)) }
}

/// Every test registers its callbacks with one label current, completes the futures with another,
/// and runs the executors' jobs with a third: a callback sees the first only if it was carried.
@Suite struct FutureContextTests {
    init() { _ = contextCarriersInstalled }

    @Test func aMapRunsWithTheContextOfItsRegistrationOnItsExecutor() {
        let executor = ManualExecutor()
        let seen = Sightings()
        let promise = Promise<Int>()
        let mapped = with("registered") {
            promise.future.map(on: executor) { value in
                seen.note("map")
                return value * 2
            }
        }
        with("completer") { promise.succeed(21) }
        #expect(seen.all.isEmpty, "queued on the executor, not run")
        with("runner") { _ = executor.runAll() }
        #expect(seen.all == [Sighting(kind: "map", label: "registered")])
        #expect(mapped.outcome?.value == 42)
    }

    @Test func anImmediateCallbackRunsWithTheContextOfItsRegistrationOnTheCompletingThread() {
        let seen = Sightings()
        let promise = Promise<Int>()
        with("registered") {
            promise.future.whenSuccess(on: .immediate) { _ in seen.note("whenSuccess") }
            promise.future.whenComplete(on: .immediate) { _ in seen.note("whenComplete") }
            _ = promise.future.map(on: .immediate) { _ in seen.note("map") }
        }
        with("completer") { promise.succeed(1) }
        #expect(seen.kinds == ["whenSuccess", "whenComplete", "map"])
        #expect(seen.labels == ["registered"])
    }

    @Test func everyKindOfCallbackRunsWithTheContextOfItsRegistration() {
        let executor = ManualExecutor()
        let seen = Sightings()
        let succeeding = Promise<Int>()
        let failing = Promise<Int>()
        let cancelled = Promise<Int>()
        var derived: [Future<Int>] = []
        with("registered") {
            succeeding.future.whenSuccess(on: executor) { _ in seen.note("whenSuccess") }
            failing.future.whenFailure(on: executor) { _ in seen.note("whenFailure") }
            cancelled.future.whenCancelled(on: executor) { seen.note("whenCancelled") }
            succeeding.future.whenComplete(on: executor) { _ in seen.note("whenComplete") }
            succeeding.future.whenProgress(on: executor) { _ in seen.note("whenProgress") }
            cancelled.onCancel { seen.note("onCancel") }
            derived = [
                succeeding.future.map(on: executor) { value in
                    seen.note("map")
                    return value
                },
                succeeding.future.flatMap(on: executor) { value in
                    seen.note("flatMap")
                    return Future(value: value)
                },
                failing.future.mapError(on: executor) { error in
                    seen.note("mapError")
                    return error
                },
                failing.future.recover(on: executor) { _ in
                    seen.note("recover")
                    return 0
                },
                failing.future.flatMapError(on: executor) { _ in
                    seen.note("flatMapError")
                    return Future(value: 0)
                },
                succeeding.future.always(on: executor) { _ in seen.note("always") },
                cancelled.future.mapOutcome(on: executor) { _ in
                    seen.note("mapOutcome")
                    return 0
                },
                succeeding.future.flatMapOutcome(on: executor) { outcome in
                    seen.note("flatMapOutcome")
                    return Future(outcome: outcome)
                },
            ]
        }
        with("completer") {
            succeeding.progress = 0.5
            succeeding.succeed(1)
            failing.fail(TestError())
            cancelled.cancel()
        }
        with("runner") { _ = executor.runAll() }
        #expect(
            seen.kinds == [
                "whenSuccess", "whenFailure", "whenCancelled", "whenComplete", "whenProgress", "onCancel", "map",
                "flatMap", "mapError", "recover", "flatMapError", "always", "mapOutcome", "flatMapOutcome",
            ])
        #expect(seen.labels == ["registered"])
        #expect(derived.allSatisfy { !$0.isPending })
    }

    @Test func callbacksOnOneFutureEachRunWithTheirOwnContext() {
        let executor = ManualExecutor()
        let seen = Sightings()
        let promise = Promise<Int>()
        with("first") { promise.future.whenSuccess(on: executor) { _ in seen.note("callback") } }
        with("second") { promise.future.whenSuccess(on: executor) { _ in seen.note("callback") } }
        with("completer") { promise.succeed(1) }
        with("runner") { _ = executor.runAll() }
        #expect(seen.all.map(\.label) == ["first", "second"])
    }

    @Test func aCallbackRegisteredInsideACallbackKeepsTheOuterRegistrationsContext() {
        let executor = ManualExecutor()
        let seen = Sightings()
        let outer = Promise<Int>()
        let inner = Promise<Int>()
        with("registered") {
            outer.future.whenSuccess(on: executor) { _ in
                inner.future.whenSuccess(on: executor) { _ in seen.note("inner") }
            }
        }
        with("completer") { outer.succeed(1) }
        with("runner") { _ = executor.runAll() }
        with("completer") { inner.succeed(2) }
        with("runner") { _ = executor.runAll() }
        #expect(seen.all == [Sighting(kind: "inner", label: "registered")])
    }

    @Test func everyInstalledCarrierIsRestored() {
        let executor = ManualExecutor()
        let promise = Promise<Int>()
        let seen = Recorder<String>()
        TestContext.$number.withValue(7) {
            with("registered") {
                promise.future.whenSuccess(on: executor) { _ in
                    seen.append("\(TestContext.label ?? "none") \(TestContext.number ?? 0)")
                }
            }
        }
        TestContext.$number.withValue(1) { with("completer") { promise.succeed(1) } }
        TestContext.$number.withValue(2) { with("runner") { _ = executor.runAll() } }
        #expect(seen.all == ["registered 7"])
    }

    @Test func aCallbackRegisteredWithNoContextRunsWithNoneOnTheCompletingThread() {
        let seen = Sightings()
        let promise = Promise<Int>()
        with(nil) {
            promise.future.whenSuccess(on: .immediate) { _ in seen.note("whenSuccess") }
            _ = promise.future.map(on: .immediate) { _ in seen.note("map") }
        }
        with("completer") { promise.succeed(1) }
        #expect(seen.kinds == ["whenSuccess", "map"])
        #expect(seen.labels == [nil])
    }

    @Test func aCallbackRegisteredWithNoContextRunsWithNoneOnItsExecutor() {
        let executor = ManualExecutor()
        let seen = Sightings()
        let succeeding = Promise<Int>()
        let cancelled = Promise<Int>()
        let mapped = with(nil) {
            succeeding.future.whenSuccess(on: executor) { _ in seen.note("whenSuccess") }
            succeeding.future.whenProgress(on: executor) { _ in seen.note("whenProgress") }
            cancelled.future.whenCancelled(on: executor) { seen.note("whenCancelled") }
            return succeeding.future.map(on: executor) { value in
                seen.note("map")
                return value
            }
        }
        with("completer") {
            succeeding.progress = 0.5
            succeeding.succeed(1)
            cancelled.cancel()
        }
        with("runner") { _ = executor.runAll() }
        #expect(seen.kinds == ["whenSuccess", "whenProgress", "whenCancelled", "map"])
        #expect(seen.labels == [nil], "neither the completer's context nor the runner's")
        #expect(mapped.outcome?.value == 1)
    }

    @Test func aMapOnAGlobalQueueRegisteredWithNoContextRunsWithNone() async throws {
        let promise = Promise<Int>()
        let mapped = with(nil) { promise.future.map(on: .global()) { _ in TestContext.label } }
        with("completer") { promise.succeed(1) }
        #expect(try await mapped.value == nil)
    }

    @Test func aCarrierWithoutAValueIsClearedWhileAnotherIsRestored() {
        let executor = ManualExecutor()
        let promise = Promise<Int>()
        let seen = Recorder<String>()
        with("registered") {
            promise.future.whenSuccess(on: executor) { _ in
                seen.append("\(TestContext.label ?? "none") \(TestContext.number ?? 0)")
            }
        }
        TestContext.$number.withValue(1) { with("completer") { promise.succeed(1) } }
        TestContext.$number.withValue(2) { with("runner") { _ = executor.runAll() } }
        #expect(seen.all == ["registered 0"])
    }

    @Test func aCallbackOnACompletedFutureRunsWithItsRegistrationsContextOnEveryExecutor() async throws {
        let completed = Future(value: 1)
        let labels: [Future<String?>] = with("registered") {
            [
                completed.map(on: .immediate) { _ in TestContext.label },
                completed.map(on: .global()) { _ in TestContext.label },
                completed.map(on: .queue(DispatchQueue(label: "context"))) { _ in TestContext.label },
                completed.map(on: .main) { _ in TestContext.label },
                completed.map(on: .mainImmediate) { _ in TestContext.label },
            ]
        }
        for label in labels { #expect(try await label.value == "registered") }
    }

    @Test func observersOfMergedFuturesKeepTheirOwnContexts() {
        let seen = Recorder<String>()
        let outer = Promise<Int>()
        let inner = Promise<Int>()
        let result = with("flatMap") { outer.future.flatMap(on: .immediate) { _ in inner.future } }
        with("inner") { inner.future.whenComplete(on: .immediate) { _ in seen.append("inner \(TestContext.label ?? "none")") } }
        with("result") { result.whenComplete(on: .immediate) { _ in seen.append("result \(TestContext.label ?? "none")") } }
        with("completer") { outer.succeed(1) }  // the result merges into the inner future
        let late = with("late") {
            inner.future.map(on: .immediate) { value in
                seen.append("late \(TestContext.label ?? "none")")
                return value
            }
        }
        with("completer") { inner.succeed(5) }
        #expect(Set(seen.all) == ["inner inner", "result result", "late late"])
        #expect(late.outcome?.value == 5)
    }

    @Test func seriallyConcurrentlyAndWhenEachCompleteRunWithTheirCallsContext() async throws {
        let gates = (0..<6).map { _ in Promise<Int>() }
        let seen = Recorder<String>()
        let serial = with("serially") {
            Future<[Int]>.serially(0..<3) { index in
                seen.append("serially \(TestContext.label ?? "none")")
                return gates[index].future
            }
        }
        let concurrent = with("concurrently") {
            Future<[Int]>.concurrently(3..<6, limit: 1) { index in
                seen.append("concurrently \(TestContext.label ?? "none")")
                return gates[index].future
            }
        }
        with("each") {
            gates.map(\.future).whenEachComplete(on: .immediate) { _, _ in seen.append("each \(TestContext.label ?? "none")") }
        }
        with("completer") { for gate in gates { gate.succeed(1) } }
        _ = try await serial.value
        _ = try await concurrent.value
        #expect(Set(seen.all) == ["serially serially", "concurrently concurrently", "each each"])
        #expect(seen.all.count == 12)
    }

    @Test func aFutureOperationRunsItsWorkWithTheContextWhereItWasMade() async throws {
        let queue = OperationQueue()
        let operation = with("made") { FutureOperation { Future(value: TestContext.label) } }
        let added = with("added") { queue.addFuture { Future(value: TestContext.label) } }
        with("starter") { queue.addOperation(operation) }
        #expect(try await operation.future.value == "made")
        #expect(try await added.value == "added")
    }

    #if canImport(Darwin)
    // (Swift key-value observing needs the Objective-C runtime.)
    @Test func aFutureOperationFinishesWithTheContextWhereItWasMade() {
        // The observers of its finishing run on the thread that completes its future.
        let work = Promise<Int>()
        let operation = with("made") { FutureOperation { work.future } }
        let seen = Recorder<String?>()
        let observation = operation.observe(\.isFinished) { operation, _ in
            if operation.isFinished { seen.append(TestContext.label) }
        }
        with("starter") { operation.start() }
        with("completer") { work.succeed(1) }
        #expect(seen.all == ["made"])
        observation.invalidate()
    }
    #endif

    @Test func eachRegistrationCapturesOnceAndEachRunRestoresOnce() async {
        await #expect(processExitsWith: .success) {
            FutureContext.bootstrap(CountingCarrier.self)
            let executor = ManualExecutor()
            let promise = Promise<Int>()
            CountingCarrier.$tag.withValue("registered") {
                promise.future.whenSuccess(on: executor) { _ in CountingCarrier.check("registered") }
                _ = promise.future.map(on: executor) { _ in CountingCarrier.check("registered") }
            }
            promise.future.whenComplete(on: executor) { _ in CountingCarrier.check(nil) }
            CountingCarrier.$tag.withValue("completer") { promise.succeed(1) }
            let beforeRun = CountingCarrier.counts.withLock { $0 }
            CountingCarrier.$tag.withValue("runner") { _ = executor.runAll() }
            let afterRun = CountingCarrier.counts.withLock { $0 }
            // Three registrations: three captures, none at the completion or the hand-off; each
            // callback restored once, in its job (two values, one absence).
            guard beforeRun == CountingCarrier.Counts(captures: 3, restores: 0, withoutValue: 0),
                afterRun == CountingCarrier.Counts(captures: 3, restores: 2, withoutValue: 1),
                !CountingCarrier.mismatch.withLock({ $0 })
            else { exit(3) }
        }
    }

    @Test func callbacksOnJoinsRunWithTheirRegistrationsContextWhateverCompletesTheMembers() {
        let executor = ManualExecutor()
        let seen = Sightings()
        let first = Promise<Int>()
        let second = Promise<Int>()
        with("registered") {
            Future.all([first.future, second.future]).whenSuccess(on: executor) { _ in seen.note("all") }
            Future.any([first.future, second.future]).whenSuccess(on: executor) { _ in seen.note("any") }
            Future.race([first.future, second.future]).whenSuccess(on: executor) { _ in seen.note("race") }
            Future.zip(first.future, second.future).whenSuccess(on: executor) { _ in seen.note("zip") }
        }
        with("first completer") { first.succeed(1) }
        with("second completer") { second.succeed(2) }
        with("runner") { _ = executor.runAll() }
        #expect(seen.kinds == ["all", "any", "race", "zip"])
        #expect(seen.labels == ["registered"])
    }

    @Test func aCallbackOnATimeoutRunsWithItsRegistrationsContextWhenTheTimerFires() async {
        let clock = ManualClock()
        let executor = ManualExecutor()
        let seen = Sightings()
        let promise = Promise<Int>()
        let timed = with("made") { promise.future.timeout(after: .seconds(5), clock: clock) }
        with("registered") { timed.whenFailure(on: executor) { _ in seen.note("timedOut") } }
        with("clock") { clock.advance(by: .seconds(5)) }
        #expect(await timed.result.error is FutureError)
        with("runner") { _ = executor.runAll() }
        #expect(seen.all == [Sighting(kind: "timedOut", label: "registered")])
    }

    @Test func everyAttemptOfARetryRunsWithTheContextOfTheCall() async throws {
        let clock = ManualClock()
        let seen = Sightings()
        let firstAttempt = Promise<Int>()
        let attempts = Counter()
        let result = with("registered") {
            Future<Int>.retry(attempts: 3, backoff: .constant(.seconds(1)), clock: clock) {
                seen.note("attempt")
                return attempts.increment() == 1 ? firstAttempt.future : Future(value: 2)
            }
        }
        with("completer") { firstAttempt.fail(TestError()) }
        with("clock") { clock.advance(by: .seconds(1)) }
        #expect(try await result.value == 2)
        #expect(seen.all == Array(repeating: Sighting(kind: "attempt", label: "registered"), count: 2))
    }

    @Test func aQueuedOperationStartsWithTheContextOfTheCallThatAddedIt() async throws {
        let queue = FutureQueue(maxConcurrent: 1)
        let seen = Sightings()
        let first = Promise<Int>()
        let firstResult = with("first") {
            queue.add {
                seen.note("first")
                return first.future
            }
        }
        let secondResult = with("second") {
            queue.add {
                seen.note("second")
                return Future(value: 2)
            }
        }
        with("completer") { first.succeed(1) }
        #expect(try await firstResult.value == 1)
        #expect(try await secondResult.value == 2)
        #expect(seen.all == [Sighting(kind: "first", label: "first"), Sighting(kind: "second", label: "second")])
    }

    @Test func theWorkOfFutureOnAnExecutorRunsWithTheContextOfTheCall() {
        let executor = ManualExecutor()
        let future = with("made") { Future(on: executor) { TestContext.label } }
        with("runner") { _ = executor.runAll() }
        #expect(future.outcome?.value == "made")
    }

    @Test func aDeferredFuturesWorkRunsWithTheContextWhereItWasMade() {
        let seen = Sightings()
        let future = with("made") {
            Future<Int>.deferred {
                seen.note("deferred")
                return Future(value: 1)
            }
        }
        with("consumer") { future.whenSuccess(on: .immediate) { _ in seen.note("consumer") } }
        #expect(seen.all == [Sighting(kind: "deferred", label: "made"), Sighting(kind: "consumer", label: "consumer")])
    }

    @Test func anAsyncFuturesTaskHasTheContextOfTheCall() async throws {
        let future = with("made") {
            Future { () async -> String? in
                await Task.yield()
                return TestContext.label
            }
        }
        #expect(try await future.value == "made")
    }

    @Test func aTokensHandlerRunsWithTheContextOfItsRegistration() {
        let source = CancellationSource()
        let other = CancellationSource()
        let seen = Sightings()
        with("registered") {
            source.token.onCancel { seen.note("onCancel") }
            source.token.onCancel(unless: other.token) { seen.note("onCancel(unless:)") }
        }
        with("canceller") { source.cancel() }
        #expect(seen.kinds == ["onCancel", "onCancel(unless:)"])
        #expect(seen.labels == ["registered"])
    }

    @Test func aLongImmediateChainRegisteredWithAContextRunsOnASmallStack() async {
        let links = 100_000
        let promise = Promise<Int>()
        var chain = promise.future
        with("registered") {
            for _ in 0..<links { chain = chain.map(on: .immediate) { $0 + 1 } }
        }
        let end = chain
        await onSmallStackOffThePool { with("completer") { _ = promise.succeed(0) } }
        #expect(end.outcome?.value == links)
    }

    @Test func aCachesOwnRegistrationsCaptureNoContext() async {
        await #expect(processExitsWith: .success) {
            FutureContext.bootstrap(CountingCarrier.self)
            let cache = FutureCache<Int, Int>()
            let fetch = Promise<Int>()
            CountingCarrier.$tag.withValue("caller") {
                // The fetch's registrations, made under the cache's lock, capture nothing (a
                // carrier's `capture()` is user code); the caller's own callback captures once.
                cache.value(for: 1) { fetch.future }.whenSuccess(on: .immediate) { _ in CountingCarrier.check("caller") }
                _ = cache.value(for: 1) { Future(value: 2) }
            }
            fetch.succeed(1)
            let counts = CountingCarrier.counts.withLock { $0 }
            guard counts == CountingCarrier.Counts(captures: 1, restores: 1, withoutValue: 0),
                !CountingCarrier.mismatch.withLock({ $0 })
            else { exit(3) }
        }
    }

    @Test func theLibrarysOwnRegistrationsCaptureNoContext() async {
        await #expect(processExitsWith: .success) {
            FutureContext.bootstrap(CountingCarrier.self)
            let first = Promise<Int>()
            let second = Promise<Int>()
            let source = CancellationSource()
            let observe: @Sendable (Future<Int>) -> Void = { future in
                future.whenComplete(on: .immediate) { _ in CountingCarrier.check("caller") }
            }
            CountingCarrier.$tag.withValue("caller") {
                // Joins, branches, timeouts, races, the bridges' consumers: their own steps run no
                // user code, so only the caller's callbacks capture, one each.
                Future.zip(first.future, second.future).whenComplete(on: .immediate) { _ in CountingCarrier.check("caller") }
                observe(Future.all([first.future, second.future]).map(on: .immediate) { $0[0] })
                observe(Future.race([first.future, second.future]))
                observe(first.future.observe())
                observe(first.future.cancellable(by: source.token))
                observe(first.future.timeout(after: .seconds(600)))
                for slot in [first.future, second.future].orderedByCompletion() { observe(slot) }
            }
            let registered = CountingCarrier.counts.withLock { $0 }
            CountingCarrier.$tag.withValue("completer") {
                first.succeed(1)
                second.succeed(2)
            }
            let counts = CountingCarrier.counts.withLock { $0 }
            // Eight callbacks and one `map`: nine captures, each restored once.
            guard registered.captures == 9,
                counts == CountingCarrier.Counts(captures: 9, restores: 9, withoutValue: 0),
                !CountingCarrier.mismatch.withLock({ $0 })
            else { exit(3) }
        }
    }

    @Test func aSecondBootstrapTraps() async {
        await #expect(processExitsWith: .success) {
            FutureContext.bootstrap(TestContextCarrier.self)
        }
        await #expect(processExitsWith: .failure) {
            FutureContext.bootstrap(TestContextCarrier.self)
            FutureContext.bootstrap(SecondTestContextCarrier.self)
        }
    }

    @Test func aBootstrapThatNamesACarrierTwiceTraps() async {
        await #expect(processExitsWith: .failure) {
            FutureContext.bootstrap(TestContextCarrier.self, TestContextCarrier.self)
        }
    }
}

/// Counts the captures, restores and clearings of its value, for the test that each happens once.
private struct CountingCarrier: FutureContextCarrier {
    struct Counts: Equatable {
        var captures = 0
        var restores = 0
        var withoutValue = 0
    }

    @TaskLocal static var tag: String?
    static let counts = Mutex(Counts())
    static let mismatch = Mutex(false)

    let tag: String

    static func capture() -> CountingCarrier? {
        counts.withLock { $0.captures += 1 }
        return tag.map(CountingCarrier.init)
    }

    func restore<R>(_ body: () throws -> R) rethrows -> R {
        Self.counts.withLock { $0.restores += 1 }
        return try Self.$tag.withValue(tag, operation: body)
    }

    static func withoutValue<R>(_ body: () throws -> R) rethrows -> R {
        counts.withLock { $0.withoutValue += 1 }
        return try $tag.withValue(nil, operation: body)
    }

    /// Notes a callback that did not see `expected`.
    static func check(_ expected: String?) {
        if tag != expected { mismatch.withLock { $0 = true } }
    }
}
