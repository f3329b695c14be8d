#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Android)
import Android
#endif

/// A completed future whose callbacks wait to be run by a drain loop, with the function that runs
/// them. The function is specialised where the future's type is known (a protocol witness or a
/// class method would run the unspecialised generic code, which looks type metadata up each call).
@usableFromInline
struct DrainEntry {
    @usableFromInline let node: AnyObject
    @usableFromInline let run: (AnyObject) -> Void

    @inlinable
    init(node: AnyObject, run: @escaping (AnyObject) -> Void) {
        self.node = node
        self.run = run
    }
}

/// State private to one thread: the drain trampoline, the deferred-release stack and the executor
/// whose job is running. Never shared between threads, so it needs no lock.
@usableFromInline
final class ThreadContext {
    // Every field is confined to the context's own thread, and the trampolines never hold an
    // access across a call that could re-enter them, so the runtime exclusivity check is redundant.

    /// True while a drain loop runs on this thread; nested completions queue up instead of recursing.
    @exclusivity(unchecked) var isDraining = false
    @exclusivity(unchecked) var drainQueue: [DrainEntry] = []
    @exclusivity(unchecked) var drainHead = 0

    /// True while a deferred-release loop runs on this thread; nested deinits queue instead of recursing.
    @exclusivity(unchecked) var isReleasing = false
    @exclusivity(unchecked) var releaseQueue: [Any] = []

    /// True while cancellation-token handlers run on this thread; handlers of tokens they cancel (or
    /// make immortal) in turn queue up instead of recursing.
    @exclusivity(unchecked) var isRunningTokenWork = false
    @exclusivity(unchecked) var tokenWork: [(() -> Void)?] = []
    @exclusivity(unchecked) var tokenWorkHead = 0

    /// The executor whose job is running on this thread, for ``CurrentExecutor``, and what it runs
    /// on (see ``Affinity``).
    @exclusivity(unchecked) var currentExecutor: (any Executor)?
    @exclusivity(unchecked) var currentAffinity: Affinity?
    /// True while the library completes a future in a job, right after the user code of that job
    /// returned (``Drain/completingInJob(_:)``), and in the drain loop that completion starts: only
    /// then may a callback for the job's executor run in the job. Never while user code of the job
    /// is on the stack (it may hold a lock, or be inside `sync` on another queue).
    @exclusivity(unchecked) var affinityOpen = false

    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        #if canImport(Darwin)
        let error = pthread_key_create(&key) { pointer in
            Unmanaged<ThreadContext>.fromOpaque(pointer).release()
        }
        #else
        let error = pthread_key_create(&key) { pointer in
            if let pointer { Unmanaged<ThreadContext>.fromOpaque(pointer).release() }
        }
        #endif
        precondition(error == 0, "pthread_key_create failed: \(error)")
        return key
    }()

    /// This thread's context, created on first use and released when the thread exits.
    static var current: Unmanaged<ThreadContext> {
        if let pointer = pthread_getspecific(key) { return Unmanaged.fromOpaque(pointer) }
        let context = Unmanaged.passRetained(ThreadContext())
        pthread_setspecific(key, context.toOpaque())
        return context
    }

    /// This thread's context if it has one (does not create it).
    static var existing: ThreadContext? {
        existingPointer.map { Unmanaged<ThreadContext>.fromOpaque($0).takeUnretainedValue() }
    }

    /// The address of this thread's context, if it has one.
    static var existingPointer: UnsafeMutableRawPointer? { pthread_getspecific(key) }
}

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
        // Unretained: the thread-specific slot keeps the context alive until the thread exits.
        unowned(unsafe) let context = ThreadContext.current.takeUnretainedValue()
        if context.isDraining {
            context.drainQueue.append(DrainEntry(node: node, run: run))
        } else {
            context.runLoop { run(node) }
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
    static func run(on executor: any Executor, affinity: Affinity?, _ job: () -> Void) {
        unowned(unsafe) let context = ThreadContext.current.takeUnretainedValue()
        let saved = (context.currentExecutor, context.currentAffinity, context.affinityOpen)
        context.currentExecutor = executor
        context.currentAffinity = affinity
        context.affinityOpen = false
        job()
        (context.currentExecutor, context.currentAffinity, context.affinityOpen) = saved
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
    private func runQueued() {
        while drainHead < drainQueue.count {
            let next: DrainEntry
            if drainHead == drainQueue.count - 1 {
                // The last entry waiting (in a chain, the only one): pop it in O(1) and drop the
                // consumed entries before it.
                next = drainQueue.removeLast()
                if drainHead > 0 { drainQueue.removeAll(keepingCapacity: true) }
                drainHead = 0
            } else {
                next = drainQueue[drainHead]
                drainHead += 1
                if drainHead >= 4096, drainHead * 2 >= drainQueue.count {
                    drainQueue.removeFirst(drainHead)
                    drainHead = 0
                }
            }
            next.run(next.node)
        }
        if drainQueue.capacity > 4096 { drainQueue = [] }
        isDraining = false
    }
}

/// Keeps the release of long pending chains off the stack.
///
/// Releasing a pending future frees its callbacks, which may hold the next future, whose callbacks
/// hold the next, and so on: a recursive deinit a million frames deep. A deinit that may free more
/// futures hands its payload to ``release(_:)`` instead, which frees payloads one at a time in a loop.
@usableFromInline
enum DeferredRelease {
    /// Releases `payload` (and everything it frees in turn) without recursing.
    ///
    /// - Parameter take: moves the payload out of its owner and returns it; called exactly once.
    @usableFromInline
    static func release(_ take: () -> Any) {
        unowned(unsafe) let context = ThreadContext.current.takeUnretainedValue()
        if context.isReleasing {
            context.releaseQueue.append(take())
            return
        }
        context.isReleasing = true
        _ = take()  // dropped here; nested deinits append to the queue instead of recursing
        while let next = context.releaseQueue.popLast() {
            _ = next
        }
        context.isReleasing = false
    }
}
