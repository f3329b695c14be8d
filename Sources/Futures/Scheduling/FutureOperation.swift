import Foundation

/// An `Operation` whose work is a future (FutureKit's `NSOperation` integration): it counts as
/// running in its `OperationQueue` from when the queue starts it until its ``future`` completes,
/// so `maxConcurrentOperationCount` limits asynchronous work, and dependencies wait for it.
///
/// ```swift
/// let queue = OperationQueue()
/// queue.maxConcurrentOperationCount = 2
/// let thumbnail = FutureOperation { makeThumbnail(of: picture) }
/// let upload = BlockOperation { print("thumbnail ready") }
/// upload.addDependency(thumbnail)
/// queue.addOperations([thumbnail, upload], waitUntilFinished: false)
/// thumbnail.future.whenSuccess { print("made", $0) }
/// ```
///
/// - Cancelling the operation cancels ``future`` (and so the work, as its consumer); cancelling
///   ``future`` cancels the operation. Cancelled before it starts, the work never runs. On Linux,
///   `cancelAllOperations()` cancels a queue's operations one by one, and may start queued work
///   meanwhile; to stop everything at once, have the work follow a ``CancellationSource`` (see the
///   article "Futures on Operation Queues").
/// - The operation finishes as soon as ``future`` completes, whatever the outcome.
/// - A `FutureOperation` runs once; like any `Operation`, it cannot be added to a queue twice.
public final class FutureOperation<Value: Sendable>: Operation, @unchecked Sendable {
    // Safety: the stored properties are `let`s of Sendable types; the mutable run state lives in
    // `state`, behind its lock. `Operation` itself is thread-safe for the overridden accessors.

    /// The outcome of the operation's work.
    public var future: Future<Value> { promise.future }

    private let promise: Promise<Value>
    private let work: @Sendable () throws -> Future<Value>
    /// The context where the operation is made (see ``FutureContext``), captured once: its work
    /// runs with it, and so do the key-value notifications of its finishing, which run the queue's
    /// and any other observer's code on whatever thread completes ``future``.
    private let context: CapturedContext?
    private let state = Guarded(RunState.waiting)
    /// Set by the first `start()`: the work runs at most once, even if `start()` is called again.
    private let started = Guarded(false)

    private enum RunState { case waiting, executing, finished }

    /// Creates an operation that starts `work` when its queue starts it.
    ///
    /// `work` runs with the context current here, where the operation is made (see
    /// ``FutureContext``), not with that of the queue's thread.
    ///
    /// - Parameters:
    ///   - file: recorded for ``FutureError/brokenPromise(file:line:)``; leave the default.
    ///   - line: recorded for ``FutureError/brokenPromise(file:line:)``; leave the default.
    ///   - work: starts the work and returns its future; runs on the queue's thread. An error it
    ///     throws fails the operation's future.
    public init(
        file: StaticString = #fileID,
        line: UInt = #line,
        _ work: @escaping @Sendable () throws -> Future<Value>
    ) {
        promise = Promise(file: file, line: line)
        _ = promise.future.made("operation", file, line)
        self.work = work
        context = FutureContext.capture()
        super.init()
        // Cancelling tells key-value observers too: with the context where the operation is made,
        // restored here, so the handler captures none of its own.
        promise.storage.onCancel { [weak self] in self?.withContext { self?.cancel() } }
    }

    public override var isAsynchronous: Bool { true }
    public override var isExecuting: Bool { state.withLock { $0 == .executing } }
    public override var isFinished: Bool { state.withLock { $0 == .finished } }

    public override func start() {
        guard started.withLock({ started in defer { started = true }; return !started }) else { return }
        guard !isCancelled else {
            promise.cancel()
            withContext { move(to: .finished) }
            return
        }
        move(to: .executing)
        // Restores the context itself: the registration captures none.
        promise.future.storage.register(
            { [weak self] _ in self?.withContext { self?.move(to: .finished) } }, asConsumer: false, carryingContext: false, observes: false)
        // Cancelled since the check above (from another thread): finish without running the work.
        guard !promise.isCancelled else { return }
        do { promise.complete(with: try withContext(work)) } catch { promise.fail(error) }
    }

    /// Runs `body` with the context where the operation was made.
    private func withContext<R>(_ body: () throws -> R) rethrows -> R {
        guard let context else { return try body() }
        return try context.restore(body)
    }

    public override func cancel() {
        super.cancel()
        promise.cancel()
    }

    /// Moves forward to `next`, telling key-value observers (the queue). Moves are sequential:
    /// `start` moves to executing before it registers the move to finished.
    private func move(to next: RunState) {
        let current = state.withLock { $0 }
        guard current != next, current != .finished else { return }
        let keys = current == .executing ? ["isExecuting", "isFinished"] : next == .executing ? ["isExecuting"] : ["isFinished"]
        for key in keys { willChangeValue(forKey: key) }
        state.withLock { $0 = next }
        for key in keys.reversed() { didChangeValue(forKey: key) }
    }
}

extension OperationQueue {
    /// Adds an operation whose work is a future; it occupies one of the queue's slots until that
    /// future completes (see ``FutureOperation``).
    ///
    /// ```swift
    /// let uploads = OperationQueue()
    /// uploads.maxConcurrentOperationCount = 1
    /// let sent = uploads.addFuture { upload(picture) }
    /// ```
    ///
    /// `work` runs with the context current where this is called (see ``FutureContext``).
    ///
    /// - Parameters:
    ///   - file: recorded for ``FutureError/brokenPromise(file:line:)``; leave the default.
    ///   - line: recorded for ``FutureError/brokenPromise(file:line:)``; leave the default.
    ///   - work: starts the work and returns its future; runs on the queue's thread. An error it
    ///     throws fails the returned future.
    /// - Returns: the work's future; cancelling it cancels the operation.
    @discardableResult
    public func addFuture<Value>(
        file: StaticString = #fileID,
        line: UInt = #line,
        _ work: @escaping @Sendable () throws -> Future<Value>
    ) -> Future<Value> {
        let operation = FutureOperation(file: file, line: line, work)
        addOperation(operation)
        return operation.future
    }
}
