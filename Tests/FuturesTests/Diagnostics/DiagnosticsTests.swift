import Foundation
import Futures
import FuturesTestHelpers
import FuturesTestSupport
import Testing

/// A scope whose events a test reads: the events of the futures made inside it, none of other
/// tests'.
///
/// `.stalled` events are left out unless asked for: a watchdog reports every tracked future
/// (another test's, running in parallel, reports this test's pending futures to this scope too).
final class EventScope: Sendable {
    let scope: FutureDiagnostics.Scope
    let recorded = Recorder<FutureEvent>()
    let events: AsyncStream<FutureEvent>

    init(includingStalled: Bool = false) {
        FutureDiagnostics.startTracking()
        let (events, continuation) = AsyncStream<FutureEvent>.makeStream()
        let recorded = recorded
        self.events = events
        scope = FutureDiagnostics.Scope { event in
            if case .stalled = event, !includingStalled { return }
            recorded.append(event)
            continuation.yield(event)
        }
    }

    /// Waits for the next event.
    func next() async -> FutureEvent? {
        var iterator = events.makeAsyncIterator()
        return await iterator.next()
    }
}

struct TrackedTestError: Error {}

@Suite struct DiagnosticsTests {
    @Test func aTrackedFutureRecordsItsKindCallSiteAndName() throws {
        FutureDiagnostics.startTracking()
        let scope = FutureDiagnostics.Scope()
        let (promise, promiseLine) = scope.run { (Promise<Int>(), #line) }
        let (doubled, mapLine) = scope.run { (promise.future.map(on: .immediate) { $0 * 2 }.named("doubled"), #line) }
        let pending = scope.pendingFutures
        #expect(pending.count == 2)
        let source = try #require(pending.first { $0.kind == "promise" })
        let mapped = try #require(pending.first { $0.kind == "map" })
        #expect(source.file == #fileID)
        #expect(source.line == promiseLine)
        #expect(source.consumers == 1)
        #expect(source.waitingOn.isEmpty)
        #expect(mapped.file == #fileID)
        #expect(mapped.line == mapLine)
        #expect(mapped.name == "doubled")
        #expect(mapped.waitingOn == [source.id])
        #expect(mapped.consumers == 0)
        #expect(mapped.description.contains("doubled (map) at \(#fileID):\(mapLine)"))
        #expect(doubled.description == "Future<Int>(pending, \"doubled\")")
        promise.succeed(21)
        #expect(doubled.outcome?.value == 42)
        #expect(scope.pendingFutures.isEmpty)
    }

    @Test func observersAreCountedApartFromConsumers() throws {
        FutureDiagnostics.startTracking()
        let scope = FutureDiagnostics.Scope()
        let promise = scope.run { Promise<Int>() }
        promise.future.whenComplete(on: .immediate) { _ in }
        promise.future.whenComplete(on: .immediate) { _ in }
        let pending = try #require(scope.pendingFutures.first)
        #expect(pending.consumers == 0)
        #expect(pending.observers == 2)
        promise.succeed(1)
    }

    @Test func theDumpIsATreeFromWhatNobodyWaitsOnDownToTheProducers() {
        FutureDiagnostics.startTracking()
        let scope = FutureDiagnostics.Scope()
        let (first, second, joined) = scope.run {
            let first = Promise<Int>()
            let second = Promise<Int>()
            let joined = Future.all([first.future.named("first"), second.future.named("second")]).named("both")
            return (first, second, joined)
        }
        let lines = scope.dumpPending().split(separator: "\n").map(String.init)
        #expect(lines.count == 4)
        #expect(lines[0] == "3 pending futures:")
        #expect(lines[1].hasPrefix("  #") && lines[1].contains("both (all)"))
        #expect(lines[2].hasPrefix("    #") && lines[2].contains("first (promise)"))
        #expect(lines[3].hasPrefix("    #") && lines[3].contains("second (promise)"))
        first.succeed(1)
        let after = scope.dumpPending()
        #expect(!after.contains("first"))
        #expect(after.contains("second"))
        second.succeed(2)
        #expect(joined.outcome?.value == [1, 2])
        #expect(scope.dumpPending() == "no pending futures\n")
    }

    @Test func theTestHelperFailsWhenFuturesAreLeftPending() throws {
        let left = Recorder<Promise<Int>>()
        let error = #expect(throws: PendingFuturesLeft.self) {
            try expectNoPendingFutures {
                let promise = Promise<Int>()
                left.append(promise)
                _ = promise.future.map(on: .immediate) { $0 + 1 }.named("plus one")
            }
        }
        #expect(error?.futures.map(\.kind) == ["promise", "map"])
        #expect(error?.description.contains("plus one (map)") == true)
        left.all.first?.succeed(1)
        let value = try expectNoPendingFutures {
            let promise = Promise<Int>()
            let mapped = promise.future.map(on: .immediate) { $0 + 1 }
            promise.succeed(1)
            return mapped.outcome?.value
        }
        #expect(value == 2)
    }

    @Test func scopesRunningInParallelSeeOnlyTheirOwnFutures() async throws {
        FutureDiagnostics.startTracking()
        let scopes = (0..<4).map { _ in FutureDiagnostics.Scope() }
        let promises = await withTaskGroup(of: (Int, Promise<Int>).self) { group in
            for (index, scope) in scopes.enumerated() {
                group.addTask {
                    scope.run { (index, Promise<Int>()) }
                }
            }
            var made: [Int: Promise<Int>] = [:]
            for await (index, promise) in group { made[index] = promise }
            return made
        }
        for scope in scopes {
            #expect(scope.pendingFutures.count == 1)
        }
        let ids = Set(scopes.compactMap { $0.pendingFutures.first?.id })
        #expect(ids.count == 4)
        for promise in promises.values { promise.succeed(0) }
        #expect(scopes.allSatisfy { $0.pendingFutures.isEmpty })
    }

    @Test func aBrokenPromiseIsReportedWithWhereItWasMade() throws {
        let log = EventScope()
        var line = 0
        let future: Future<Int> = log.scope.run {
            let promise = Promise<Int>(); line = #line
            return promise.future
        }
        #expect(future.outcome?.error != nil)
        let events = log.recorded.all
        #expect(events.count == 1)
        guard case .brokenPromise(let description, let error)? = events.first else {
            Issue.record("expected a broken promise, got \(events)")
            return
        }
        #expect(description.kind == "promise")
        #expect(description.line == line)
        #expect(error == .brokenPromise(file: #fileID, line: line))
    }

    @Test func aFailureNobodyObservedIsReportedWhenItIsFreed() throws {
        let log = EventScope()
        var line = 0
        log.scope.run {
            let promise = Promise<Int>(); line = #line
            promise.fail(TrackedTestError())
        }
        let events = log.recorded.all
        #expect(events.count == 1)
        guard case .unobservedFailure(let description, let error)? = events.first else {
            Issue.record("expected an unobserved failure, got \(events)")
            return
        }
        #expect(description.line == line)
        #expect(error is TrackedTestError)
    }

    @Test func aFailureSomeoneObservedIsNotReported() {
        let log = EventScope()
        log.scope.run {
            let registered = Promise<Int>()
            registered.future.whenFailure(on: .immediate) { _ in }
            registered.fail(TrackedTestError())
            let read = Promise<Int>()
            read.fail(TrackedTestError())
            #expect(read.future.outcome?.error is TrackedTestError)
            let adopted = Promise<Int>()
            adopted.fail(TrackedTestError())
            let adopter = Promise<Int>()
            adopter.complete(with: adopted.future)
            adopter.future.whenComplete(on: .immediate) { _ in }
            let joined = Promise<Int>()
            joined.fail(TrackedTestError())
            Future.all([joined.future]).whenComplete(on: .immediate) { _ in }
        }
        #expect(log.recorded.all.isEmpty)
    }

    @Test func aCycleIsReported() {
        let log = EventScope()
        let promise = log.scope.run { Promise<Int>() }
        log.scope.run { _ = promise.complete(with: promise.future.map(on: .immediate) { $0 + 1 }) }
        #expect(promise.future.outcome?.error as? FutureError == .cycle)
        let events = log.recorded.all
        #expect(events.count == 1)
        guard case .cycle(let description, _)? = events.first else {
            Issue.record("expected a cycle, got \(events)")
            return
        }
        #expect(description.kind == "promise")
    }

    @Test func aDroppedJobIsReported() async {
        struct DroppingExecutor: Executor {
            func execute(_ work: @escaping @Sendable () -> Void) {}
        }
        let log = EventScope()
        let (promise, line) = log.scope.run { (Promise<Int>(), #line) }
        let mapped = log.scope.run { promise.future.map(on: DroppingExecutor()) { $0 } }
        promise.succeed(1)
        let event = await log.next()
        guard case .droppedJob(let description)? = event else {
            Issue.record("expected a dropped job, got \(String(describing: event))")
            return
        }
        #expect(description.kind == "map")
        #expect(description.line == line + 1)
        #expect(mapped.outcome?.error as? FutureError == .droppedJob)
    }

    @Test func theTreeOfALongChainIsPrintedOnASmallStack() async {
        FutureDiagnostics.startTracking()
        let scope = FutureDiagnostics.Scope()
        let length = 20_000
        let promise = scope.run { Promise<Int>() }
        let last = scope.run {
            var future = promise.future
            for _ in 0..<length { future = future.map(on: .immediate) { $0 + 1 } }
            return future
        }
        let lines = Recorder<String>()
        await onSmallStackOffThePool {
            for line in scope.dumpPending().split(separator: "\n") { lines.append(String(line)) }
        }
        let all = lines.all
        #expect(all.count == length + 2)
        #expect(all.first == "\(length + 1) pending futures:")
        #expect(all.last?.contains("(depth \(length + 1)) #") == true)
        #expect(all.last?.contains(" promise at ") == true)
        promise.succeed(0)
        #expect(last.outcome?.value == length)
    }

    /// `level2` adopts `level1`, which adopts `leaf`: one merge set. A late consumer on `level1`
    /// splits it off; cancelling `level2` then leaves `level1` and `leaf` pending, their state in
    /// the future the split made: both are listed, the consumer waits on `level1`, which waits on
    /// the promise.
    @Test func aSplitFutureAndItsProducerStayListedAfterTheirOldRootIsCancelled() throws {
        FutureDiagnostics.startTracking()
        let scope = FutureDiagnostics.Scope()
        let (leaf, level1, level2, late) = scope.run {
            let leaf = Promise<Int>()
            let start1 = Promise<Void>()
            let start2 = Promise<Void>()
            let level1 = start1.future.flatMap(on: .immediate) { _ in leaf.future }.named("level1")
            let level2 = start2.future.flatMap(on: .immediate) { _ in level1 }.named("level2")
            start2.succeed()
            start1.succeed()
            let late = level1.map(on: .immediate) { $0 }.named("late")
            return (leaf, level1, level2, late)
        }
        level2.cancel()
        #expect(leaf.future.isPending && level1.isPending && late.isPending)
        let pending = scope.pendingFutures
        let byName = Dictionary(uniqueKeysWithValues: pending.compactMap { future in future.name.map { ($0, future) } })
        #expect(Set(byName.keys) == ["level1", "late"], "\(scope.dumpPending())")
        let promise = try #require(pending.first { $0.kind == "promise" }, "\(scope.dumpPending())")
        let level1ID = try #require(byName["level1"]?.id)
        #expect(byName["late"]?.waitingOn == [level1ID], "\(scope.dumpPending())")
        #expect(byName["level1"]?.waitingOn == [promise.id], "\(scope.dumpPending())")
        #expect(pending.count == 3)
        leaf.succeed(1)
        #expect(late.outcome?.value == 1)
        #expect(scope.pendingFutures.isEmpty)
    }

    /// A future waits only on futures in the list: a map whose source has completed, its job not
    /// run yet, waits on nothing listed.
    @Test func aMapWhoseJobHasNotRunWaitsOnNothingListed() {
        FutureDiagnostics.startTracking()
        let scope = FutureDiagnostics.Scope()
        let executor = ManualExecutor()
        let (promise, mapped) = scope.run {
            let promise = Promise<Int>()
            return (promise, promise.future.map(on: executor) { $0 + 1 }.named("mapped"))
        }
        #expect(scope.pendingFutures.first { $0.name == "mapped" }?.waitingOn.count == 1)
        promise.succeed(1)
        let pending = scope.pendingFutures
        #expect(pending.map(\.name) == ["mapped"])
        #expect(pending.first?.waitingOn == [])
        executor.runAll()
        #expect(mapped.outcome?.value == 2)
        #expect(scope.pendingFutures.isEmpty)
    }

    /// A consumer arriving on a future merged into a pending one (which splits it off) waits on it,
    /// and it on the promise below it.
    @Test func aLateConsumerOnAMergedFutureWaitsOnIt() throws {
        FutureDiagnostics.startTracking()
        let scope = FutureDiagnostics.Scope()
        let (leaf, outer, inner, late) = scope.run {
            let leaf = Promise<Int>()
            let holder = Recorder<Future<Int>>()
            let outer = Future(value: 1).flatMap(on: .immediate) { _ in
                let inner = leaf.future.flatMap(on: .immediate) { Future(value: $0) }.named("inner")
                holder.append(inner)
                return inner
            }.named("outer")
            let inner = holder.all[0]
            let late = inner.map(on: .immediate) { $0 * 10 }.named("late")
            return (leaf, outer, inner, late)
        }
        let pending = scope.pendingFutures
        let byName = Dictionary(uniqueKeysWithValues: pending.compactMap { future in future.name.map { ($0, future) } })
        let innerID = try #require(byName["inner"]?.id)
        let promiseID = try #require(pending.first { $0.kind == "promise" }?.id)
        #expect(byName["late"]?.waitingOn == [innerID], "\(scope.dumpPending())")
        #expect(byName["inner"]?.waitingOn == [promiseID], "\(scope.dumpPending())")
        leaf.succeed(2)
        #expect(outer.outcome?.value == 2 && inner.outcome?.value == 2 && late.outcome?.value == 20)
    }

    // The two stress tests below run in a process of their own. A snapshot, even a scope's, walks
    // every stripe of the table of every tracked future, holding each stripe's lock in turn, and
    // tracking is on for the whole process once a test turns it on: beside the other tests, each
    // walk crossed their futures (a stack-safety chain's hundred thousand), and every future of
    // every test waited for the stripe locks the walks held. Under ThreadSanitizer no other test
    // ended for minutes.

    /// A snapshot reads each tracked future without retaining it, in every build: a debug build
    /// that retained one for a moment, while another thread let go of its last reference, freed it
    /// in the snapshot, under the stripe lock its deinit takes (a trap in debug builds, a deadlock
    /// otherwise).
    @Test func snapshotsNeverFreeAFutureThatAnotherThreadLetGoOf() async {
        await #expect(processExitsWith: .success) { await Self.snapshotsNeverFreeAFutureLetGoOf() }
    }

    static func snapshotsNeverFreeAFutureLetGoOf() async {
        FutureDiagnostics.startTracking()
        let scope = FutureDiagnostics.Scope()
        // Fewer under a sanitizer, whose runtime makes each snapshot many times slower.
        let snapshots = DepthMatrixTests.sanitized ? 2_000 : 5_000
        let done = Recorder<Bool>()
        let made = Recorder<Int>()
        let finished = DispatchSemaphore(value: 0)
        // Two threads of their own, and the test waits for them off the pool.
        Thread {
            // The scope's snapshots: they walk the whole table as a snapshot of every future does,
            // and read only the scope's futures.
            for _ in 0..<snapshots { _ = scope.pendingFutures }
            done.append(true)
            finished.signal()
        }.start()
        Thread {
            var count = 0
            scope.run {
                // Futures made and freed as fast as one thread can, until the snapshots are done.
                while done.all.isEmpty {
                    for _ in 0..<64 {
                        let promise = Promise<Int>()
                        promise.succeed(1)
                        // A future merged into another (linked), freed while pending: a snapshot
                        // reads its link.
                        let outer = Promise<Int>()
                        let inner = Promise<Int>()
                        outer.complete(with: inner.future)
                        inner.succeed(2)
                        count += 1
                    }
                }
            }
            made.append(count)
            finished.signal()
        }.start()
        await offThePool {
            finished.wait()
            finished.wait()
        }
        #expect(made.all.first ?? 0 > 0)
        #expect(scope.pendingFutures.isEmpty)
    }

    @Test func snapshotsWhileFuturesAreMadeAndFreedOnOtherThreads() async {
        await #expect(processExitsWith: .success) { await Self.snapshotsWhileFuturesAreMadeAndFreed() }
    }

    static func snapshotsWhileFuturesAreMadeAndFreed() async {
        FutureDiagnostics.startTracking()
        let scope = FutureDiagnostics.Scope()
        let makers = 4
        // Fewer under a sanitizer, whose runtime makes each snapshot many times slower.
        let rounds = DepthMatrixTests.sanitized ? 60 : 300
        let kinds: Set<String> = ["promise", "map", "flatMap", "all", "future"]
        let kept = Recorder<Promise<Int>>()
        // One thread snapshots the table (the scope's futures, every future, the dump) while the
        // others make futures (chains, merges, joins) and free them; the test waits off the pool.
        await offThePool {
            DispatchQueue.concurrentPerform(iterations: makers + 1) { index in
                guard index < makers else {
                    for _ in 0..<rounds / 10 {
                        #expect(scope.pendingFutures.allSatisfy { kinds.contains($0.kind) })
                        #expect(!scope.dumpPending().isEmpty)
                    }
                    return
                }
                scope.run {
                    for round in 0..<rounds {
                        let source = Promise<Int>()
                        let inner = Promise<Int>()
                        let adopted = source.future.flatMap(on: .immediate) { _ in inner.future }
                        let joined = Future.all([adopted.map(on: .immediate) { $0 + 1 }, Future(value: round)])
                        source.succeed(round)
                        inner.succeed(round)
                        #expect(joined.outcome?.value == [round + 1, round])
                    }
                    let left = Promise<Int>()
                    left.future.named("left \(index)")
                    kept.append(left)
                }
            }
        }
        let pending = scope.pendingFutures
        #expect(pending.count == makers)
        #expect(Set(pending.compactMap(\.name)) == Set((0..<makers).map { "left \($0)" }))
        for promise in kept.all { promise.succeed(0) }
        #expect(scope.pendingFutures.isEmpty)
    }
}

/// The watchdog's tests, each in a process of its own: a watchdog looks at every tracked future, so
/// one test's watchdog could report another's futures first (to the right scope, but at its own
/// moment), and a look holds, until it ends, what those futures link to, where tests beside these
/// check that futures they let go of are freed at once.
@Suite struct WatchdogTests {
        @Test func theWatchdogReportsEachStalledFutureOnce() async {
            await #expect(processExitsWith: .success) { await Self.reportsEachStalledFutureOnce() }
        }

        @Test func theWatchdogsLooksNeverOverlap() async {
            await #expect(processExitsWith: .success) { await Self.looksNeverOverlap() }
        }

        static func reportsEachStalledFutureOnce() async {
            let log = EventScope(includingStalled: true)
            let clock = ManualClock()
            let first = log.scope.run { Promise<Int>() }
            let watchdog = FutureDiagnostics.watch(olderThan: .zero, every: .seconds(1), clock: clock)
            clock.advance(by: .seconds(1))
            let event = await log.next()
            guard case .stalled(let stalled)? = event else {
                Issue.record("expected a stalled future, got \(String(describing: event))")
                return
            }
            #expect(stalled.kind == "promise")
            let second = log.scope.run { Promise<Int>() }
            // The next look is set once this one has ended.
            await clock.waitForSleepers()
            clock.advance(by: .seconds(1))
            _ = await log.next()
            // The second look reported the new future alone, not the first again.
            let reported = log.recorded.all.compactMap { event -> UInt64? in
                if case .stalled(let future) = event { return future.id }
                return nil
            }
            #expect(reported.count == 2)
            #expect(Set(reported).count == 2)
            _ = watchdog.cancel()
            first.succeed(1)
            second.succeed(2)
        }

        /// The next look is set only once a look has ended, its reports included: time passing while
        /// the reporter runs starts no second look beside it.
        static func looksNeverOverlap() async {
            let clock = ManualClock()
            let later = Recorder<Promise<Int>>()
            let reported = Recorder<String>()
            let scopes = Recorder<FutureDiagnostics.Scope>()
            FutureDiagnostics.startTracking()
            // A scope whose handler, on the first report, makes a second future and lets more than
            // an interval pass, as a slow reporter would: a look beside this one would report it.
            let scope = FutureDiagnostics.Scope { event in
                guard case .stalled(let future) = event else { return }
                reported.append(future.name ?? "")
                guard future.name == "first", let scope = scopes.all.first else { return }
                let second = scope.run { Promise<Int>() }
                second.future.named("second")
                later.append(second)
                clock.advance(by: .seconds(5))
            }
            scopes.append(scope)
            let first = scope.run { Promise<Int>() }
            first.future.named("first")
            let watchdog = FutureDiagnostics.watch(olderThan: .zero, every: .seconds(1), clock: clock)
            await clock.waitForSleepers()
            clock.advance(by: .seconds(1))
            // Once the first look has ended it sets the next: until that one, nothing else looks.
            await clock.waitForSleepers()
            #expect(reported.all == ["first"])
            clock.advance(by: .seconds(1))
            await clock.waitForSleepers()
            #expect(reported.all == ["first", "second"])
            _ = watchdog.cancel()
            first.succeed(1)
            for promise in later.all { promise.succeed(2) }
        }
}
