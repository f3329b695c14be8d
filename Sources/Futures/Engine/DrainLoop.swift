/// The trampoline that keeps callback chains off the stack.
///
/// A completed future with callbacks is handed to ``schedule(_:_:)``. If this thread is not already
/// draining, it drains the future now and then everything that completes while doing so, in FIFO
/// order; if it is, the future joins the queue and runs after the current callback returns. A
/// million-step `.immediate` chain therefore runs in a loop at constant stack depth.
@usableFromInline
enum Drain {
    /// Runs `run(node)` through this thread's drain loop: queued (the entry retains `node`) if a
    /// loop already runs here, else at once as the loop, with `node` borrowed from the caller.
    @usableFromInline
    static func schedule(_ node: AnyObject, _ run: @escaping (AnyObject) -> Void) {
        // Borrowed: the thread-specific slot keeps the context alive until the thread exits (an
        // `unowned(unsafe)` local was still retained around the queue's append).
        ThreadContext.current._withUnsafeGuaranteedRef { context in
            if context.isDraining {
                context.drainQueue.append(DrainEntry(node: .passRetained(node), run: run))
            } else {
                context.runLoop { run(node) }
            }
        }
    }

    /// Whether a drain loop is running on this thread (then new work must queue behind it).
    @usableFromInline
    static var isRunningHere: Bool {
        guard let pointer = ThreadContext.existingPointer else { return false }
        return Unmanaged<ThreadContext>.fromOpaque(pointer)._withUnsafeGuaranteedRef { $0.isDraining }
    }

    /// Runs `body`, a callback registered on an idle completed future, as this thread's drain loop,
    /// inside the registering call: what it completes queues behind it and runs after it returns,
    /// and no callback uses the running job's affinity meanwhile. The caller checked
    /// ``isRunningHere`` is `false`.
    @usableFromInline
    static func runAsLoop(_ body: () -> Void) {
        unowned(unsafe) let context = ThreadContext.current.takeUnretainedValue()
        let saved = context.affinityOpen
        context.affinityOpen = false
        context.runLoop(body)
        context.affinityOpen = saved
    }

    /// Runs `job` with `executor` (and its affinity) recorded as the one running on this thread.
    /// The job's own code runs with affinity closed (see ``completingInJob(_:)``).
    @usableFromInline
    static func run(on executor: BuiltInExecutor, _ job: () -> Void) {
        run(builtIn: executor, custom: nil, job)
    }

    /// ``run(on:_:)-(BuiltInExecutor,_)`` for a custom executor, which has no affinity.
    @usableFromInline
    static func run(on executor: RecordingExecutor, _ job: () -> Void) {
        run(builtIn: nil, custom: executor, job)
    }

    /// Records one of the two as the running executor around `job`, and restores what was recorded.
    private static func run(builtIn: BuiltInExecutor?, custom: RecordingExecutor?, _ job: () -> Void) {
        unowned(unsafe) let context = ThreadContext.current.takeUnretainedValue()
        let saved = (context.currentBuiltIn, context.currentCustom, context.currentAffinity, context.affinityOpen)
        context.currentAffinity = builtIn?.jobAffinity
        context.currentBuiltIn = builtIn
        context.currentCustom = custom
        context.affinityOpen = false
        job()
        (context.currentBuiltIn, context.currentCustom, context.currentAffinity, context.affinityOpen) = saved
    }

    /// Runs `completion`, the library completing a derived future in a job after the transform
    /// (user code) returned, with affinity open: callbacks for the job's executor that this makes
    /// ready run in the job, in the drain loop it starts.
    @usableFromInline
    static func completingInJob(_ completion: () -> Void) {
        unowned(unsafe) let context = ThreadContext.current.takeUnretainedValue()
        // No affinity to open, or a loop runs already (an executor that ran the job in place).
        guard context.currentAffinity != nil, !context.isDraining else { return completion() }
        let saved = context.affinityOpen
        context.affinityOpen = true
        // The completion is the loop's first step: user code it reaches directly (final progress
        // handlers, producer cancellation handlers) only queues what it completes.
        context.runLoop(completion)
        context.affinityOpen = saved
    }

    /// Runs `body` with affinity closed: callbacks registered on a future that had already
    /// completed never use it (a callback registered earlier for the same executor may still be
    /// waiting in that executor's queue, and must run first).
    @usableFromInline
    static func closingAffinity(_ body: () -> Void) {
        unowned(unsafe) let context = ThreadContext.current.takeUnretainedValue()
        let saved = context.affinityOpen
        context.affinityOpen = false
        body()
        context.affinityOpen = saved
    }

    /// Whether a drain loop runs on this thread inside a job on `affinity`, started by the library
    /// completing a future after the job's user code returned: a callback for that executor may then
    /// run here, in the job.
    @usableFromInline
    static func isInJob(of affinity: Affinity) -> Bool {
        guard let pointer = ThreadContext.existingPointer else { return false }
        return Unmanaged<ThreadContext>.fromOpaque(pointer)._withUnsafeGuaranteedRef { context in
            context.isDraining && context.affinityOpen && context.currentAffinity == affinity
        }
    }
}

extension ThreadContext {
    /// Runs `first`, then every entry queued meanwhile (see ``Drain``).
    func runLoop(_ first: () -> Void) {
        isDraining = true
        first()
        runQueued()
    }

    /// Runs the queued entries, and those they queue, in FIFO order; then ends the loop.
    ///
    /// Each entry is moved out of the queue before it runs, so the queue never holds the last
    /// reference to anything: compacting or dropping it frees only its buffer, never a future whose
    /// release could run code that queues an entry while the queue is being changed.
    private func runQueued() {
        while drainHead < drainQueue.count {
            let next: DrainEntry
            if drainHead == drainQueue.count - 1 {
                // The last entry waiting (in a chain, the only one): pop it in O(1) and drop the
                // (empty) consumed slots before it.
                next = drainQueue.removeLast()!
                if drainHead > 0 { drainQueue.removeAll(keepingCapacity: true) }
                drainHead = 0
            } else {
                next = drainQueue[drainHead].take()!
                drainHead += 1
                if drainHead >= 4096, drainHead * 2 >= drainQueue.count {
                    drainQueue.removeFirst(drainHead)
                    drainHead = 0
                }
            }
            // The entry's reference is lent to the call and let go of after it: one release, where
            // a strong field took a retain for the call and released twice after.
            next.node._withUnsafeGuaranteedRef { next.run($0) }
            next.node.release()
        }
        if drainQueue.capacity > 4096 { drainQueue = [] }
        isDraining = false
    }
}
