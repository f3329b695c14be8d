/// Caches the values of asynchronous fetches by key (FutureKit's `FutureCache`), sharing each
/// fetch among everyone who asks for the key while it runs.
///
/// ```swift
/// let avatars = FutureCache<String, Data>()
/// let mine = avatars.value(for: "me", expiresAfter: .seconds(300)) { download("me") }
/// let again = avatars.value(for: "me") { download("me") }  // shares the same download
/// ```
///
/// - Every caller gets its own future, a consumer of the shared fetch: cancelling one caller's
///   future cancels only that future; the fetch is cancelled when every caller has cancelled.
/// - A fetch that fails or is cancelled is evicted, so the next caller fetches again.
/// - A value expires `expiresAfter` its arrival (measured on the cache's clock); `nil` keeps it
///   until removed. The next caller after expiry fetches again.
///
/// Thread-safe. `fetch` runs on the calling thread, outside the cache's lock, so it may use the
/// cache for other keys; a fetch must not return a future that waits for its own key (that would
/// wait for itself). The key's `Hashable` conformance and the clock's `now` run under the cache's
/// own lock (never a future's), so they must not use the cache.
public final class FutureCache<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    private let state = Locked(CacheState<Key, Value>())
    /// Makes a deadline check `lifetime` from now, on the cache's clock.
    private let deadline: @Sendable (Duration) -> @Sendable () -> Bool

    /// Creates an empty cache.
    ///
    /// - Parameter clock: the clock that measures expiry (a manual clock in tests).
    public init<C: Clock>(clock: C = ContinuousClock()) where C.Duration == Duration {
        deadline = { lifetime in
            let end = clock.now.advanced(by: lifetime)
            return { clock.now >= end }
        }
    }

    /// The cached value for `key`, the fetch already running for it, or a new fetch.
    ///
    /// - Parameters:
    ///   - key: what to look up.
    ///   - lifetime: how long a value fetched by this call stays cached once it arrives; `nil`
    ///     (the default) keeps it until removed. A call that shares a running fetch or finds a
    ///     cached value does not change its lifetime.
    ///   - file: the file of the call, for diagnostics; leave the default.
    ///   - line: the line of the call, for diagnostics; leave the default.
    ///   - fetch: starts the fetch when there is neither a value nor a fetch running.
    /// - Returns: this caller's future of the value.
    public func value(
        for key: Key,
        expiresAfter lifetime: Duration? = nil,
        file: StaticString = #fileID,
        line: UInt = #line,
        fetch: () -> Future<Value>
    ) -> Future<Value> {
        value(for: key, lifetime: lifetime, file: file, line: line, fetch: fetch)
    }

    /// The form above without the call site, kept so that code naming it still compiles; a
    /// call chooses the form above.
    @_disfavoredOverload
    public func value(
        for key: Key,
        expiresAfter lifetime: Duration? = nil,
        fetch: () -> Future<Value>
    ) -> Future<Value> {
        value(for: key, lifetime: lifetime, file: #fileID, line: #line, fetch: fetch)
    }

    private func value(
        for key: Key,
        lifetime: Duration?,
        file: StaticString,
        line: UInt,
        fetch: () -> Future<Value>
    ) -> Future<Value> {
        while true {
            switch lookUp(key, lifetime: lifetime, file: file, line: line) {
            case .cached(let value):
                return Future(value: value)
            case .fetch(let promise, let mine):
                promise.complete(with: fetch())
                return mine.made("cache", file, line)
            case .running(let shared):
                let mine = shared.passingThrough()
                // Every caller of that fetch cancelled just before this one came: it is gone
                // (and being evicted), so start again rather than hand out its cancellation. Once
                // `mine` is registered it keeps the fetch from being cancelled that way.
                if shared.outcome?.isCancelled == true { continue }
                return mine.made("cache", file, line)
            }
        }
    }

    /// Forgets `key`'s value, or its running fetch (which goes on for the callers that have it).
    ///
    /// - Parameter key: the key to forget.
    public func removeValue(for key: Key) {
        let removed = state.withLock { $0.entries.removeValue(forKey: key) }
        releaseOutsideLock(removed)
    }

    /// Forgets every value and running fetch.
    public func removeAll() {
        let removed = state.withLock { cache in
            var taken: [Key: CacheEntry<Value>] = [:]
            swap(&taken, &cache.entries)
            return taken
        }
        releaseOutsideLock(removed)
    }

    /// Drops the values that have expired (they are otherwise dropped when next asked for).
    public func removeExpired() {
        let removed = state.withLock { cache in
            let expired = cache.entries.filter { $0.value.isExpired }
            for key in expired.keys { cache.entries.removeValue(forKey: key) }
            return expired
        }
        releaseOutsideLock(removed)
    }

    /// How many keys have a value (expired ones included until dropped) or a running fetch.
    public var count: Int { state.withLock { $0.entries.count } }

    // MARK: Internals

    private enum Lookup {
        case cached(Value)
        case running(Future<Value>)
        /// A new fetch to start, and this caller's future of it.
        case fetch(Promise<Value>, mine: Future<Value>)
    }

    private func lookUp(_ key: Key, lifetime: Duration?, file: StaticString, line: UInt) -> Lookup {
        var stale: CacheEntry<Value>?  // released outside the lock
        defer { releaseOutsideLock(stale) }
        return state.withLock { cache in
            if let entry = cache.entries[key] {
                if let value = entry.value, !entry.isExpired { return .cached(value) }
                if entry.value == nil, entry.shared.outcome.map(\.isSuccess) ?? true {
                    return .running(entry.shared)  // pending, or succeeded and about to be stored
                }
                stale = cache.entries.removeValue(forKey: key)  // expired, failed or cancelled
            }
            // The caller's future is registered before the entry is published, so another caller
            // cancelling its own cannot leave the fetch without consumers (and cancel it) first.
            // Registering on a new pending future runs no code, and these two registrations, which
            // run no user code, capture no context (a carrier's `capture()` is user code, never
            // called under this lock), so it is safe under this lock.
            let promise = Promise<Value>(file: file, line: line)
            let mine = promise.future.passingThrough()
            cache.nextID += 1
            let id = cache.nextID
            promise.future.storage.register({ [weak self] outcome in
                self?.settle(key, id: id, with: outcome)
            }, asConsumer: false, carryingContext: false)
            cache.entries[key] = CacheEntry(id: id, shared: promise.future, lifetime: lifetime)
            return .fetch(promise, mine: mine)
        }
    }

    /// A fetch finished: keep its value, or evict it.
    private func settle(_ key: Key, id: UInt64, with outcome: Outcome<Value>) {
        let evicted: CacheEntry<Value>? = state.withLock { cache in
            guard let entry = cache.entries[key], entry.id == id else { return nil }  // replaced
            guard let value = outcome.value else { return cache.entries.removeValue(forKey: key) }
            cache.entries[key]!.value = value
            cache.entries[key]!.expired = entry.lifetime.map(deadline)
            return nil
        }
        releaseOutsideLock(evicted)
    }
}

struct CacheState<Key: Hashable, Value: Sendable> {
    var entries: [Key: CacheEntry<Value>] = [:]
    var nextID: UInt64 = 0
}

struct CacheEntry<Value: Sendable> {
    /// Which fetch made this entry (a removed key may be fetched again while the old fetch runs).
    let id: UInt64
    /// The fetch every caller derives its future from; the cache only observes it.
    let shared: Future<Value>
    let lifetime: Duration?
    /// The value, once the fetch succeeded.
    var value: Value?
    /// Whether the value has expired; `nil`: never.
    var expired: (@Sendable () -> Bool)?

    var isExpired: Bool { expired?() ?? false }
}

extension Future {
    /// A consumer of this future that completes as it does: an `.immediate` identity `map`, whose
    /// step runs no user code and so captures no context (the callbacks registered on the result
    /// capture their own).
    func passingThrough() -> Future<Value> {
        let derived = MappedStorage<Value, Value>({ $0 })
        storage.register({ outcome in derived.receive(outcome) }, derived: derived, carryingContext: false)
        return Future(storage: derived)
    }
}
