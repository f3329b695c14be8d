extension Future {
    /// Runs `operation` in a new `Task` and completes with what it returns or throws.
    ///
    /// ```swift
    /// let profile = Future { try await api.fetchProfile(id) }
    /// ```
    ///
    /// Cancelling the future cancels the task; a task that ends by throwing `CancellationError` (or
    /// an error that means cancellation, see ``CancellationIndicating``) leaves the future cancelled.
    ///
    /// - Parameters:
    ///   - priority: the task's priority.
    ///   - file: recorded for ``FutureError/brokenPromise(file:line:)``; leave the default.
    ///   - line: recorded for ``FutureError/brokenPromise(file:line:)``; leave the default.
    ///   - operation: the asynchronous work.
    public init(
        priority: TaskPriority? = nil,
        file: StaticString = #fileID,
        line: UInt = #line,
        _ operation: @escaping @Sendable () async throws -> Value
    ) {
        let promise = Promise<Value>(file: file, line: line)
        let task = Task(priority: priority) {
            do {
                promise.succeed(try await operation())
            } catch {
                promise.fail(error)
            }
        }
        promise.storage.onCancel { task.cancel() }  // no user code: no context to carry
        self = promise.future.made("task", file, line)
    }

    /// Runs synchronous `work` in a new `Task`, as the asynchronous form does, so that
    /// `Future { 42 }` and `Future { try work() }` read like `Future { try await work() }`.
    ///
    /// ```swift
    /// let answer = Future { 42 }
    /// ```
    ///
    /// The task runs on Swift's cooperative thread pool, which has a thread per core: give work
    /// that blocks (reading files, waiting on locks) an executor instead, `Future(on: .global()) {
    /// ... }`.
    ///
    /// - Parameters:
    ///   - priority: the task's priority.
    ///   - file: recorded for ``FutureError/brokenPromise(file:line:)``; leave the default.
    ///   - line: recorded for ``FutureError/brokenPromise(file:line:)``; leave the default.
    ///   - work: the work; throwing `CancellationError` (or see ``CancellationIndicating``) cancels
    ///     the future.
    public init(
        priority: TaskPriority? = nil,
        file: StaticString = #fileID,
        line: UInt = #line,
        _ work: @escaping @Sendable () throws -> Value
    ) {
        // Without this overload a synchronous closure matches `init(value:)` (a trailing closure
        // may fill a labelled parameter), with the closure as the value.
        self.init(priority: priority, file: file, line: line) { () async throws -> Value in try work() }
    }

    /// Waits for the outcome without throwing, like `Task.result`.
    ///
    /// The waiting task is a consumer of the future. If the task is cancelled, it stops waiting,
    /// gets ``Outcome/cancelled`` and withdraws; a future left with no consumer is cancelled. A task
    /// that is already cancelled when it starts waiting on a pending future gets ``Outcome/cancelled``
    /// at once and counts as a consumer that withdrew.
    ///
    /// Awaiting keeps the caller's isolation: awaited from an actor (the main actor included), the
    /// task does not leave the actor's executor to wait, and resumes on it.
    @inlinable
    public nonisolated(nonsending) var result: Outcome<Value> {
        get async {
            // A completed future: no suspension, and specialised where the value type is known.
            if let outcome = storage.observedOutcome { return outcome }
            return await storage.waitForOutcome()
        }
    }

    /// Waits for the value, like `Task.value`: throws the error on failure, and `CancellationError`
    /// if the future is cancelled or the waiting task is (which withdraws it as a consumer).
    ///
    /// ```swift
    /// let picture = try await loadPerson().flatMap { $0.loadPicture() }.value
    /// ```
    ///
    /// Awaiting keeps the caller's isolation, as ``result`` does.
    @inlinable
    public nonisolated(nonsending) var value: Value {
        get async throws { try await result.get() }
    }
}

extension FutureStorage {
    /// Waits for the outcome of this future as a consumer (see ``Future/result``), in the caller's
    /// isolation.
    @usableFromInline
    nonisolated(nonsending) final func waitForOutcome() async -> Outcome<Value> {
        if let outcome = observedOutcome { return outcome }
        if Task.isCancelled {
            Cancellation.withdraw(from: self, .uncounted, key: nil)
            return .cancelled
        }
        let waiter = Waiter<Value>()
        return await withTaskCancellationHandler {
            await withUnsafeContinuation { continuation in
                guard waiter.install(continuation) else {
                    Cancellation.withdraw(from: self, .uncounted, key: nil)  // cancelled before it waited
                    return
                }
                register({ outcome in waiter.resume(with: outcome) }, asConsumer: true, owner: waiter, carryingContext: false)
                if waiter.markRegistered() {
                    Cancellation.withdraw(from: self, key: RegistrationKey(waiter))  // cancelled while registering
                }
            }
        } onCancel: {
            if waiter.cancel() { Cancellation.withdraw(from: self, key: RegistrationKey(waiter)) }
        }
    }
}

/// One task waiting for a future: resumed exactly once, by the future or by task cancellation, and
/// withdrawn as a consumer exactly once if the task is cancelled after it registered.
@usableFromInline
final class Waiter<Value: Sendable>: @unchecked Sendable {
    // Safety: every field is only touched under `LockTable.withLock(self)`; the continuation is
    // resumed after the lock is released, exactly once, because it is taken out under the lock.
    private var continuation: UnsafeContinuation<Outcome<Value>, Never>?
    private var early: Outcome<Value>?
    private var resumed = false
    private var registered = false
    private var cancelled = false

    @usableFromInline init() {}

    /// Stores the continuation, or resumes it at once if the outcome (or cancellation) came first.
    ///
    /// - Returns: whether the waiter still needs to register for the future's outcome.
    func install(_ continuation: UnsafeContinuation<Outcome<Value>, Never>) -> Bool {
        let ready: Outcome<Value>? = LockTable.withLock(self) {
            if let early { return early }
            self.continuation = continuation
            return nil
        }
        guard let ready else { return true }
        continuation.resume(returning: ready)
        return false
    }

    /// Records that the waiter was counted as a consumer.
    ///
    /// - Returns: `true` if the task was cancelled meanwhile, so the caller must withdraw it.
    func markRegistered() -> Bool {
        LockTable.withLock(self) {
            registered = true
            return cancelled
        }
    }

    /// The waiting task was cancelled: resume it with `.cancelled`.
    ///
    /// - Returns: `true` if the waiter was already counted as a consumer, so the caller must withdraw it.
    func cancel() -> Bool {
        let (continuation, withdraw): (UnsafeContinuation<Outcome<Value>, Never>?, Bool) = LockTable.withLock(self) {
            cancelled = true
            return (take(.cancelled), registered)
        }
        continuation?.resume(returning: .cancelled)
        return withdraw
    }

    /// Resumes the waiting task with `outcome` unless it was already resumed.
    func resume(with outcome: Outcome<Value>) {
        let continuation = LockTable.withLock(self) { take(outcome) }
        continuation?.resume(returning: outcome)
    }

    /// Takes the continuation to resume (caller holds the lock), or stashes `outcome` for `install`.
    private func take(_ outcome: Outcome<Value>) -> UnsafeContinuation<Outcome<Value>, Never>? {
        guard !resumed else { return nil }
        resumed = true
        guard let continuation else {
            early = outcome
            return nil
        }
        self.continuation = nil
        return continuation
    }
}
