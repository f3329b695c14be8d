extension Promise {
    /// The progress of the work, from 0 to 1, for the future's observers.
    ///
    /// Values are clamped to 0...1; NaN is ignored, and so is anything set after the future has
    /// completed (or after the promise adopted another future). The producer may lower it. Success
    /// reports 1.0; failure and cancellation add nothing.
    ///
    /// ```swift
    /// promise.progress = 0.3
    /// ...
    /// promise.progress = 0.6
    /// ```
    public var progress: Double {
        get { storage.currentProgress }
        set { storage.setProgress(newValue, from: storage) }
    }
}

extension Future {
    /// The progress of the work, from 0 to 1: 1 after success, the last value reported otherwise.
    ///
    /// For a derived future, the progress of what it follows (unchanged through `map`, `recover`,
    /// `always`, `observe()`, ...; weighted through `flatMap(progressWeight:)`).
    public var progress: Double { storage.currentProgress }

    /// Runs `body` with the progress each time it changes.
    ///
    /// Any number of handlers may be registered; they are called in registration order, each on its
    /// executor. A slow handler gets the latest value, not a backlog, and equal consecutive values
    /// are not sent again. A handler is not a consumer: it does not keep the future from being
    /// cancelled. Success reports 1.0; the handler is released when the future completes.
    ///
    /// ```swift
    /// upload.whenProgress(on: .main) { fraction in progressBar.value = fraction }
    /// ```
    ///
    /// - Parameters:
    ///   - executor: where `body` runs.
    ///   - body: receives progress values in 0...1.
    public func whenProgress(on executor: some Executor = .current, _ body: @escaping @Sendable (Double) -> Void) {
        storage.observeProgress(.delivery(ProgressDelivery(hop: Hop(executor), body: body)))
    }

    /// ``whenProgress(on:_:)`` with a `@MainActor` handler, run on the main queue.
    ///
    /// - Parameters:
    ///   - executor: `.main` or `.mainImmediate`.
    ///   - body: main-actor work that receives progress values.
    public func whenProgress(on executor: some MainActorExecutor, _ body: @escaping @MainActor @Sendable (Double) -> Void) {
        let isolated = onMainActor(body)
        storage.observeProgress(.delivery(ProgressDelivery(hop: Hop(executor), body: { value in try? isolated(value) })))
    }

    /// ``flatMap(on:file:line:_:)-(Executor,_,_,_)`` whose progress combines both steps: `progressWeight * upstream +
    /// (1 - progressWeight) * inner`, where the inner part is the progress of the future the closure
    /// returned (including what it had before it was adopted). It never goes backwards.
    ///
    /// OAPromise's example: loading a person takes 30% of the time, the picture 70%.
    ///
    /// ```swift
    /// let picture = loadPerson().flatMap(progressWeight: 0.3) { person in person.loadPicture() }
    /// picture.whenProgress { print("\(Int($0 * 100))%") }
    /// ```
    ///
    /// - Parameters:
    ///   - progressWeight: the upstream's share of the progress, in 0...1.
    ///   - executor: where `transform` runs.
    ///   - transform: runs once with the value and returns the next future.
    /// - Returns: a future of the next step's value.
    public func flatMap<NewValue>(
        progressWeight: Double,
        on executor: some Executor = .current,
        _ transform: @escaping @Sendable (Value) throws -> Future<NewValue>
    ) -> Future<NewValue> {
        precondition((0...1).contains(progressWeight), "progressWeight must be in 0...1")
        return flatMap(hop: Hop(executor), progressWeight: progressWeight, transform)
    }

    /// The progress as an `AsyncSequence` that ends when the future completes, with the final value
    /// (1.0 after success). A slow consumer gets the latest value, not a backlog.
    ///
    /// A sequence whose consumer stops early leaves the future at once, and nothing of it stays
    /// there: when the consumer's task is cancelled, or when nothing can iterate the sequence any
    /// more (its iterator and the sequence itself are released, as when a `for await` loop over
    /// `future.progressUpdates` breaks out).
    ///
    /// ```swift
    /// for await fraction in download.progressUpdates { print(fraction) }
    /// ```
    public var progressUpdates: AsyncStream<Double> {
        let (stream, continuation) = AsyncStream<Double>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let feed = ProgressFeed(continuation)
        let storage = self.storage
        // The sequence's end takes the feed's listener and callback off. Set before they are added:
        // a future that is already complete finishes the sequence while its callback is added.
        // Only a consumer that left has anything to take off (`.finished` comes from the future's
        // completion, which releases both). The handler holds the feed until it runs, and the
        // sequence always ends, however its consumer goes.
        continuation.onTermination = { termination in
            guard case .cancelled = termination else { return }
            storage.removeProgressFollower(ObjectIdentifier(feed))
            storage.removeRegistration(RegistrationKey(feed))
        }
        storage.observeProgress(follower: ObjectIdentifier(feed)) { value, version in feed.yield(value, version: version) }
        // Ends the sequence, whose consumer's task has its own context: no user code runs here.
        storage.register(
            { outcome in feed.finish(final: outcome.isSuccess ? 1 : nil) }, asConsumer: false, owner: feed, carryingContext: false,
            observes: false)
        return stream
    }
}

/// Delivers progress to one handler on its executor: at most one delivery job at a time, always the
/// latest value, never the same value twice in a row.
@usableFromInline
final class ProgressDelivery: @unchecked Sendable {
    // Safety: `latest`, `latestVersion`, `lastSent` and `scheduled` are only touched under
    // `LockTable.withLock(self)`; the handler runs outside the lock, and only from the single
    // scheduled job.
    private let hop: Hop
    private let body: @Sendable (Double) -> Void
    @exclusivity(unchecked) private var latest: Double?
    @exclusivity(unchecked) private var latestVersion: UInt64 = 0
    @exclusivity(unchecked) private var lastSent = -1.0
    @exclusivity(unchecked) private var scheduled = false

    init(hop: Hop, body: @escaping @Sendable (Double) -> Void) {
        self.hop = hop
        self.body = FutureContext.carrying(body)  // the context where the handler is registered
    }

    /// Offers a value; one older than what this handler already has (it overtook) is dropped.
    func offer(_ value: Double, version: UInt64) {
        let inline = if case .inline = hop { true } else { false }
        // Inline, the delivery starts here with the value taken under the same lock.
        let start: Double?? = LockTable.withLock(self) {
            guard version > latestVersion || (version == 0 && latestVersion == 0) else { return nil }
            latestVersion = version
            latest = value
            guard !scheduled else { return nil }
            scheduled = true
            return inline ? .some(takeLatest()) : .some(nil)
        }
        guard let start else { return }
        if inline {
            deliver(first: start)
        } else {
            hop.handOff { self.deliver(first: nil) }  // `body` restores its own context
        }
    }

    /// Runs the handler with `first`, if any, then with each value offered meanwhile, until there is
    /// none; then lets the next offer start a delivery.
    private func deliver(first: Double?) {
        var next = first
        while true {
            if let value = next, !value.isNaN { body(value) }
            next = LockTable.withLock(self) {
                guard latest != nil else {
                    scheduled = false
                    return nil
                }
                return takeLatest()
            }
            guard next != nil else { return }
        }
    }

    /// The value to send now (caller holds the lock): the latest offered, or NaN when it is the
    /// one sent last.
    private func takeLatest() -> Double {
        guard let value = latest else { return .nan }
        latest = nil
        if value == lastSent { return .nan }
        lastSent = value
        return value
    }
}

/// Feeds `progressUpdates`: yields newer values only, and after the final value nothing more.
final class ProgressFeed: @unchecked Sendable {
    // Safety: `finished`, `lastVersion` and `last` are only touched while holding `lock`. The
    // continuation is yielded to and finished under that lock, so values arrive in version order;
    // resuming the consumer may enqueue it on its executor (code the library does not control), so
    // the lock is the feed's own, never a stripe lock that a future might need.
    private let lock = Lock()
    private let continuation: AsyncStream<Double>.Continuation
    private var finished = false
    private var lastVersion: UInt64 = 0
    private var last: Double?

    init(_ continuation: AsyncStream<Double>.Continuation) { self.continuation = continuation }

    func yield(_ value: Double, version: UInt64) {
        lock.withLock {
            guard !finished, version >= lastVersion, value != last else { return }
            lastVersion = version
            last = value
            continuation.yield(value)
        }
    }

    func finish(final: Double?) {
        lock.withLock {
            guard !finished else { return }
            finished = true
            if let final, final != last { continuation.yield(final) }
            continuation.finish()
        }
    }
}
