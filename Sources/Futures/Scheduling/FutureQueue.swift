/// Runs asynchronous operations in the order they were added, at most `maxConcurrent` at a time
/// (FutureKit's `FutureFIFO`, with its queued-cancellation problem fixed).
///
/// ```swift
/// let uploads = FutureQueue(maxConcurrent: 2)
/// let first = uploads.add { upload(picture1) }
/// let second = uploads.add { upload(picture2) }
/// let third = uploads.add { upload(picture3) }   // starts when one of the first two finishes
/// third.cancel()                                  // removed from the queue; the others are untouched
/// ```
///
/// Thread-safe: operations may be added from any thread. Not re-entrant: an operation that adds
/// to its own queue and waits for what it added can deadlock the queue (with `maxConcurrent: 1`
/// it always does).
public final class FutureQueue: Sendable {
    private let state: Guarded<QueueState>

    /// Creates a queue.
    ///
    /// - Parameter maxConcurrent: the most operations running at once (at least 1).
    public init(maxConcurrent: Int = 1) {
        precondition(maxConcurrent >= 1, "a FutureQueue needs maxConcurrent of at least 1")
        state = Guarded(QueueState(limit: maxConcurrent))
    }

    /// Adds an operation; it starts now if fewer than `maxConcurrent` are running, else after the
    /// operations added before it have started and one has finished.
    ///
    /// Cancelling the returned future before the operation starts removes it from the queue;
    /// after it starts, cancels the operation (as its consumer).
    ///
    /// - Parameters:
    ///   - file: the file of the call, for diagnostics; leave the default.
    ///   - line: the line of the call, for diagnostics; leave the default.
    ///   - operation: starts the work and returns its future; an error it throws fails the
    ///     returned future.
    /// - Returns: the operation's future.
    public func add<Value>(
        file: StaticString = #fileID,
        line: UInt = #line,
        _ operation: @escaping @Sendable () throws -> Future<Value>
    ) -> Future<Value> {
        adding(file: file, line: line, operation)
    }

    /// The form above without the call site, kept so that code naming it still compiles; a
    /// call chooses the form above.
    @_disfavoredOverload
    public func add<Value>(_ operation: @escaping @Sendable () throws -> Future<Value>) -> Future<Value> {
        adding(file: #fileID, line: #line, operation)
    }

    private func adding<Value>(
        file: StaticString,
        line: UInt,
        _ operation: @escaping @Sendable () throws -> Future<Value>
    ) -> Future<Value> {
        let promise = Promise<Value>(file: file, line: line)
        // With the context of this call, not that of the operation whose end starts it.
        let start: @Sendable () -> Void = FutureContext.carrying { [self] in
            let started: Future<Value>
            do { started = try operation() } catch { started = Future(error: error) }
            // Runs no user code of its own: the next operation starts with the context of its `add`.
            started.storage.register({ _ in self.finished() }, asConsumer: false, carryingContext: false)
            promise.complete(with: started)
        }
        let (id, runNow): (Int, Bool) = state.withLock { queue in
            let id = queue.nextID
            queue.nextID += 1
            if queue.running < queue.limit {
                queue.running += 1
                return (id, true)
            }
            queue.waiting[id] = start
            queue.order.append(id)
            return (id, false)
        }
        if runNow {
            start()
        } else {
            promise.storage.onCancel { [state] in  // runs no user code: carries no context
                let removed = state.withLock { $0.waiting.removeValue(forKey: id) }
                releaseOutsideLock(removed)
            }
        }
        return promise.future.made("queue", file, line)
    }

    /// How many operations are waiting to start.
    public var waitingCount: Int { state.withLock { $0.waiting.count } }

    /// How many operations are running.
    public var runningCount: Int { state.withLock { $0.running } }

    /// An operation finished: start the next one still waiting, if any.
    private func finished() {
        let next: (@Sendable () -> Void)? = state.withLock { queue in
            while queue.head < queue.order.count {
                let id = queue.order[queue.head]
                queue.head += 1
                if queue.head == queue.order.count {
                    queue.order.removeAll(keepingCapacity: true)
                    queue.head = 0
                }
                if let start = queue.waiting.removeValue(forKey: id) { return start }
            }
            queue.running -= 1
            return nil
        }
        next?()
        releaseOutsideLock(next)
    }
}

/// The queue's state: the running count and the waiting operations, in order.
struct QueueState {
    let limit: Int
    var running = 0
    var nextID = 0
    /// Waiting operations by id; cancelled ones are removed from here at once.
    var waiting: [Int: @Sendable () -> Void] = [:]
    /// Ids in the order they were added (cancelled ids are skipped when reached).
    var order: [Int] = []
    var head = 0

    init(limit: Int) { self.limit = limit }
}
