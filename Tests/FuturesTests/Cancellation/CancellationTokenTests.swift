import Dispatch
import Testing
@testable import Futures

/// CollapsingFutures-style cancellation tokens.
@Suite("Cancellation tokens")
struct CancellationTokenTests {
    @Test func sourceCancelsItsTokenOnce() {
        let source = CancellationSource()
        let token = source.token
        #expect(!token.isCancelled && token.canBeCancelled)
        let runs = Counter()
        token.onCancel { runs.increment() }
        #expect(source.cancel())
        #expect(!source.cancel())
        #expect(token.isCancelled && !token.canBeCancelled)
        #expect(runs.value == 1)
        token.onCancel { runs.increment() }  // already cancelled: inline
        #expect(runs.value == 2)
    }

    @Test func handlersRunInRegistrationOrder() {
        let source = CancellationSource()
        let order = Recorder<Int>()
        for index in 0..<20 { source.token.onCancel { order.append(index) } }
        source.cancel()
        #expect(order.all == Array(0..<20))
    }

    @Test func constantTokens() {
        #expect(CancellationToken.cancelled.isCancelled)
        #expect(!CancellationToken.cancelled.canBeCancelled)
        #expect(!CancellationToken.never.isCancelled)
        #expect(!CancellationToken.never.canBeCancelled)
        let runs = Counter()
        CancellationToken.cancelled.onCancel { runs.increment() }
        CancellationToken.never.onCancel { runs.increment() }
        #expect(runs.value == 1)
    }

    @Test func releasingTheSourceMakesTheTokenImmortalAndFreesItsHandlers() {
        weak var weakProbe: Probe?
        var source: CancellationSource? = CancellationSource()
        let token = source!.token
        do {
            let probe = Probe()
            weakProbe = probe
            token.onCancel { _ = probe }
        }
        #expect(weakProbe != nil)
        source = nil
        #expect(weakProbe == nil, "handlers of a dead token are released unrun")
        #expect(!token.canBeCancelled)
        #expect(!token.isCancelled)
        let runs = Counter()
        token.onCancel { runs.increment() }
        #expect(runs.value == 0)
        #expect(token.core?.handlerCount == 0)
    }

    @Test func unlessRemovesTheRegistrationWhenTheOtherTokenCancelsFirst() {
        let main = CancellationSource()
        let other = CancellationSource()
        weak var weakProbe: Probe?
        let runs = Counter()
        do {
            let probe = Probe()
            weakProbe = probe
            main.token.onCancel(unless: other.token) { _ = probe; runs.increment() }
        }
        #expect(main.token.core?.handlerCount == 1)
        other.cancel()
        #expect(weakProbe == nil, "freed at once")
        #expect(main.token.core?.handlerCount == 0)
        main.cancel()
        #expect(runs.value == 0)
    }

    /// A long-lived token keeps no room for the registrations that came and went.
    @Test func aLongLivedTokensTableShrinksAsRegistrationsLeave() {
        let app = CancellationSource()
        let promises = (0..<20_000).map { _ in Promise<Int>() }
        let guarded = promises.map { $0.future.cancellable(by: app.token) }
        #expect(app.token.core?.handlerCount == 20_000)
        for promise in promises { promise.succeed(1) }
        #expect(guarded.allSatisfy { $0.outcome?.value == 1 })
        #expect(app.token.core?.handlerCount == 0)
        #expect((app.token.core?.handlerCapacity ?? .max) <= 64)
    }

    @Test func unlessRunsWhenThisTokenCancelsFirstAndLeavesNoGarbageOnTheOther() {
        let main = CancellationSource()
        let other = CancellationSource()
        let runs = Counter()
        main.token.onCancel(unless: other.token) { runs.increment() }
        #expect(other.token.core?.handlerCount == 1)
        main.cancel()
        #expect(runs.value == 1)
        #expect(other.token.core?.handlerCount == 0)
    }

    @Test func unlessWithAnAlreadyCancelledOtherNeverRuns() {
        let runs = Counter()
        CancellationToken.cancelled.onCancel(unless: .cancelled) { runs.increment() }
        let main = CancellationSource()
        main.token.onCancel(unless: .cancelled) { runs.increment() }
        main.cancel()
        #expect(runs.value == 0)
        CancellationToken.cancelled.onCancel(unless: .never) { runs.increment() }
        #expect(runs.value == 1)
    }

    @Test func eitherCancelsWithTheFirst() {
        let a = CancellationSource()
        let b = CancellationSource()
        let either = CancellationToken.either(a.token, b.token)
        #expect(either.canBeCancelled)
        b.cancel()
        #expect(either.isCancelled)
        #expect(a.token.core?.handlerCount == 0, "no garbage left on the other input")
        #expect(CancellationToken.either(.cancelled, .never).isCancelled)
        #expect(!CancellationToken.either(.never, .never).canBeCancelled)
    }

    @Test func bothCancelsWithTheLast() {
        let a = CancellationSource()
        let b = CancellationSource()
        let both = CancellationToken.both(a.token, b.token)
        a.cancel()
        #expect(!both.isCancelled)
        b.cancel()
        #expect(both.isCancelled)
        #expect(CancellationToken.both(.cancelled, .cancelled).isCancelled)
        #expect(!CancellationToken.both(.cancelled, .never).canBeCancelled)
    }

    @Test func linkedSourceIsCancelledByItsParent() {
        let parent = CancellationSource()
        let child = CancellationSource(linkedTo: parent.token)
        let runs = Counter()
        child.token.onCancel { runs.increment() }
        parent.cancel()
        #expect(child.token.isCancelled)
        #expect(runs.value == 1)
        // Cancelling the child does not cancel the parent.
        let parent2 = CancellationSource()
        let child2 = CancellationSource(linkedTo: parent2.token)
        child2.cancel()
        #expect(!parent2.token.isCancelled)
        #expect(parent2.token.core?.handlerCount == 0)
    }

    @Test func aLongLivedTokenWithManyShortLivedLinkedSourcesDoesNotGrow() {
        let longLived = CancellationSource()
        for _ in 0..<200_000 {
            let child = CancellationSource(linkedTo: longLived.token)
            child.token.onCancel { }
        }
        #expect(longLived.token.core?.handlerCount == 0)
        for _ in 0..<1_000 { _ = Future<Int>.never.cancellable(by: longLived.token).cancel() }
        #expect(longLived.token.core?.handlerCount == 0)
    }

    @Test func tenThousandRegistrationsRacingOneCancelAreNeverLost() {
        let source = CancellationSource()
        let runs = Counter()
        DispatchQueue.concurrentPerform(iterations: 4) { index in
            if index == 0 {
                for _ in 0..<5_000 { source.token.onCancel { runs.increment() } }
                source.cancel()
                for _ in 0..<1_000 { source.token.onCancel { runs.increment() } }
            } else {
                for _ in 0..<1_333 { source.token.onCancel { runs.increment() } }
            }
        }
        #expect(runs.value == 5_000 + 1_000 + 3 * 1_333)
    }

    @Test func racingCancelsRunHandlersOnce() {
        for _ in 0..<200 {
            let source = CancellationSource()
            let runs = Counter()
            source.token.onCancel { runs.increment() }
            let wins = Counter()
            DispatchQueue.concurrentPerform(iterations: 4) { _ in if source.cancel() { wins.increment() } }
            #expect(wins.value == 1)
            #expect(runs.value == 1)
        }
    }

    @Test func tokensAreEqualByIdentity() {
        let source = CancellationSource()
        #expect(source.token == source.token)
        #expect(source.token != CancellationSource().token)
        #expect(CancellationToken.never == .never)
    }

    // MARK: future.cancellable(by:)

    @Test func cancellableIsCancelledWhenTheTokenFiresFirst() {
        let promise = Promise<Int>()
        let source = CancellationSource()
        let guarded = promise.future.cancellable(by: source.token)
        source.cancel()
        #expect(guarded.outcome?.isCancelled == true)
        #expect(promise.isCancelled, "it was the only consumer, and withdrew")
    }

    @Test func cancellableCompletesNormallyAndUnregisters() {
        let promise = Promise<Int>()
        let source = CancellationSource()
        let guarded = promise.future.cancellable(by: source.token)
        #expect(source.token.core?.handlerCount == 1)
        promise.succeed(3)
        #expect(guarded.outcome?.value == 3)
        #expect(source.token.core?.handlerCount == 0)
        source.cancel()
        #expect(guarded.outcome?.value == 3)
    }

    @Test func anAlreadyCancelledTokenWinsOverACompletedFuture() {
        #expect(Future(value: 1).cancellable(by: .cancelled).outcome?.isCancelled == true)
        #expect(Future(value: 1).cancellable(by: .never).outcome?.value == 1)
    }

    // MARK: Swift concurrency bridges

    @Test func taskCancellationCancelsTheToken() async throws {
        let observed = Promise<Bool>()
        let started = Promise<Void>()
        let task = Task {
            await withCancellationToken { token in
                token.onCancel { observed.succeed(true) }
                started.succeed(())
                _ = await Future<Int>.never.result
            }
        }
        _ = await started.future.result
        task.cancel()
        #expect(try await observed.future.value)
    }

    @Test func tokenCancellationCancelsTheTask() async {
        let source = CancellationSource()
        let started = Promise<Void>()
        async let outcome: Bool = {
            do {
                _ = try await withTaskCancellation(by: source.token) {
                    started.succeed(())
                    return try await Future<Int>.never.value
                }
                return false
            } catch {
                return error is CancellationError
            }
        }()
        _ = await started.future.result
        source.cancel()
        #expect(await outcome)
        #expect(source.token.core?.handlerCount == 0)
    }

    @Test func runCancelledByATokenCancelsItsTask() async {
        let source = CancellationSource()
        let started = Promise<Void>()
        let future = Future<Int>.run(cancelledBy: source.token) {
            started.succeed(())
            return try await Future<Int>.never.value
        }
        _ = await started.future.result
        source.cancel()
        #expect(await future.result.isCancelled)
    }
}
