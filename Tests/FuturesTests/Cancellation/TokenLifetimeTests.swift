import Dispatch
import FuturesTestHelpers
import Testing
@testable import Futures

/// Tokens let go of what they no longer need: a released source's handlers are freed outside every
/// lock (even when freeing them releases other sources), and composed tokens leave nothing on a
/// long-lived input.
@Suite("Token lifetimes")
struct TokenLifetimeTests {
    /// Releasing a source frees its handlers; here each handler is the only owner of another
    /// source, whose release takes a stripe lock again. Freed under the first lock, that is a
    /// self-deadlock (release builds only, where the optimiser may shorten lifetimes), so the
    /// rounds run on another thread and the test fails, rather than hangs, if they never finish.
    @Test func releasingASourceWhoseHandlersOwnOtherSourcesNeverDeadlocks() async {
        let finished = DispatchSemaphore(value: 0)
        let cancelledChildren = Counter()
        // Fewer rounds under a sanitizer, where 2,000 took most of the two minutes on a busy machine
        // (the deadlock this looks for is a release build's).
        let rounds = DepthMatrixTests.sanitized ? 300 : 2_000
        DispatchQueue.global().async {
            for _ in 0..<rounds {
                var parent: CancellationSource? = CancellationSource()
                for _ in 0..<64 {
                    let child = CancellationSource()
                    child.token.onCancel { cancelledChildren.increment() }
                    parent!.token.onCancel { child.cancel() }
                }
                parent = nil
            }
            finished.signal()
        }
        #expect(await offThePool { finished.wait(timeout: .now() + 120) } == .success, "releasing a source deadlocked")
        #expect(cancelledChildren.value == 0, "handlers of a released source never run")
    }

    /// The meter the leak tests rely on sees a leak, and sees none where there is none.
    @Test func theHeapMeterMeasuresWhatStaysAllocated() async throws {
        guard let leaking = try await heapKeptPerIteration("meter-leak") else { return }  // under a sanitizer
        #expect(leaking >= 64, "a 64-byte array kept per iteration measured as \(leaking) B")
        #expect(try #require(try await heapKeptPerIteration("meter-clean")) < 32)
    }

    /// Composed tokens and `unless` registrations on a long-lived token, each request's source
    /// dropped, keep nothing (measured in a process of its own).
    @Test(arguments: ["either", "both", "nested", "unless"])
    func composedTokensOnALongLivedTokenKeepNothingPerRequest(scenario: String) async throws {
        guard let kept = try await heapKeptPerIteration(scenario) else { return }
        #expect(kept < 32, "\(scenario) keeps \(kept) B per request on a long-lived token")
    }

    @Test func eitherOfALongLivedTokenAndADroppedOneLeavesNothingBehind() {
        let app = CancellationSource()
        for _ in 0..<1_000 {
            let request = CancellationSource()
            _ = CancellationToken.either(app.token, request.token)
        }
        #expect(app.token.core?.handlerCount == 0)
    }

    @Test func bothOfALongLivedTokenAndADroppedOneLeavesNothingBehind() {
        let app = CancellationSource()
        for _ in 0..<1_000 {
            let request = CancellationSource()
            #expect(CancellationToken.both(app.token, request.token).canBeCancelled)
        }
        #expect(app.token.core?.handlerCount == 0)
    }

    @Test func bothWhoseInputCanNoLongerFireCanNoLongerFireAndUnregistersAtOnce() {
        let app = CancellationSource()
        var request: CancellationSource? = CancellationSource()
        let both = CancellationToken.both(app.token, request!.token)
        #expect(both.canBeCancelled)
        #expect(app.token.core?.handlerCount == 1)
        request = nil
        #expect(!both.canBeCancelled, "the released input can never be cancelled, so neither can both")
        #expect(app.token.core?.handlerCount == 0, "its registration on the live input is gone")
        app.cancel()
        #expect(!both.isCancelled)
    }

    @Test func eitherWhoseInputsCanNoLongerFireCanNoLongerFire() {
        var first: CancellationSource? = CancellationSource()
        var second: CancellationSource? = CancellationSource()
        let either = CancellationToken.either(first!.token, second!.token)
        first = nil
        #expect(either.canBeCancelled, "the second input can still cancel it")
        second = nil
        #expect(!either.canBeCancelled)
        #expect(!either.isCancelled)
    }

    @Test func eitherWithOneDroppedInputIsStillCancelledByTheOther() {
        let app = CancellationSource()
        var request: CancellationSource? = CancellationSource()
        let either = CancellationToken.either(app.token, request!.token)
        request = nil
        #expect(either.canBeCancelled)
        app.cancel()
        #expect(either.isCancelled)
        #expect(app.token.core?.handlerCount == 0)
    }

    @Test func aHandlerOnADroppedComposedTokenStillRuns() {
        let a = CancellationSource()
        let b = CancellationSource()
        let runs = Counter()
        CancellationToken.either(a.token, b.token).onCancel { runs.increment() }
        CancellationToken.both(a.token, b.token).onCancel { runs.increment() }
        a.cancel()
        #expect(runs.value == 1, "either fired; both waits for b")
        b.cancel()
        #expect(runs.value == 2)
        #expect(a.token.core?.handlerCount == 0 && b.token.core?.handlerCount == 0)
    }

    @Test func aHandlerOnAComposedTokenIsReleasedWhenItsInputsDie() {
        var a: CancellationSource? = CancellationSource()
        var b: CancellationSource? = CancellationSource()
        weak var weakProbe: Probe?
        do {
            let probe = Probe()
            weakProbe = probe
            CancellationToken.either(a!.token, b!.token).onCancel { _ = probe }
        }
        a = nil
        #expect(weakProbe != nil, "b can still cancel it")
        b = nil
        #expect(weakProbe == nil, "nothing can cancel it: its handler is released unrun")
    }

    @Test func nestedComposedTokensUnwindWhenDropped() {
        let app = CancellationSource()
        weak var weakInner: TokenCore?
        for _ in 0..<1_000 {
            let request = CancellationSource()
            let session = CancellationSource()
            let inner = CancellationToken.either(app.token, request.token)
            weakInner = inner.core
            _ = CancellationToken.both(inner, session.token)
        }
        #expect(weakInner == nil)
        #expect(app.token.core?.handlerCount == 0)
    }

    @Test func unlessLeavesNothingOnTheOtherTokenWhenTheMainOneDies() {
        let finished = CancellationSource()
        weak var weakProbe: Probe?
        var main: CancellationSource? = CancellationSource()
        do {
            let probe = Probe()
            weakProbe = probe
            main!.token.onCancel(unless: finished.token) { _ = probe }
        }
        #expect(finished.token.core?.handlerCount == 1)
        main = nil
        #expect(weakProbe == nil)
        #expect(finished.token.core?.handlerCount == 0)
    }

    @Test func unlessStillRunsWhenTheOtherTokenDies() {
        let main = CancellationSource()
        var other: CancellationSource? = CancellationSource()
        let runs = Counter()
        main.token.onCancel(unless: other!.token) { runs.increment() }
        other = nil
        main.cancel()
        #expect(runs.value == 1)
    }

    @Test func composedTokensRacingTheirInputsDecideOnce() {
        for _ in 0..<500 {
            let a = CancellationSource()
            let b = Locked<CancellationSource?>(CancellationSource())
            let bToken = b.withLock { $0!.token }
            let either = CancellationToken.either(a.token, bToken)
            let both = CancellationToken.both(a.token, bToken)
            let runs = Counter()
            either.onCancel { runs.increment() }
            both.onCancel { runs.increment() }
            DispatchQueue.concurrentPerform(iterations: 3) { index in
                switch index {
                case 0: a.cancel()
                case 1: releaseOutsideLock(b.withLock { source in
                    var taken: CancellationSource?
                    swap(&taken, &source)
                    return taken
                })
                default: _ = CancellationToken.either(either, both).canBeCancelled
                }
            }
            #expect(either.isCancelled)
            #expect(runs.value == 1 + (both.isCancelled ? 1 : 0))
            #expect(a.token.core?.handlerCount == 0)
        }
    }

    /// A long-lived token that many composed tokens once listened to is released promptly.
    @Test func releasingALongLivedSourceAfterManyComposedTokensFinishes() async {
        let finished = DispatchSemaphore(value: 0)
        // Fewer under a sanitizer, where 200,000 ran past the two minutes on a busy machine.
        let requests = DepthMatrixTests.sanitized ? 20_000 : 200_000
        DispatchQueue.global().async {
            var app: CancellationSource? = CancellationSource()
            var kept: [CancellationToken] = []
            for index in 0..<requests {
                let request = CancellationSource()
                let token = CancellationToken.either(app!.token, request.token)
                if index % 100 == 0 { kept.append(token) }
            }
            app = nil
            #expect(kept.allSatisfy { !$0.canBeCancelled })
            finished.signal()
        }
        #expect(await offThePool { finished.wait(timeout: .now() + 120) } == .success)
    }

    @Test func unlessNeverRunsWhenTheOtherTokensCancellationCausedThisOne() {
        let parent = CancellationSource()
        let child = CancellationSource(linkedTo: parent.token)
        let user = CancellationSource()
        let deadline = CancellationSource()
        let runs = Counter()
        child.token.onCancel(unless: parent.token) { runs.increment() }
        CancellationToken.either(user.token, deadline.token).onCancel(unless: user.token) { runs.increment() }
        parent.cancel()
        user.cancel()
        #expect(child.token.isCancelled)
        #expect(runs.value == 0, "the other token was cancelled first in both cases")
        #expect(parent.token.core?.handlerCount == 0 && user.token.core?.handlerCount == 0)
    }

    /// Chains of tokens far deeper than a thread's stack could hold as a recursion, on a 512 KiB
    /// stack: cancelled from the root, made immortal, and dropped.
    @Test func deepTokenGraphsRunInALoop() async {
        let depth = 100_000
        await onSmallStackOffThePool {
            // Linked sources, cancelled from the root.
            let root = CancellationSource()
            var chain = [root]
            for _ in 0..<depth { chain.append(CancellationSource(linkedTo: chain.last!.token)) }
            let reached = Counter()
            chain.last!.token.onCancel { reached.increment() }
            root.cancel()
            #expect(reached.value == 1)
            #expect(chain.allSatisfy { $0.token.isCancelled })
        }
        await onSmallStackOffThePool {
            // Nested `either`, cancelled from the innermost source.
            let innermost = CancellationSource()
            var token = innermost.token
            let others = (0..<depth).map { _ in CancellationSource() }
            for other in others { token = CancellationToken.either(token, other.token) }
            let reached = Counter()
            token.onCancel { reached.increment() }
            innermost.cancel()
            #expect(reached.value == 1)
        }
        await onSmallStackOffThePool {
            // Nested `both`, whose sources are released: nothing can cancel it any more.
            var sources: [CancellationSource]? = (0...depth).map { _ in CancellationSource() }
            var token = sources![0].token
            for source in sources!.dropFirst() { token = CancellationToken.both(token, source.token) }
            #expect(token.canBeCancelled)
            sources = nil
            #expect(!token.canBeCancelled)
        }
        await onSmallStackOffThePool {
            // Nested `either`, dropped: each composed token detaches from its inputs as it goes.
            let app = CancellationSource()
            do {
                var token = app.token
                let others = (0..<depth).map { _ in CancellationSource() }
                for other in others { token = CancellationToken.either(token, other.token) }
                #expect(app.token.core?.handlerCount == 1)
            }
            #expect(app.token.core?.handlerCount == 0)
        }
    }

    @Test func aHandlerThatCancelsAnotherTokenSeesItCancelledAndItsHandlersRunBeforeCancelReturns() {
        let first = CancellationSource()
        let second = CancellationSource()
        let order = Recorder<String>()
        second.token.onCancel { order.append("second's handler") }
        first.token.onCancel {
            second.cancel()
            order.append(second.token.isCancelled ? "second is cancelled" : "second is not cancelled")
        }
        first.cancel()
        #expect(order.all == ["second is cancelled", "second's handler"])
    }

    /// Freeing a handler's captures inside the token loop may release a source, whose token work
    /// then queues: none of it is lost, and nothing corrupts the queue.
    @Test func workQueuedWhileTheLoopFreesHandlersStillRuns() {
        final class Owner: Sendable {
            let source = CancellationSource()
        }
        for _ in 0..<100 {
            let parent = CancellationSource()
            let child = CancellationSource(linkedTo: parent.token)
            let other = CancellationSource()
            var owner: Owner? = Owner()
            let composed = CancellationToken.both(owner!.source.token, other.token)
            do {
                let captured = owner!
                child.token.onCancel { _ = captured }
            }
            owner = nil
            #expect(composed.canBeCancelled)
            parent.cancel()
            #expect(!composed.canBeCancelled, "the owner's source was released: both can never fire")
            #expect(other.token.core?.handlerCount == 0)
        }
    }

    @Test func aHandlerRegisteredOnATokenWhoseHandlersAreQueuedRunsAfterThem() {
        let first = CancellationSource()
        let second = CancellationSource()
        let order = Recorder<String>()
        second.token.onCancel { order.append("second's first handler") }
        first.token.onCancel {
            second.cancel()
            second.token.onCancel { order.append("registered after the cancel") }
        }
        first.cancel()
        #expect(order.all == ["second's first handler", "registered after the cancel"])
    }

    @Test func unlessRunsWhenBothTokensAreCancelledTogetherAndThisOneFirst() {
        let parent = CancellationSource()
        let main = CancellationSource(linkedTo: parent.token)
        let other = CancellationSource(linkedTo: parent.token)
        let runs = Counter()
        main.token.onCancel(unless: other.token) { runs.increment() }
        parent.cancel()
        #expect(runs.value == 1, "main was cancelled before other")
    }
}
