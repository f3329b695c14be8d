/// Leaving a future: a consumer that withdraws (and cancels the future when it was the last one), an
/// observer that goes away, and the walk up a chain that such cancellations make.
extension FutureStorage {
    /// A registrant leaves this future (see ``Withdrawal``): its entry, named by `key`, is taken
    /// off; a consumer lowers the count, and if no consumer is left the future is cancelled,
    /// atomically with the decision.
    ///
    /// - Returns: this future's own upstream link if this cancelled the future, for the caller's loop.
    @usableFromInline
    final func leave(_ withdrawal: Withdrawal, key: RegistrationKey?) -> UpstreamLink? {
        var work = CompletionWork()
        return withStateAndDepth({ $0.withdrawLocked(withdrawal, depth: $1, into: &work) }) { node, step in
            switch step {
            case .kept: return nil
            case .stillPending:
                if let key { node.removeRegistration(key) }
                return nil
            case .cancelled: return node.afterCompletion(&work)
            }
        }
    }

    /// Takes the entry registered under `key` off this future's callbacks if it is still pending,
    /// and releases it after the lock. A function of its own, so that ``withdraw(_:key:)`` holds no
    /// callback-typed value on its usual paths: unspecialised code pays a type-metadata lookup for
    /// each such value.
    @usableFromInline @inline(never)
    final func removeRegistration(_ key: RegistrationKey) {
        var removed: CallbackEntry<Value>? = nil  // released after the lock
        withState { $0.removeLocked(key, into: &removed) }
        releaseOutsideLock(removed)
    }
}

/// A future that consumers can withdraw from, type-erased (a consumer's value type differs): the
/// root class of every future, and of ``WeakSource``. A class rather than a protocol: a reference
/// to one is one word, where a protocol existential is two, and every future keeps one (its
/// `upstream`).
@usableFromInline
class ConsumerSource: @unchecked Sendable {
    // Safety: no stored state; subclasses give their own reasons.

    @inlinable init() {}

    /// A registrant leaves this future (see ``FutureStorage/leave(_:key:)``).
    ///
    /// - Returns: this future's own upstream link if this cancelled the future, for the caller's loop.
    @usableFromInline func withdraw(_ withdrawal: Withdrawal, key: RegistrationKey?) -> UpstreamLink? {
        preconditionFailure("every source overrides withdraw(_:key:)")
    }

    /// The future itself (for a ``WeakSource``: its target, if still alive).
    @usableFromInline var resolved: ConsumerSource? { preconditionFailure("every source overrides resolved") }

    /// Whether a cycle check's walk that reaches this future ends here (caller holds its lock): it
    /// holds its own state, and is not pending or waits on nothing. `false` if unknown.
    @usableFromInline var endsEveryWalkLocked: Bool { preconditionFailure("every source overrides endsEveryWalkLocked") }
}

extension FutureStorage {
    /// ``ConsumerSource/endsEveryWalkLocked``.
    @usableFromInline final var endsEveryWalkHere: Bool {
        assertLocked()
        return phase != .linked && (phase != .pending || !waitsLocked)
    }
}

/// A weak reference to an immortal future, for its consumers: nothing else keeps an unreferenced
/// chain rooted in `never` from being freed.
@usableFromInline
final class WeakSource: ConsumerSource, @unchecked Sendable {
    // Safety: `target` is written once, in `init`; Swift's weak references are thread-safe to load.
    @usableFromInline weak var target: ConsumerSource?

    @usableFromInline init(_ target: ConsumerSource) {
        self.target = target
        super.init()
    }

    @usableFromInline
    override func withdraw(_ withdrawal: Withdrawal, key: RegistrationKey?) -> UpstreamLink? {
        target?.withdraw(withdrawal, key: key)
    }

    @usableFromInline override var resolved: ConsumerSource? { target }

    @usableFromInline override var endsEveryWalkLocked: Bool { false }  // a walk passes to the target
}

/// How a registrant leaves a future it registered on.
@usableFromInline
enum Withdrawal: Sendable {
    /// A consumer counted in `consumers`: its entry goes, and a future left with no consumer is
    /// cancelled.
    case counted
    /// A consumer that withdrew as it arrived (never counted, no entry, like an already-cancelled
    /// task): a future with no consumer is cancelled.
    case uncounted
    /// An observer, like an `observe()` branch: only its entry goes.
    case observer
}

/// A future's registration on the future it consumes or follows: what it withdraws from, how, and
/// the key of its entry there.
@usableFromInline
struct UpstreamLink {
    @usableFromInline let source: ConsumerSource
    @usableFromInline let withdrawal: Withdrawal
    @usableFromInline let key: RegistrationKey?

    @inlinable init(source: ConsumerSource, withdrawal: Withdrawal, key: RegistrationKey?) {
        self.source = source
        self.withdrawal = withdrawal
        self.key = key
    }
}

@usableFromInline
enum Cancellation {
    /// Withdraws a registrant from `source` (see ``Withdrawal``), and then each future that this
    /// cancels from its own upstream, in a loop.
    ///
    /// A cancelled future's producer handlers run inside that loop, and some withdraw in turn (a
    /// join leaving its members, a race its losers), each in a loop of its own, one level deeper:
    /// nested joins would add frames at every level. A few levels run inline, as they always have
    /// (the withdrawal is done when the call returns); past ``inlineNesting`` loops on this thread,
    /// a withdrawal is queued, and the outermost loop takes it once the step that queued it
    /// returns, before that outermost call returns.
    @usableFromInline
    static func withdraw(from source: ConsumerSource, _ withdrawal: Withdrawal = .counted, key: RegistrationKey?) {
        unowned(unsafe) let context = ThreadContext.current.takeUnretainedValue()
        if context.withdrawalNesting >= inlineNesting {
            context.withdrawals.append(UpstreamLink(source: source, withdrawal: withdrawal, key: key))
            return
        }
        context.withdrawalNesting += 1
        var next = source.withdraw(withdrawal, key: key)
        while true {
            while let link = next {
                next = link.source.withdraw(link.withdrawal, key: link.key)
            }
            // Only the outermost loop takes queued withdrawals, in the order they were queued, each
            // moved out of the queue first: the queue never holds the last reference to a future, so
            // emptying it below frees only its buffer (freeing a future may run code that queues).
            guard context.withdrawalNesting == 1, context.withdrawalHead < context.withdrawals.count else { break }
            let queued = context.withdrawals[context.withdrawalHead].take()!
            context.withdrawalHead += 1
            next = queued.source.withdraw(queued.withdrawal, key: queued.key)
        }
        if context.withdrawalNesting == 1, !context.withdrawals.isEmpty {
            context.withdrawals.removeAll(keepingCapacity: context.withdrawals.capacity <= 1024)
            context.withdrawalHead = 0
        }
        context.withdrawalNesting -= 1
    }

    /// How many withdrawal loops may run one inside another on a thread before further withdrawals
    /// queue: enough that ordinary code (a handler that cancels a future and looks at its source)
    /// sees its withdrawal done, few enough to bound the stack a deep nest of joins takes.
    static let inlineNesting = 8

    /// Withdraws along `link`, and on up.
    @inlinable
    static func withdraw(from link: UpstreamLink) {
        withdraw(from: link.source, link.withdrawal, key: link.key)
    }
}
