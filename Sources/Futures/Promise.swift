/// The producer side of a future: completes it once.
///
/// Make a promise, hand out its ``future``, and complete it when the work finishes. Every completing
/// method returns `true` only for the call that won; later calls change nothing and return `false`.
///
/// ```swift
/// func loadPerson(from url: URL) -> Future<Person> {
///     let promise = Promise<Person>()
///     DispatchQueue.global().async {
///         do { promise.succeed(try Person(contentsOf: url)) }
///         catch { promise.fail(error) }
///     }
///     return promise.future
/// }
/// ```
///
/// If the last reference to a promise goes away while its future is pending, the future fails with
/// ``FutureError/brokenPromise(file:line:)`` naming the line where the promise was made: nothing
/// hangs, and completion handlers still run.
public final class Promise<Value: Sendable>: @unchecked Sendable {
    // Safety: `storage`, `file` and `line` never change. `settled` is written only by the one call
    // that won the right to complete the future (``FutureStorage/complete(_:from:)`` and
    // ``FutureStorage/adopt(_:from:)`` return `true` at most once for this promise's origin: after
    // either, the future is completed or its completer is someone else), and read only in
    // `deinit`. The winner holds a reference while it writes, and releasing that reference orders
    // the write before the deinit that follows the last release (the same rule that lets any
    // deinit read fields other threads wrote). Cancellation does not write it: a cancel and a
    // completion can both return `true` (cancelling an adopting future), and would race.
    @usableFromInline let storage: FutureStorage<Value>
    @usableFromInline let file: StaticString
    /// Whether a completing call of this promise won: the future is then completed or adopting,
    /// so `deinit` need not take the future's lock to find out whether the promise broke.
    /// (Declared here, it fills the padding after `file`.)
    @exclusivity(unchecked) @usableFromInline var settled = false
    /// The line, in 32 bits (a larger one is kept as `UInt32.max`): with `settled`, it fills the
    /// word after `file`, and the object is 48 bytes, not 56.
    @usableFromInline let storedLine: UInt32
    /// The line where the promise was made.
    @inlinable var line: UInt { UInt(storedLine) }

    /// Creates a promise with a pending future.
    ///
    /// - Parameters:
    ///   - file: recorded for ``FutureError/brokenPromise(file:line:)``; leave the default.
    ///   - line: recorded for ``FutureError/brokenPromise(file:line:)``; leave the default.
    @inlinable
    public init(file: StaticString = #fileID, line: UInt = #line) {
        // Tracked from a local before it is stored: no retain around the call.
        let storage = FutureStorage<Value>()
        if Tracking.isOn { storage.track(kind: "promise", file: file, line: line, overriding: false) }
        self.storage = storage
        self.file = file
        self.storedLine = UInt32(clamping: line)
    }

    /// A promise for an existing pending future (a deferred future, when its work starts).
    init(completing storage: FutureStorage<Value>, file: StaticString, line: UInt) {
        self.storage = storage
        self.file = file
        self.storedLine = UInt32(clamping: line)
    }

    deinit {
        #if DEBUG
        LockChecks.checkNotFreedUnderStripe("a promise")
        #endif
        // A deinit always runs unspecialised: keep the usual path (already completed) free of the
        // generic work of breaking, which would look up type metadata on entry.
        if !settled, storage.isPendingFor(storage) { breakPromise() }
    }

    @inline(never)
    private func breakPromise() {
        let error = FutureError.brokenPromise(file: String(describing: file), line: Int(line))
        storage.complete(.failure(error), from: storage)
        if Tracking.reporting { Tracking.report(brokenPromise: storage, error: error, file: file, line: line) }
    }

    /// Records that a completing call won (see `settled`); returns `won`.
    @inlinable
    func record(_ won: Bool) -> Bool {
        if won { settled = true }
        return won
    }

    /// The future this promise completes.
    @inlinable
    public var future: Future<Value> { Future(storage: storage) }

    /// Completes the future with a value.
    ///
    /// - Parameter value: the value.
    /// - Returns: `true` if this call completed the future.
    @discardableResult
    @inlinable
    public func succeed(_ value: Value) -> Bool {
        record(storage.complete(.success(value), from: storage))
    }

    /// Fails the future; an error that means cancellation (a `CancellationError`, or see
    /// ``CancellationIndicating``) cancels it instead.
    ///
    /// - Parameter error: the error.
    /// - Returns: `true` if this call completed the future.
    @discardableResult
    @inlinable
    public func fail(_ error: any Error) -> Bool {
        record(storage.complete(.failure(error), from: storage))
    }

    /// Completes the future with an outcome.
    ///
    /// - Parameter outcome: the outcome.
    /// - Returns: `true` if this call completed the future.
    @discardableResult
    @inlinable
    public func complete(_ outcome: Outcome<Value>) -> Bool {
        record(storage.complete(outcome, from: storage))
    }

    /// Completes the future with a `Result`.
    ///
    /// - Parameter result: the result; a failure that means cancellation cancels the future.
    /// - Returns: `true` if this call completed the future.
    @discardableResult
    @inlinable
    public func complete<Failure: Error>(with result: Result<Value, Failure>) -> Bool {
        record(storage.complete(Outcome(result), from: storage))
    }

    /// Completes the future with whatever `other` completes with (collapsing: no nested futures).
    ///
    /// If `other` is this promise's own future, or waits for it through futures derived from it
    /// (`map`, `recover`, `flatMap`, ...) or adopting each other, every future of the cycle fails
    /// with ``FutureError/cycle`` as it closes. A cycle through a join is not detected.
    ///
    /// If the future was cancelled before it completed, the call is refused, and counts as a
    /// consumer of `other` that withdrew at once: `other` is cancelled unless something else
    /// consumes it. Every such call does so, not only the first.
    ///
    /// - Parameter other: the future to adopt.
    /// - Returns: `true` if this call decided the future's outcome.
    @discardableResult
    @inlinable
    public func complete(with other: Future<Value>) -> Bool {
        record(storage.adopt(other.storage, from: storage))
    }

    /// Completes the future from a `(value, error)` completion handler: the error if there is one,
    /// else the value, else ``FutureError/invalidCallback``.
    ///
    /// ```swift
    /// legacyLoad { data, error in promise.complete(value: data, error: error) }
    /// ```
    ///
    /// - Parameters:
    ///   - value: the handler's value.
    ///   - error: the handler's error.
    /// - Returns: `true` if this call completed the future.
    @discardableResult
    @inlinable
    public func complete(value: Value?, error: (any Error)?) -> Bool {
        if let error { return fail(error) }
        if let value { return succeed(value) }
        return fail(FutureError.invalidCallback)
    }

    /// Cancels the future (the producer gives up).
    ///
    /// - Returns: `true` if this call cancelled the future.
    @discardableResult
    @inlinable
    public func cancel() -> Bool {
        storage.cancel()
    }

    /// Whether the future was cancelled: check it now and then in long work, and stop early.
    @inlinable
    public var isCancelled: Bool {
        storage.outcome?.isCancelled ?? false
    }

    /// Runs `handler` when the future is cancelled: now, inline, if it already is; never if it
    /// completes otherwise (the handler is then released).
    ///
    /// ```swift
    /// let task = session.dataTask(with: url) { ... }
    /// promise.onCancel { task.cancel() }
    /// ```
    ///
    /// The handler runs on the thread that cancels the future, before the future's callbacks.
    ///
    /// - Parameter handler: the work to do on cancellation.
    @inlinable
    public func onCancel(_ handler: @escaping @Sendable () -> Void) {
        storage.onCancel(FutureContext.carrying(handler))
    }
}

extension Promise where Value == Void {
    /// Completes a `Promise<Void>`'s future: `succeed(())`, without the empty tuple.
    ///
    /// - Returns: `true` if this call completed the future.
    @discardableResult
    @inlinable
    public func succeed() -> Bool {
        succeed(())
    }
}
