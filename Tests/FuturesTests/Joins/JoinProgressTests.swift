import Dispatch
import Testing
@testable import Futures

/// Joins report the mean progress of their members (races: the leading member's), set up only
/// when someone follows the join's progress.
@Suite("Join progress")
struct JoinProgressTests {
    @Test func allReportsTheMeanOfItsMembers() {
        let a = Promise<Int>(), b = Promise<Int>()
        let all = Future.all([a.future, b.future])
        let seen = Recorder<Double>()
        all.whenProgress(on: .immediate) { seen.append($0) }
        a.progress = 0.5
        b.progress = 0.5
        a.succeed(1)
        #expect(all.progress == 0.75)
        b.succeed(2)
        #expect(seen.all == [0.25, 0.5, 0.75, 1])
    }

    @Test func progressReportedBeforeAnyoneLooksIsCounted() {
        let a = Promise<Int>(), b = Promise<Int>()
        a.progress = 0.4
        let settled = Future.allSettled([a.future, b.future])
        b.progress = 0.2
        #expect(abs(settled.progress - 0.3) < 1e-12)
    }

    @Test func aJoinNobodyWatchesAllocatesNoProgress() {
        let a = Promise<Int>()
        let all = Future.allOrNil([a.future])
        a.progress = 0.5
        #expect(all.storage.progress == nil, "following starts only when someone looks")
        #expect(all.storage.extras?.onProgressDemand != nil)
        _ = all.progress
        #expect(all.storage.progress != nil)
        #expect(all.storage.extras?.onProgressDemand == nil, "started once")
    }

    @Test func joinProgressNeverGoesBackwards() {
        let a = Promise<Int>(), b = Promise<Int>()
        let all = Future.all([a.future, b.future])
        let seen = Recorder<Double>()
        all.whenProgress(on: .immediate) { seen.append($0) }
        a.progress = 0.8
        a.progress = 0.2  // a producer may lower its own progress; the join keeps a's 0.8
        b.progress = 0.4
        #expect(seen.all.count == 2 && seen.all[0] == 0.4 && abs(seen.all[1] - 0.6) < 1e-12)
    }

    @Test func racesReportTheLeadingMember() {
        let a = Promise<Int>(), b = Promise<Int>()
        let race = Future.any([a.future, b.future])
        let seen = Recorder<Double>()
        race.whenProgress(on: .immediate) { seen.append($0) }
        a.progress = 0.3
        b.progress = 0.6
        a.progress = 0.5
        #expect(seen.all == [0.3, 0.6])
    }

    @Test func zipReportsTheMeanThroughItsMap() {
        let a = Promise<Int>(), b = Promise<String>()
        let zipped = Future.zip(a.future, b.future)
        a.progress = 1
        #expect(zipped.progress == 0.5)
    }

    @Test func aJoinAdoptedByAFlatMapReportsThroughIt() {
        let first = Promise<Int>()
        let a = Promise<Int>(), b = Promise<Int>()
        let both = first.future.flatMap(on: .immediate) { _ in Future.all([a.future, b.future]) }
        let seen = Recorder<Double>()
        both.whenProgress(on: .immediate) { seen.append($0) }
        first.succeed(0)
        #expect(both.progress == 0.5, "a plain flatMap weighs its two steps equally")
        a.progress = 0.5
        b.progress = 0.5
        #expect(both.progress == 0.75)
        a.succeed(1)
        b.succeed(2)
        #expect(seen.all.last == 1)
    }

    /// The same, observed one `map` further down: the map passes the flatMap's progress on
    /// unchanged, so its observer should see the members' reports too.
    @Test func aMapBelowAFlatMapThatAdoptedAJoinFollowsTheMembers() {
        let first = Promise<Int>()
        let a = Promise<Int>(), b = Promise<Int>()
        let end = first.future.flatMap(on: .immediate) { _ in Future.all([a.future, b.future]) }
            .map(on: .immediate) { $0.count }
        let seen = Recorder<Double>()
        end.whenProgress(on: .immediate) { seen.append($0) }
        first.succeed(0)
        a.progress = 0.5
        b.progress = 0.5
        withKnownIssue("the join's members' reports do not reach a follower below the adopting flatMap") {
            #expect(seen.all == [0.5, 0.625, 0.75])
        }
        a.succeed(1)
        b.succeed(2)
        #expect(seen.all.last == 1)
    }

    @Test func nestedJoinsReportTheMeanOfMeans() {
        let promises = (0..<4).map { _ in Promise<Int>() }
        let left = Future.all([promises[0].future, promises[1].future])
        let right = Future.all([promises[2].future, promises[3].future])
        let outer = Future.all([left, right])
        #expect(outer.progress == 0)
        promises[0].succeed(0)
        promises[2].progress = 0.5
        #expect(outer.progress == (0.5 + 0.25) / 2)
        withExtendedLifetime(promises) {}  // released earlier, the pending promises would break
    }

    @Test func membersReportingFromManyThreadsGiveANonDecreasingSeriesEndingAtOne() async throws {
        let promises = (0..<8).map { _ in Promise<Int>() }
        let all = Future.all(promises.map(\.future))
        let seen = Recorder<Double>()
        all.whenProgress(on: .immediate) { seen.append($0) }
        DispatchQueue.concurrentPerform(iterations: promises.count) { index in
            for step in 1...10 { promises[index].progress = Double(step) / 10 }
            promises[index].succeed(index)
        }
        #expect(try await all.value == Array(0..<8))
        let values = seen.all
        #expect(values.last == 1)
        #expect(zip(values, values.dropFirst()).allSatisfy { $0 < $1 }, "\(values)")
    }
}
