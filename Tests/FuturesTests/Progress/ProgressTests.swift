import Foundation
import Testing
import FuturesTestSupport
@testable import Futures

/// Producer-reported progress that composes through chains.
@Suite("Progress")
struct ProgressTests {
    /// A handler on a future that another adopts (merging it) still hears the final 1.0, however
    /// far its progress went before (the merged future's versions continue after the newer).
    @Test func aHandlerOnAnAdoptedFutureHearsTheFinalProgress() {
        let inner = Promise<Int>()
        let reports = Recorder<Double>()
        inner.future.whenProgress(on: .immediate) { reports.append($0) }
        inner.progress = 0.75
        inner.progress = 0.9
        let outer = Promise<Int>()
        #expect(outer.complete(with: inner.future))
        #expect(inner.succeed(1))
        #expect(reports.all == [0.75, 0.9, 1])
    }

    /// A flatMap's combined progress never goes back, even when its inner producer's does; merged
    /// into a promise that adopts it, it still does not go back for its handlers.
    @Test func mergingAnAdoptedFutureNeverLowersCombinedProgress() {
        let upstream = Promise<Int>()
        let inner = Promise<Int>()
        let combined = upstream.future.flatMap(on: .immediate) { _ in inner.future }
        let reports = Recorder<Double>()
        combined.whenProgress(on: .immediate) { reports.append($0) }
        #expect(upstream.succeed(1))
        inner.progress = 0.8
        inner.progress = 0.2  // the producer's own progress may go back; the combined one holds
        let adopter = Promise<Int>()
        #expect(adopter.complete(with: combined))
        inner.progress = 0.4
        #expect(inner.succeed(2))
        #expect(reports.all == [0.5, 0.9, 1])
        #expect(adopter.future.progress == 1)
    }

    /// A future with progress handlers, adopted by a combined one that is already further on: it
    /// is not merged (it has registrants), so its handlers hear its own progress only, and 1.0
    /// when it succeeds; the adopter's stay at the top.
    @Test func handlersOfAnAdoptedFutureHearItsOwnProgressAndTheEnd() {
        let adopted = Promise<Int>()
        let reports = Recorder<Double>()
        adopted.future.whenProgress(on: .immediate) { reports.append($0) }
        let inner = Promise<Int>()
        inner.progress = 1
        let combined = Future(value: 21).flatMap(on: .immediate) { _ in inner.future }
        let combinedReports = Recorder<Double>()
        combined.whenProgress(on: .immediate) { combinedReports.append($0) }
        #expect(inner.complete(with: adopted.future))
        #expect(reports.all == [])
        #expect(adopted.succeed(41))
        #expect(reports.all == [1])
        #expect(combinedReports.all == [1])
        #expect(combined.outcome?.value == 41)
    }

    /// The same when the adopted future has reported more often than its adopter (its version is
    /// the higher), and for a branch that follows the adopted future's progress.
    @Test func adoptedHandlersAndFollowersHearTheirOwnValueWhateverTheVersions() {
        let adopted = Promise<Int>()
        let reports = Recorder<Double>()
        adopted.future.whenProgress(on: .immediate) { reports.append($0) }
        for step in 1...20 { adopted.progress = Double(step) / 100 }
        let branch = adopted.future.observe()
        let branchReports = Recorder<Double>()
        branch.whenProgress(on: .immediate) { branchReports.append($0) }
        let inner = Promise<Int>()
        inner.progress = 1
        let combined = Future(value: 1).flatMap(on: .immediate) { _ in inner.future }
        let combinedReports = Recorder<Double>()
        combined.whenProgress(on: .immediate) { combinedReports.append($0) }
        #expect(inner.complete(with: adopted.future))
        #expect(reports.all.last == 0.2)
        #expect(branchReports.all.last == 0.2)
        adopted.progress = 0.5
        #expect(adopted.succeed(3))
        #expect(reports.all.filter { $0 == 1 }.count == 1, "\(reports.all)")
        #expect(branchReports.all.filter { $0 == 1 }.count == 1, "\(branchReports.all)")
        #expect(combinedReports.all == [1])
    }

    /// Two adoptions in a row: a promise's own progress follows the future it adopts (it may go
    /// down), and each future's handlers hear its own progress, all ending at 1.0 together.
    @Test func handlersOfTwoAdoptionsInARowEndTogether() {
        let bottom = Promise<Int>()
        let bottomReports = Recorder<Double>()
        bottom.future.whenProgress(on: .immediate) { bottomReports.append($0) }
        bottom.progress = 0.1
        let middle = Promise<Int>()
        let middleReports = Recorder<Double>()
        middle.future.whenProgress(on: .immediate) { middleReports.append($0) }
        middle.progress = 0.3
        #expect(middle.complete(with: bottom.future))
        let inner = Promise<Int>()
        inner.progress = 0.9
        let combined = Future(value: 1).flatMap(on: .immediate) { _ in inner.future }
        let combinedReports = Recorder<Double>()
        combined.whenProgress(on: .immediate) { combinedReports.append($0) }
        #expect(inner.complete(with: middle.future))
        #expect(bottom.succeed(1))
        #expect(bottomReports.all == [0.1, 1])
        #expect(middleReports.all == [0.3, 0.1, 1])
        #expect(combinedReports.all == [0.95, 1])
    }

    /// A cycle through a join is not detected (the futures stay pending), and progress fed back
    /// around it settles: each future applies a burst of reports from its upstream once, and
    /// combined progress only goes up, so the adoption returns.
    @Test func progressAroundACycleThroughAJoinSettles() {
        let promise = Promise<Int>()
        let joined = Future.all([promise.future, promise.future, Future(value: 2)]).map(on: .immediate) { $0.reduce(0, +) }
        let reports = Recorder<Double>()
        joined.whenProgress(on: .immediate) { reports.append($0) }
        #expect(promise.complete(with: joined))
        #expect(promise.future.isPending)
        #expect(joined.isPending)
        #expect(!reports.all.isEmpty && reports.all.count < 1_000, "\(reports.all.count) reports")
        #expect(zip(reports.all, reports.all.dropFirst()).allSatisfy { $0 < $1 })
        // The cancelled promise's future is a member of the join: the join fails as its policy
        // says, before the withdrawal from `joined` reaches it.
        #expect(promise.future.cancel())
        #expect(joined.outcome?.error as? FutureError == .cancelledMember)
    }

    @Test func promiseProgressIsClampedAndNaNIgnored() {
        let promise = Promise<Int>()
        #expect(promise.future.progress == 0)
        promise.progress = 0.3
        #expect(promise.future.progress == 0.3)
        promise.progress = 1.7
        #expect(promise.progress == 1)
        promise.progress = -2
        #expect(promise.progress == 0)
        promise.progress = 0.4
        promise.progress = .nan
        #expect(promise.progress == 0.4)
    }

    @Test func successReportsOneFailureAndCancellationAddNothing() {
        let succeeding = Promise<Int>()
        succeeding.progress = 0.2
        succeeding.succeed(1)
        #expect(succeeding.future.progress == 1)

        let failing = Promise<Int>()
        failing.progress = 0.4
        failing.fail(TestError())
        #expect(failing.future.progress == 0.4)
        failing.progress = 0.9   // after completion: ignored
        #expect(failing.future.progress == 0.4)

        let cancelled = Promise<Int>()
        cancelled.progress = 0.5
        cancelled.future.cancel()
        #expect(cancelled.future.progress == 0.5)
    }

    @Test func handlersRunInRegistrationOrderOnTheirExecutors() {
        let executor = ManualExecutor()
        let promise = Promise<Int>()
        let seen = Recorder<String>()
        promise.future.whenProgress(on: executor) { seen.append("a \($0)") }
        promise.future.whenProgress(on: executor) { seen.append("b \($0)") }
        promise.progress = 0.5
        #expect(seen.all.isEmpty, "handlers run on their executor, not inline")
        executor.runAll()
        #expect(seen.all == ["a 0.5", "b 0.5"])
    }

    @Test func aSlowHandlerGetsTheLatestValueNotABacklog() {
        let executor = ManualExecutor()
        let promise = Promise<Int>()
        let seen = Recorder<Double>()
        promise.future.whenProgress(on: executor) { seen.append($0) }
        promise.progress = 0.1
        promise.progress = 0.2
        promise.progress = 0.3
        executor.runAll()
        #expect(seen.all == [0.3])
    }

    @Test func equalConsecutiveValuesAreNotResent() {
        let promise = Promise<Int>()
        let seen = Recorder<Double>()
        promise.future.whenProgress(on: .immediate) { seen.append($0) }
        promise.progress = 0.5
        promise.progress = 0.5
        promise.progress = 0.7
        promise.progress = 0.7
        promise.succeed(1)
        #expect(seen.all == [0.5, 0.7, 1])
    }

    /// An `.immediate` handler runs inline, one value at a time: a report made from inside it does
    /// not run it again within itself, but right after it returns, with that value.
    @Test func anImmediateHandlerIsNotReenteredByAReportItMakes() {
        final class Depth: @unchecked Sendable {
            // Safety: touched only by the `.immediate` handler, which runs on this thread (every
            // report and the completion below are made on it).
            var current = 0
            var deepest = 0
        }
        let promise = Promise<Int>()
        let end = promise.future.map(on: .immediate) { $0 }
        let seen = Recorder<Double>()
        let depth = Depth()
        end.whenProgress(on: .immediate) { value in
            depth.current += 1
            depth.deepest = max(depth.deepest, depth.current)
            seen.append(value)
            if value == 0.25 { promise.progress = 0.5 }
            depth.current -= 1
        }
        promise.progress = 0.25
        #expect(seen.all == [0.25, 0.5])
        promise.succeed(1)
        #expect(seen.all == [0.25, 0.5, 1])
        #expect(depth.deepest == 1)
    }

    /// Each observer of a chain's end hears every report, in order, then the steps completing.
    @Test func everyHandlerOnAChainHearsEachReportInOrder() {
        let promise = Promise<Int>()
        let end = promise.future.map(on: .immediate) { $0 }.flatMap(progressWeight: 0.5, on: .immediate) { Future(value: $0) }
        let first = Recorder<Double>()
        let second = Recorder<Double>()
        end.whenProgress(on: .immediate) { first.append($0) }
        end.whenProgress(on: .immediate) { second.append($0) }
        for step in 1...4 { promise.progress = Double(step) / 5 }
        let reported = (1...4).map { 0.5 * Double($0) / 5 }
        #expect(first.all == reported)
        #expect(second.all == reported)
        promise.succeed(1)
        #expect(first.all == reported + [0.5, 1])
        #expect(second.all == first.all)
    }

    @Test func aLateHandlerGetsTheCurrentValue() {
        let promise = Promise<Int>()
        promise.progress = 0.6
        let seen = Recorder<Double>()
        promise.future.whenProgress(on: .immediate) { seen.append($0) }
        #expect(seen.all == [0.6])
    }

    @Test func aProgressHandlerIsNotAConsumer() {
        let promise = Promise<Int>()
        promise.future.whenProgress(on: .immediate) { _ in }
        let derived = promise.future.map(on: .immediate) { $0 }
        derived.cancel()
        #expect(promise.isCancelled)
    }

    @Test func progressFlowsUnchangedThroughTransformsAndObserve() {
        let promise = Promise<Int>()
        let derived = promise.future
            .map(on: .immediate) { $0 }
            .recover(on: .immediate) { _ in 0 }
            .mapError(on: .immediate) { $0 }
            .always(on: .immediate) { _ in }
            .observe()
        let seen = Recorder<Double>()
        derived.whenProgress(on: .immediate) { seen.append($0) }
        promise.progress = 0.25
        #expect(derived.progress == 0.25)
        promise.succeed(1)
        #expect(seen.all == [0.25, 1])
    }

    @Test(arguments: [false, true])
    func weightedFlatMapCombinesAndNeverGoesBackwards(innerHasOtherConsumer: Bool) {
        // OAPromise's example: 30% loading the person, 70% the picture.
        let person = Promise<Int>()
        let picture = Promise<String>()
        let other = innerHasOtherConsumer ? picture.future.map(on: .immediate) { $0 } : nil
        let combined = person.future.flatMap(progressWeight: 0.3, on: .immediate) { _ in picture.future }
        let seen = Recorder<Double>()
        combined.whenProgress(on: .immediate) { seen.append($0) }
        person.progress = 0.5
        #expect(abs(combined.progress - 0.15) < 1e-9)
        picture.progress = 0.5   // before adoption: counted once adopted
        person.succeed(1)
        #expect(abs(combined.progress - (0.3 + 0.7 * 0.5)) < 1e-9, "includes inner progress from before adoption")
        picture.progress = 0.2   // the producer lowers it: the combination does not go back
        #expect(abs(combined.progress - 0.65) < 1e-9)
        picture.progress = 0.9
        #expect(abs(combined.progress - (0.3 + 0.7 * 0.9)) < 1e-9)
        picture.succeed("ada.png")
        #expect(combined.progress == 1)
        #expect(seen.all.last == 1)
        #expect(zip(seen.all, seen.all.dropFirst()).allSatisfy { $0 <= $1 }, "never backwards: \(seen.all)")
        _ = other
    }

    @Test func nestedWeightedFlatMapsComposeWhenMerged() {
        // The inner flatMap is fresh (no other consumer), so it is merged into the outer one;
        // progress must still weigh each level: outer 20/80, inner 50/50.
        let a = Promise<Int>(), b = Promise<Int>(), c = Promise<Int>()
        let outer = a.future.flatMap(progressWeight: 0.2, on: .immediate) { _ in
            b.future.flatMap(progressWeight: 0.5, on: .immediate) { _ in c.future }
        }
        let seen = Recorder<Double>()
        outer.whenProgress(on: .immediate) { seen.append($0) }
        func close(_ expected: Double) -> Bool { abs(outer.progress - expected) < 1e-9 }
        a.progress = 0.5
        #expect(close(0.1))
        a.succeed(1)
        #expect(close(0.2))
        b.progress = 0.5
        #expect(close(0.2 + 0.8 * 0.25))
        b.succeed(2)
        #expect(close(0.2 + 0.8 * 0.5))
        c.progress = 0.5
        #expect(close(0.2 + 0.8 * 0.75))
        c.succeed(3)
        #expect(outer.progress == 1)
        #expect(zip(seen.all, seen.all.dropFirst()).allSatisfy { $0 < $1 }, "\(seen.all)")
    }

    @Test func aPlainFlatMapWeighsBothStepsEqually() {
        let a = Promise<Int>(), b = Promise<Int>()
        let chain = a.future.flatMap(on: .immediate) { _ in b.future }
        chain.whenProgress(on: .immediate) { _ in }
        a.succeed(1)
        #expect(chain.progress == 0.5)
        b.progress = 0.5
        #expect(chain.progress == 0.75)
    }

    // MARK: Regressions found in review

    @Test func aPlainFlatMapObservedOnlyAfterAdoptingStillComposes() {
        let a = Promise<Int>(), merged = Promise<Int>()
        let d = a.future.flatMap(on: .immediate) { _ in merged.future }
        a.succeed(1)
        merged.progress = 0.5
        #expect(d.progress == 0.75)

        let b = Promise<Int>(), waited = Promise<Int>()
        let otherConsumer = waited.future.map(on: .immediate) { $0 }
        let t = b.future.flatMap(on: .immediate) { _ in waited.future }
        b.succeed(1)
        waited.progress = 0.5
        #expect(t.progress == 0.75)
        _ = otherConsumer
    }

    @Test func mergingAFutureThatAlreadyWaitsComposesBothLevels() {
        let a = Promise<Int>(), b = Promise<Int>(), w = Promise<Int>()
        let keep = w.future.map(on: .immediate) { $0 }
        let t = b.future.flatMap(on: .immediate) { _ in w.future }
        b.succeed(1)              // t waits on w
        let x = a.future.flatMap(on: .immediate) { _ in t }
        x.whenProgress(on: .immediate) { _ in }
        a.succeed(1)              // x merges t
        w.progress = 0.5
        #expect(x.progress == 0.5 + 0.5 * (0.5 + 0.5 * 0.5))
        _ = keep
    }

    /// An inner future with a progress handler is waited on, not merged: it reports its own
    /// progress, and its adopter combines it.
    @Test func anObservedInnerFutureKeepsReportingItsOwnProgressWhenAdopted() {
        let p = Promise<Int>(), a = Promise<Int>()
        let inner = p.future.map(on: .immediate) { $0 }
        let seen = Recorder<Double>()
        inner.whenProgress(on: .immediate) { seen.append($0) }
        let d = a.future.flatMap(on: .immediate) { _ in inner }
        a.succeed(1)
        let before = seen.count
        p.progress = 0.7
        #expect(seen.count == before + 1, "the inner future still follows the producer")
        #expect(inner.progress == 0.7)
        #expect(d.progress == 0.5 + 0.5 * 0.7)
    }

    @Test func aRejectedAdoptionChangesNoProgress() {
        let p = Promise<Int>()
        let f1 = Promise<Int>(), f2 = Promise<Int>()
        let k1 = f1.future.map(on: .immediate) { $0 }, k2 = f2.future.map(on: .immediate) { $0 }
        f2.progress = 0.9
        let seen = Recorder<Double>()
        p.future.whenProgress(on: .immediate) { seen.append($0) }
        f1.progress = 0.2
        p.complete(with: f1.future)
        #expect(!p.complete(with: f2.future))
        #expect(p.future.progress == 0.2)
        #expect(seen.all == [0.2])
        _ = (k1, k2)
    }

    @Test func aFlatMapAdoptingNeverDoesNotReportCompletion() {
        let a = Promise<Int>()
        let d = a.future.flatMap(on: .immediate) { _ in Future<Int>.never }
        d.whenProgress(on: .immediate) { _ in }
        a.succeed(1)
        #expect(d.isPending)
        #expect(d.progress < 1)
    }

    @Test func olderProgressThatOvertakesANewerOneIsDropped() {
        let p = Promise<Int>()
        let follower = p.future.map(on: .immediate) { $0 }
        let seen = Recorder<Double>()
        follower.whenProgress(on: .immediate) { seen.append($0) }
        p.progress = 0.3
        let source = ObjectIdentifier(p.storage)
        let version = LockTable.withLock(p.storage) { p.storage.progress!.version }
        // Deliver a newer value, then an older one that was sent earlier but arrived later.
        follower.storage.receiveUpstreamProgress(0.6, version: version + 1, from: source)
        follower.storage.receiveUpstreamProgress(0.4, version: version, from: source)
        #expect(follower.progress == 0.6)
        #expect(seen.all == [0.3, 0.6])
    }

    @Test func aHandlerDropsValuesOlderThanItsLatest() {
        let executor = ManualExecutor()
        let seen = Recorder<Double>()
        let delivery = ProgressDelivery(hop: Hop(executor)) { seen.append($0) }
        delivery.offer(0.6, version: 5)
        delivery.offer(0.3, version: 4)
        executor.runAll()
        #expect(seen.all == [0.6])
    }

    @Test func makeProgressDoesNotKeepANeverEndingFutureAlive() {
        weak var weakProgress: Progress?
        do {
            let future = Future<Int>.never.map(on: .immediate) { $0 }
            weakProgress = future.makeProgress()
        }
        #expect(weakProgress == nil)
    }

    @Test func progressUpdatesEndsWithTheFinalValue() async {
        let promise = Promise<Int>()
        let updates = promise.future.progressUpdates
        promise.progress = 0.5
        promise.succeed(1)
        var values: [Double] = []
        for await value in updates { values.append(value) }
        #expect(values.last == 1)
        #expect(values.allSatisfy { $0 == 0.5 || $0 == 1 })
    }

    @Test func progressUpdatesEndsOnFailureToo() async {
        let promise = Promise<Int>()
        let updates = promise.future.progressUpdates
        promise.progress = 0.5
        promise.fail(TestError())
        var values: [Double] = []
        for await value in updates { values.append(value) }
        #expect(values == [0.5])
    }

    /// Sequences whose consumer left early, by breaking out of the loop, by its task being
    /// cancelled, or by never iterating, leave a long-lived future at once: it keeps no listener
    /// and no callback of theirs, so a progress report reaches only the sequences still iterated.
    @Test func abandonedProgressUpdatesLeaveTheFutureAtOnce() async {
        let promise = Promise<Int>()
        promise.progress = 0.1
        for _ in 0..<100 {
            for await _ in promise.future.progressUpdates { break }
        }
        #expect(progressListenerCount(promise.future) == 0)
        #expect(entryCount(promise.future) == 0)

        let tasks = (0..<100).map { _ in
            Task { for await _ in promise.future.progressUpdates {} }
        }
        for task in tasks { task.cancel() }
        for task in tasks { await task.value }
        #expect(progressListenerCount(promise.future) == 0)
        #expect(entryCount(promise.future) == 0)

        for _ in 0..<100 { _ = promise.future.progressUpdates }
        #expect(progressListenerCount(promise.future) == 0)
        #expect(entryCount(promise.future) == 0)

        let kept = promise.future.progressUpdates
        #expect(progressListenerCount(promise.future) == 1)
        #expect(entryCount(promise.future) == 1)
        promise.progress = 0.5
        #expect(promise.succeed(1))
        var values: [Double] = []
        for await value in kept { values.append(value) }
        #expect(values.last == 1)
    }

    /// A sequence on a future that another then adopted leaves it when its consumer is done with
    /// it: its listener and callback go, whatever the adoption did with the future's state.
    @Test func anAbandonedSequenceOnAnAdoptedFutureLeavesIt() async {
        let inner = Promise<Int>()
        inner.progress = 0.1
        var updates: AsyncStream<Double>? = inner.future.progressUpdates
        let outer = Promise<Int>()
        #expect(outer.complete(with: inner.future))
        let listeners = progressListenerCount(inner.future)
        let entries = entryCount(inner.future)
        for await _ in updates! { break }
        updates = nil  // the sequence leaves once nothing can iterate it any more
        #expect(progressListenerCount(inner.future) == listeners - 1)
        #expect(entryCount(inner.future) == entries - 1)
        #expect(inner.succeed(1))
        #expect(outer.future.outcome?.value == 1)
    }

    /// A sequence abandoned on a long-lived future keeps no heap (measured in a process of its own).
    @Test(arguments: ["progressUpdates-broken-off", "progressUpdates-cancelled", "progressUpdates-dropped"])
    func anAbandonedProgressSequenceKeepsNothing(scenario: String) async throws {
        guard let kept = try await heapKeptPerIteration(scenario) else { return }  // under a sanitizer
        #expect(kept < 16, "\(scenario) keeps \(kept) B per iteration on a long-lived future")
    }

    @Test func futuresThatNeverUseProgressAllocateNothingForIt() {
        let promise = Promise<Int>()
        let derived = promise.future.map(on: .immediate) { $0 }.flatMap(on: .immediate) { Future(value: $0) }
        promise.succeed(1)
        #expect(promise.storage.progress == nil)
        #expect(derived.storage.progress == nil)
    }

    @Test func progressThroughAMillionLinkChain() async {
        await onSmallStackOffThePool {
            let promise = Promise<Int>()
            var future = promise.future
            for _ in 0..<StackSafetyTests.links { future = future.map(on: .immediate) { $0 } }
            let seen = Recorder<Double>()
            future.whenProgress(on: .immediate) { seen.append($0) }
            promise.progress = 0.5
            #expect(seen.all == [0.5])
            promise.succeed(1)
            #expect(seen.all == [0.5, 1])
        }
    }
}

