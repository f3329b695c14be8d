import Testing
@testable import Futures

/// The state machine alone, without a future or a lock: every pair of state and event, as the
/// table in `FutureState.swift` lists them.
@Suite("Future state machine")
struct FutureStateTests {
    /// The states the table has a column for, in its order.
    static let states: [FutureState] = [
        .pending(consumers: 0), .pending(consumers: 1), .pending(consumers: 2),
        .completed(draining: false), .completed(draining: true), .linked(depth: 3), .never,
    ]

    /// One event, with its inputs.
    enum Event: CaseIterable, CustomTestStringConvertible, Sendable {
        case registerCounted, registerObserver, restartDrain
        case completeAcceptedWithCallbacks, completeAcceptedWithout, completeRefused
        case withdrawCounted, withdrawCountedNothingToDrain, withdrawUncounted, withdrawObserver
        case withdrawCountedMerged, withdrawUncountedMerged, withdrawObserverMerged
        case remove, endBatchWithLate, endBatchWithoutLate
        case addCancelHandlerCancelled, addCancelHandlerOtherwise
        case handOverAccepted, handOverRefused, takeDeferredWork, completionToken
        case mergeInto2, mergeInto0, adopterEdge, gainWaiter, relink5, relink0

        var testDescription: String { "\(self)" }

        /// Applies the event to `state` and names the action it returned.
        func apply(to state: inout FutureState) -> String {
            switch self {
            case .registerCounted: "\(state.register(counted: true))"
            case .registerObserver: "\(state.register(counted: false))"
            case .restartDrain: "\(state.restartDrain())"
            case .completeAcceptedWithCallbacks: "\(state.complete(accepted: true, hasCallbacks: true))"
            case .completeAcceptedWithout: "\(state.complete(accepted: true, hasCallbacks: false))"
            case .completeRefused: "\(state.complete(accepted: false, hasCallbacks: true))"
            case .withdrawCounted: "\(state.withdraw(.counted, merged: false, hasCallbacks: true))"
            case .withdrawCountedNothingToDrain: "\(state.withdraw(.counted, merged: false, hasCallbacks: false))"
            case .withdrawUncounted: "\(state.withdraw(.uncounted, merged: false, hasCallbacks: true))"
            case .withdrawObserver: "\(state.withdraw(.observer, merged: false, hasCallbacks: true))"
            case .withdrawCountedMerged: "\(state.withdraw(.counted, merged: true, hasCallbacks: true))"
            case .withdrawUncountedMerged: "\(state.withdraw(.uncounted, merged: true, hasCallbacks: true))"
            case .withdrawObserverMerged: "\(state.withdraw(.observer, merged: true, hasCallbacks: true))"
            case .remove: "\(state.remove())"
            case .endBatchWithLate: "\(state.endBatch(hasLate: true))"
            case .endBatchWithoutLate: "\(state.endBatch(hasLate: false))"
            case .addCancelHandlerCancelled: "\(state.addCancelHandler(cancelled: true))"
            case .addCancelHandlerOtherwise: "\(state.addCancelHandler(cancelled: false))"
            case .handOverAccepted: "\(state.handOver(accepted: true))"
            case .handOverRefused: "\(state.handOver(accepted: false))"
            case .takeDeferredWork: state.takeDeferredWork() ? "take" : "none"
            case .completionToken: "\(state.completionToken())"
            case .mergeInto2: "\(state.mergeInto(depth: 2))"
            case .mergeInto0: "\(state.mergeInto(depth: 0))"
            case .adopterEdge: "\(state.adopterEdge())"
            case .gainWaiter: "\(state.gainWaiter())"
            case .relink5: "\(state.relink(depth: 5))"
            case .relink0: "\(state.relink(depth: 0))"
            }
        }
    }

    /// A state's short name: `p2` pending with 2 consumers, `c` completed and idle, `c*` completed
    /// and draining, `l3` linked 3 deep, `nv` never.
    static func name(_ state: FutureState) -> String {
        switch state {
        case .pending(let consumers): "p\(consumers)"
        case .completed(let draining): draining ? "c*" : "c"
        case .linked(let depth): "l\(depth)"
        case .never: "nv"
        }
    }

    /// The table: for each event, what each state (in the order of ``states``: p0 p1 p2 c c* l3 nv)
    /// does: the action, and `→` the next state where it changes.
    static let table: [Event: [String]] = [
        .registerCounted: ["append→p1", "append→p2", "append→p3", "runNow", "appendLate", "impossible", "drop"],
        .registerObserver: ["append", "append", "append", "runNow", "appendLate", "impossible", "drop"],
        .restartDrain: ["impossible", "impossible", "impossible", "appendAndDrain→c*", "appendLate", "impossible", "impossible"],
        .completeAcceptedWithCallbacks: ["won→c*", "won→c*", "won→c*", "rejected", "rejected", "impossible", "rejected"],
        .completeAcceptedWithout: ["won→c", "won→c", "won→c", "rejected", "rejected", "impossible", "rejected"],
        .completeRefused: ["rejected", "rejected", "rejected", "rejected", "rejected", "impossible", "rejected"],
        .withdrawCounted: ["cancelled→c*", "cancelled→c*", "stillPending→p1", "kept", "kept", "impossible", "kept"],
        .withdrawCountedNothingToDrain: ["cancelled→c", "cancelled→c", "stillPending→p1", "kept", "kept", "impossible", "kept"],
        .withdrawUncounted: ["cancelled→c*", "stillPending", "stillPending", "kept", "kept", "impossible", "kept"],
        .withdrawObserver: ["stillPending", "stillPending", "stillPending", "kept", "kept", "impossible", "kept"],
        .withdrawCountedMerged: ["impossible", "impossible", "impossible", "kept", "kept", "impossible", "kept"],
        .withdrawUncountedMerged: ["stillPending", "stillPending", "stillPending", "kept", "kept", "impossible", "kept"],
        .withdrawObserverMerged: ["impossible", "impossible", "impossible", "kept", "kept", "impossible", "kept"],
        .remove: ["remove", "remove", "remove", "nothing", "nothing", "impossible", "nothing"],
        .endBatchWithLate: ["impossible", "impossible", "impossible", "impossible", "nextBatch", "impossible", "impossible"],
        .endBatchWithoutLate: ["impossible", "impossible", "impossible", "impossible", "idle→c", "impossible", "impossible"],
        .addCancelHandlerCancelled: ["store", "store", "store", "runNow", "runNow", "impossible", "drop"],
        .addCancelHandlerOtherwise: ["store", "store", "store", "drop", "drop", "impossible", "drop"],
        .handOverAccepted: ["handOver", "handOver", "handOver", "refuse", "refuse", "impossible", "refuse"],
        .handOverRefused: ["refuse", "refuse", "refuse", "refuse", "refuse", "impossible", "refuse"],
        .takeDeferredWork: ["take", "take", "take", "none", "none", "none", "none"],
        .completionToken: ["pendingToken", "pendingToken", "pendingToken", "cancelledToken", "cancelledToken", "impossible", "neverToken"],
        .mergeInto2: ["proceed→l2", "impossible", "impossible", "impossible", "impossible", "impossible", "impossible"],
        .mergeInto0: ["impossible", "impossible", "impossible", "impossible", "impossible", "impossible", "impossible"],
        .adopterEdge: ["proceed", "proceed", "proceed", "impossible", "impossible", "impossible", "impossible"],
        .gainWaiter: ["proceed→p1", "proceed→p2", "proceed→p3", "impossible", "impossible", "impossible", "impossible"],
        .relink5: ["impossible", "impossible", "impossible", "impossible", "impossible", "proceed→l5", "impossible"],
        .relink0: ["impossible", "impossible", "impossible", "impossible", "impossible", "impossible", "impossible"],
    ]

    @Test("every pair of state and event", arguments: Event.allCases)
    func everyPair(_ event: Event) throws {
        let row = try #require(Self.table[event], "the table has no row for \(event)")
        try #require(row.count == Self.states.count)
        for (state, expected) in zip(Self.states, row) {
            var next = state
            let action = event.apply(to: &next)
            let seen = next == state ? action : "\(action)→\(Self.name(next))"
            #expect(seen == expected, "\(event) in \(Self.name(state))")
        }
    }

    @Test func anImpossiblePairChangesNothing() {
        for event in Event.allCases {
            for state in Self.states {
                var next = state
                if event.apply(to: &next) == "impossible" { #expect(next == state, "\(event) in \(Self.name(state))") }
            }
        }
    }

    @Test func linkedAndNeverAreFinalAndACompletedFutureNeverPendsAgain() {
        for event in Event.allCases {
            for state in Self.states {
                var next = state
                _ = event.apply(to: &next)
                switch state {
                case .linked: #expect(next.phase == .linked, "\(event) in \(Self.name(state))")
                case .never: #expect(next == .never, "\(event) in \(Self.name(state))")
                case .completed: #expect(next.phase == .completed, "\(event) in \(Self.name(state))")
                case .pending: break
                }
            }
        }
    }

    @Test func eachCaseCarriesOnlyItsOwnData() {
        #expect(FutureState.pending(consumers: 4).consumers == 4)
        #expect(FutureState.linked(depth: 4).consumers == 0)
        #expect(FutureState.linked(depth: 4).linkDepth == 4)
        #expect(FutureState.pending(consumers: 4).linkDepth == 0)
        #expect(FutureState.completed(draining: true).draining)
        #expect(!FutureState.pending(consumers: 0).draining && !FutureState.completed(draining: false).draining)
        #expect(Self.states.map(\.phase) == [.pending, .pending, .pending, .completed, .completed, .linked, .never])
    }

    @Test func theStateAndTheFutureFlagsShareOneWord() {
        // FutureStorage keeps two byte-sized fields after the state.
        #expect(MemoryLayout<FutureState>.size + 2 <= 8)
    }

    @Test func aStorageAsksTheMachine() {
        // The storage's transitions move its state as the table says.
        let future = FutureStorage<Int>()
        var entry: CallbackEntry<Int>? = .success { _ in }
        LockTable.withLock(future) { _ = future.registerLocked(&entry, counted: true) }
        #expect(LockTable.withLock(future) { future.state } == .pending(consumers: 1))
        var work = CompletionWork()
        let step = LockTable.withLock(future) { future.completeLocked(.success(1), from: nil, into: &work) }
        #expect(step == .won && work.drain)
        #expect(LockTable.withLock(future) { future.state } == .completed(draining: true))
        // What a drain loop does: it takes the callbacks, runs them, then asks for the next batch.
        var taken = CallbackList<Int>()
        LockTable.withLock(future) { swap(&taken, &future.callbacks) }
        #expect(taken.count == 1)
        var batch = CallbackList<Int>()
        let more = LockTable.withLock(future) { future.takeLateCallbacksLocked(into: &batch) }
        #expect(!more)
        #expect(LockTable.withLock(future) { future.state } == .completed(draining: false))
    }
}
