import Synchronization
import Testing
@testable import Futures

/// What adding a producer's cancellation handler to a merged chain costs when the handler goes
/// before the ones already there. The handler list is a deque: a handler added at its front should
/// take a slot before the head and leave the others where they are, the buffer being reallocated
/// a logarithmic number of times, rather than shift every handler along once per addition (which
/// makes building the chain quadratic in its depth).
@Suite("Cancel handler cost")
struct CancelHandlerCostTests {
    /// Where the first handler of the set holding `future`'s level sits: its buffer's address and
    /// its index there; `nil` without a handler.
    static func firstHandlerSlot(_ future: Future<Int>) -> (address: UnsafeRawPointer?, index: Int)? {
        let root = future.storage.root()
        return LockTable.withLock(root) { () -> (UnsafeRawPointer?, Int)? in
            guard let handlers = root.extras?.merge.cancelHandlers, !handlers.isEmpty else { return nil }
            let address = handlers.buffer.withUnsafeBufferPointer { UnsafeRawPointer($0.baseAddress) }
            return (address, handlers.head)
        }
    }

    /// Whether the handler that was first (at `before`) was moved by an addition before it: it
    /// stays put when the new one takes the slot before it in the same buffer.
    static func moved(from before: (address: UnsafeRawPointer?, index: Int)?, to after: (address: UnsafeRawPointer?, index: Int)?) -> Bool {
        guard let before, let after else { return false }
        return after.address != before.address || after.index != before.index - 1
    }

    static let levels = 2_000

    final class Heard: Sendable {
        let count = Mutex(0)
        func add() { count.withLock { $0 += 1 } }
        var value: Int { count.withLock { $0 } }
    }

    /// A chain built from the bottom up with `complete(with:)`, each producer registering its
    /// `onCancel` handler once it has handed its future over (the natural order: delegate, then
    /// say how to stop). Each new handler is at depth 0 of a set whose handlers are all deeper, so
    /// it goes before all of them.
    @Test func aHandlerAddedAfterItsLevelMergedABottomUpChainDoesNotShiftTheOthers() {
        let heard = Heard()
        let promises = (0...Self.levels).map { _ in Promise<Int>() }
        var moves = 0
        for level in stride(from: Self.levels - 1, through: 0, by: -1) {
            #expect(promises[level].complete(with: promises[level + 1].future))
            let before = Self.firstHandlerSlot(promises[level].future)
            promises[level].onCancel { heard.add() }
            if Self.moved(from: before, to: Self.firstHandlerSlot(promises[level].future)) { moves += 1 }
        }
        #expect(moves <= 40, "the first handler moved \(moves) times for \(Self.levels) handlers added before it")
        #expect(promises[0].future.cancel())
        #expect(heard.value == Self.levels)
        #expect(promises.allSatisfy { $0.future.outcome?.isCancelled == true })
    }

    /// A chain merged from the top down, whose producers then register their handlers from the
    /// deepest up (a loop that hands each level over first and arms cancellation on the way back):
    /// each handler goes before all the others.
    @Test func handlersAddedFromTheDeepestLevelUpDoNotShiftTheOthers() {
        let heard = Heard()
        let promises = (0...Self.levels).map { _ in Promise<Int>() }
        for level in 0..<Self.levels { #expect(promises[level].complete(with: promises[level + 1].future)) }
        var moves = 0
        for level in stride(from: Self.levels, through: 0, by: -1) {
            let before = Self.firstHandlerSlot(promises[0].future)
            promises[level].onCancel { heard.add() }
            if Self.moved(from: before, to: Self.firstHandlerSlot(promises[0].future)) { moves += 1 }
        }
        #expect(moves <= 40, "the first handler moved \(moves) times for \(Self.levels) handlers added before it")
        // The producers stay alive until the cancellation (an optimised build would release the
        // array after its last read, and the deepest promise, freed, would break the chain first).
        withExtendedLifetime(promises) {
            #expect(promises[0].future.cancel())
            #expect(heard.value == Self.levels + 1)
        }
    }
}
