import Testing
import FuturesTestSupport
@testable import Futures

@Suite("Transforms")
struct FutureMapTests {
    @Test func mapTransformsTheValueAndPassesFailuresThrough() {
        #expect(Future(value: 2).map(on: .immediate) { $0 * 3 }.outcome?.value == 6)
        let failed = Future<Int>(error: TestError()).map(on: .immediate) { $0 * 3 }
        #expect(failed.outcome?.error is TestError)
        #expect(Future<Int>.cancelled.map(on: .immediate) { $0 }.outcome?.isCancelled == true)
    }

    @Test func throwingInAMapFailsAndCancellationErrorCancels() {
        let failed = Future(value: 1).map(on: .immediate) { _ -> Int in throw TestError(code: 4) }
        #expect((failed.outcome?.error as? TestError)?.code == 4)
        let cancelled = Future(value: 1).map(on: .immediate) { _ -> Int in throw CancellationError() }
        #expect(cancelled.outcome?.isCancelled == true)
    }

    @Test func errorsFallThroughToTheFirstFailureHandler() {
        let ran = Recorder<String>()
        let result = Future<Int>(error: TestError(code: 9))
            .map(on: .immediate) { value -> Int in ran.append("map"); return value }
            .flatMap(on: .immediate) { value -> Future<Int> in ran.append("flatMap"); return Future(value: value) }
            .recover(on: .immediate) { error in (error as? TestError)?.code ?? 0 }
        #expect(ran.all.isEmpty)
        #expect(result.outcome?.value == 9)
    }

    @Test func flatMapCollapsesAndWaitsForTheInnerFuture() {
        let inner = Promise<String>()
        let outer = Future(value: 1).flatMap(on: .immediate) { _ in inner.future }
        #expect(outer.isPending)
        inner.succeed("done")
        #expect(outer.outcome?.value == "done")
    }

    @Test func flatMapReturningCancelledStopsTheChainButCompletionHandlersRun() {
        let recorder = Recorder<String>()
        let stopped = Future(value: 1)
            .flatMap(on: .immediate) { _ in Future<Int>.cancelled }
            .map(on: .immediate) { value -> Int in recorder.append("map"); return value }
            .recover(on: .immediate) { _ in recorder.append("recover"); return 0 }
        stopped.whenSuccess(on: .immediate) { _ in recorder.append("success") }
        stopped.whenFailure(on: .immediate) { _ in recorder.append("failure") }
        stopped.whenComplete(on: .immediate) { recorder.append("complete \($0)") }
        #expect(recorder.all == ["complete cancelled"])
    }

    @Test func mapErrorReplacesOnlyErrors() {
        let mapped = Future<Int>(error: TestError(code: 1)).mapError(on: .immediate) { _ in TestError(code: 2) }
        #expect((mapped.outcome?.error as? TestError)?.code == 2)
        #expect(Future(value: 5).mapError(on: .immediate) { _ in TestError() }.outcome?.value == 5)
        let toCancel = Future<Int>(error: TestError()).mapError(on: .immediate) { _ in CancellationError() }
        #expect(toCancel.outcome?.isCancelled == true)
    }

    @Test func recoverTurnsFailuresIntoValuesButNotCancellation() {
        #expect(Future<Int>(error: TestError()).recover(on: .immediate) { _ in 7 }.outcome?.value == 7)
        #expect(Future<Int>.cancelled.recover(on: .immediate) { _ in 7 }.outcome?.isCancelled == true)
        let rethrown = Future<Int>(error: TestError(code: 1)).recover(on: .immediate) { _ in throw TestError(code: 3) }
        #expect((rethrown.outcome?.error as? TestError)?.code == 3)
    }

    @Test func flatMapErrorFallsBackToASecondSource() {
        let server = Promise<String>()
        let person = Future<String>(error: TestError()).flatMapError(on: .immediate) { _ in server.future }
        #expect(person.isPending)
        server.succeed("from server")
        #expect(person.outcome?.value == "from server")
        #expect(Future(value: "disk").flatMapError(on: .immediate) { _ in server.future }.outcome?.value == "disk")
    }

    @Test func alwaysRunsOnEveryOutcomeAndPassesItOn() {
        let seen = Recorder<String>()
        let a = Future(value: 1).always(on: .immediate) { seen.append("\($0)") }
        let b = Future<Int>(error: TestError()).always(on: .immediate) { seen.append($0.isFailure ? "failure" : "?") }
        let c = Future<Int>.cancelled.always(on: .immediate) { seen.append("\($0)") }
        #expect(seen.all == ["success(1)", "failure", "cancelled"])
        #expect(a.outcome?.value == 1)
        #expect(b.outcome?.isFailure == true)
        #expect(c.outcome?.isCancelled == true)
    }

    @Test func alwaysCompletesOnlyAfterItsBodyRan() {
        let executor = ManualExecutor()
        let promise = Promise<Int>()
        let after = promise.future.always(on: executor) { _ in }
        promise.succeed(1)
        #expect(after.isPending)
        executor.runAll()
        #expect(after.outcome?.value == 1)
    }

    @Test func transformsRunOnTheirExecutorNotInline() {
        let executor = ManualExecutor()
        let mapped = Future(value: 1).map(on: executor) { $0 + 1 }
        #expect(mapped.isPending, "the transform is queued, not run inside map")
        #expect(executor.queuedCount == 1)
        executor.runAll()
        #expect(mapped.outcome?.value == 2)
    }

    @Test func failuresPassThroughWithoutAHop() {
        let executor = ManualExecutor()
        let mapped = Future<Int>(error: TestError()).map(on: executor) { $0 + 1 }
        #expect(executor.queuedCount == 0)
        #expect(mapped.outcome?.error is TestError)
    }

    @Test func transformClosuresAreReleasedOnceRun() {
        weak var weakProbe: Probe?
        let promise = Promise<Int>()
        let mapped: Future<Int>
        do {
            let probe = Probe(5)
            weakProbe = probe
            mapped = promise.future.map(on: .immediate) { $0 + probe.id }
        }
        #expect(weakProbe != nil)
        promise.succeed(1)
        #expect(mapped.outcome?.value == 6)
        #expect(weakProbe == nil)
    }

    @Test func flatMapTransformsAreReleasedOnceRun() {
        // An `.immediate` flatMap keeps its transform in the derived future until the transform runs.
        weak var weakProbe: Probe?
        let promise = Promise<Int>()
        let inner = Promise<Int>()
        let chained: Future<Int>
        do {
            let probe = Probe(5)
            weakProbe = probe
            chained = promise.future.flatMap(on: .immediate) { value in
                let offset = value + probe.id  // the returned future does not capture the probe
                return inner.future.map(on: .immediate) { $0 + offset }
            }
        }
        #expect(weakProbe != nil)
        promise.succeed(1)
        #expect(chained.isPending)
        #expect(weakProbe == nil, "released once run, while the derived future is still pending")
        inner.succeed(10)
        #expect(chained.outcome?.value == 16)
    }

    @Test func transformsOnAnExecutorAreReleasedOnceRun() {
        weak var weakProbe: Probe?
        let executor = ManualExecutor()
        let promise = Promise<Int>()
        let mapped: Future<Int>
        do {
            let probe = Probe(5)
            weakProbe = probe
            mapped = promise.future.map(on: executor) { $0 + probe.id }
        }
        promise.succeed(1)
        #expect(weakProbe != nil, "queued on the executor")
        executor.runAll()
        #expect(mapped.outcome?.value == 6)
        #expect(weakProbe == nil)
    }

    @Test func transformsOnAnExecutorAreReleasedUnrunWhenTheSourceFailsOrIsCancelled() {
        for cancels in [false, true] {
            weak var weakProbe: Probe?
            let executor = ManualExecutor()
            let promise = Promise<Int>()
            let ran = Recorder<Int>()
            let mapped: Future<Int>
            do {
                let probe = Probe(5)
                weakProbe = probe
                mapped = promise.future.map(on: executor) { value in
                    ran.append(value)
                    return value + probe.id
                }
            }
            if cancels { _ = promise.future.cancel() } else { promise.fail(TestError()) }
            #expect(executor.queuedCount == 0, "passed through without a job")
            #expect(weakProbe == nil, "released unrun")
            #expect(cancels ? mapped.outcome?.isCancelled == true : mapped.outcome?.error is TestError)
            #expect(ran.all.isEmpty)
        }
    }
}
