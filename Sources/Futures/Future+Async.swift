extension Future {
    /// Runs `operation` in a new `Task` and completes with what it returns or throws.
    ///
    /// ```swift
    /// let profile = Future { try await api.fetchProfile(id) }
    /// ```
    ///
    /// Cancelling the future cancels the task; a task that ends by throwing `CancellationError`
    /// leaves the future cancelled.
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
        promise.onCancel { task.cancel() }
        self = promise.future
    }

    /// Waits for the outcome without throwing, like `Task.result`.
    ///
    /// If the waiting task is cancelled, it stops waiting and gets ``Outcome/cancelled``.
    public var result: Outcome<Value> {
        get async {
            if let outcome = storage.outcome { return outcome }
            let waiter = Waiter<Value>()
            return await withTaskCancellationHandler {
                await withUnsafeContinuation { continuation in
                    if waiter.install(continuation) {
                        storage.register({ outcome in waiter.resume(with: outcome) }, asConsumer: true)
                    }
                }
            } onCancel: {
                waiter.resume(with: .cancelled)
            }
        }
    }

    /// Waits for the value, like `Task.value`: throws the error on failure, and `CancellationError`
    /// if the future is cancelled or the waiting task is.
    ///
    /// ```swift
    /// let picture = try await loadPerson().flatMap { $0.loadPicture() }.value
    /// ```
    public var value: Value {
        get async throws { try await result.get() }
    }
}

/// One task waiting for a future: resumed exactly once, by the future or by task cancellation.
@usableFromInline
final class Waiter<Value: Sendable>: @unchecked Sendable {
    // Safety: `state` is only touched under `LockTable.withLock(self)`; the continuation is resumed
    // after the lock is released, exactly once, because it is taken out of `state` under the lock.
    enum State {
        case idle
        case waiting(UnsafeContinuation<Outcome<Value>, Never>)
        case resolved(Outcome<Value>)
        case done
    }

    private var state = State.idle

    @usableFromInline init() {}

    /// Stores the continuation, or resumes it at once if the outcome arrived first.
    ///
    /// - Returns: whether the waiter still needs the future's outcome.
    func install(_ continuation: UnsafeContinuation<Outcome<Value>, Never>) -> Bool {
        let early: Outcome<Value>? = LockTable.withLock(self) {
            if case .resolved(let outcome) = state {
                state = .done
                return outcome
            }
            state = .waiting(continuation)
            return nil
        }
        guard let early else { return true }
        continuation.resume(returning: early)
        return false
    }

    /// Resumes the waiting task with `outcome` unless it was already resumed.
    func resume(with outcome: Outcome<Value>) {
        let continuation: UnsafeContinuation<Outcome<Value>, Never>? = LockTable.withLock(self) {
            switch state {
            case .idle:
                state = .resolved(outcome)
                return nil
            case .waiting(let continuation):
                state = .done
                return continuation
            case .resolved, .done:
                return nil
            }
        }
        continuation?.resume(returning: outcome)
    }
}
