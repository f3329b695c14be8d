/// Leaving a future: a consumer that withdraws (and cancels the future when it was the last one), an
/// observer that goes away, and the walk up a chain that such cancellations make.
extension FutureStorage {
    /// A registrant leaves this future (see ``Withdrawal``): its entry, named by `key`, is taken
    /// off; a consumer lowers the count, and if no consumer is left the future is cancelled,
    /// atomically with the decision.
    ///
    /// - Returns: this future's own upstream link if this cancelled the future, for the caller's loop.
    @usableFromInline
    final func withdraw(_ withdrawal: Withdrawal, key: RegistrationKey?) -> UpstreamLink? {
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

/// A future that consumers can withdraw from (type-erased, since a consumer's value type differs).
@usableFromInline
protocol ConsumerSource: AnyObject, Sendable {
    func withdraw(_ withdrawal: Withdrawal, key: RegistrationKey?) -> UpstreamLink?
    /// The future itself (for a ``WeakSource``: its target, if still alive).
    var resolved: (any ConsumerSource)? { get }
}

extension FutureStorage: ConsumerSource {
    @usableFromInline var resolved: (any ConsumerSource)? { self }
}

/// A weak reference to an immortal future, for its consumers: nothing else keeps an unreferenced
/// chain rooted in `never` from being freed.
@usableFromInline
final class WeakSource: ConsumerSource, @unchecked Sendable {
    // Safety: `target` is written once, in `init`; Swift's weak references are thread-safe to load.
    @usableFromInline weak var target: (any ConsumerSource)?

    @usableFromInline init(_ target: any ConsumerSource) { self.target = target }

    @usableFromInline
    func withdraw(_ withdrawal: Withdrawal, key: RegistrationKey?) -> UpstreamLink? {
        target?.withdraw(withdrawal, key: key)
    }

    @usableFromInline var resolved: (any ConsumerSource)? { target }
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
    @usableFromInline let source: any ConsumerSource
    @usableFromInline let withdrawal: Withdrawal
    @usableFromInline let key: RegistrationKey?

    @inlinable init(source: any ConsumerSource, withdrawal: Withdrawal, key: RegistrationKey?) {
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
    /// join leaving its members, a race its losers): each level of nested joins would add frames.
    /// So on a thread where a withdrawal loop already runs, the withdrawal is queued, and the
    /// outermost loop takes it after the step that queued it returns; every withdrawal a call starts
    /// is done before that call returns, unless a loop further up the stack will do it.
    @usableFromInline
    static func withdraw(from source: any ConsumerSource, _ withdrawal: Withdrawal = .counted, key: RegistrationKey?) {
        unowned(unsafe) let context = ThreadContext.current.takeUnretainedValue()
        if context.isWithdrawing {
            context.withdrawals.append(UpstreamLink(source: source, withdrawal: withdrawal, key: key))
            return
        }
        context.isWithdrawing = true
        var next = source.withdraw(withdrawal, key: key)
        while true {
            while let link = next {
                next = link.source.withdraw(link.withdrawal, key: link.key)
            }
            // Queued by the steps above, in the order they were queued.
            guard context.withdrawalHead < context.withdrawals.count else { break }
            let queued = context.withdrawals[context.withdrawalHead]
            context.withdrawalHead += 1
            next = queued.source.withdraw(queued.withdrawal, key: queued.key)
        }
        context.withdrawals.removeAll(keepingCapacity: context.withdrawals.capacity <= 1024)
        context.withdrawalHead = 0
        context.isWithdrawing = false
    }

    /// Withdraws along `link`, and on up.
    @inlinable
    static func withdraw(from link: UpstreamLink) {
        withdraw(from: link.source, link.withdrawal, key: link.key)
    }
}
