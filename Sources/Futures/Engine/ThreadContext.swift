import CFuturesAtomicGlobals
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
    /// Retained while queued; the drain loop releases it after `run` returns (an entry is never
    /// dropped unrun: the loop runs every entry it was handed).
    @usableFromInline let node: Unmanaged<AnyObject>
    @usableFromInline let run: (AnyObject) -> Void

    @inlinable
    init(node: Unmanaged<AnyObject>, run: @escaping (AnyObject) -> Void) {
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
    /// Entries waiting for the drain loop; a slot is emptied as its entry is taken.
    @exclusivity(unchecked) var drainQueue: [DrainEntry?] = []
    @exclusivity(unchecked) var drainHead = 0

    /// True while a deferred-release loop runs on this thread; nested deinits queue instead of recursing.
    @exclusivity(unchecked) var isReleasing = false
    @exclusivity(unchecked) var releaseQueue: [Any] = []

    /// How many withdrawal loops are running on this thread, one inside another (see
    /// ``Cancellation/withdraw(from:_:key:)``); past a few, withdrawals that the futures they cancel
    /// start in turn (a join leaving its members, for instance) queue in `withdrawals` instead of
    /// recursing, and the outermost loop takes them. A slot is emptied as its withdrawal is taken.
    @exclusivity(unchecked) var withdrawalNesting = 0
    @exclusivity(unchecked) var withdrawals: [UpstreamLink?] = []
    @exclusivity(unchecked) var withdrawalHead = 0

    /// How many pieces of joins' progress work are running on this thread, one inside another (see
    /// ``ProgressNesting``); past a few, further ones queue in `progressWork` instead of recursing,
    /// and the outermost one runs them before it returns. A slot is emptied as its work is taken.
    @exclusivity(unchecked) var progressNesting = 0
    @exclusivity(unchecked) var progressWork: [(() -> Void)?] = []
    @exclusivity(unchecked) var progressWorkHead = 0

    /// This thread's slot in the adoption gate (see ``AdoptionGate``).
    let gateSlot = AdoptionGate.assignSlot()

    /// How many adoptions on this thread found the adoption gate held or awaited exclusively by
    /// another thread, and how many the gate held shared could not decide (they walk, or split):
    /// for tests of which adoptions need it exclusively.
    @exclusivity(unchecked) var adoptionsKeptFromSharing = 0
    @exclusivity(unchecked) var adoptionsNeedingExclusivity = 0

    /// How many waits the cycle checks made on this thread have followed (for tests of their cost).
    @exclusivity(unchecked) var cycleStepsWalked = 0
    /// How many futures past the first the walks along merge links and forwards made on this
    /// thread have passed (for tests of their cost).
    @exclusivity(unchecked) var mergeStepsWalked = 0
    #if DEBUG
    /// Run once, and cleared, right after the next walk of a consumer's call on this thread and
    /// before it locks the future it found (for tests of what other threads may do in between).
    @exclusivity(unchecked) var afterConsumerWalk: (() -> Void)?
    #endif

    /// True while cancellation-token handlers run on this thread; handlers of tokens they cancel (or
    /// make immortal) in turn queue up instead of recursing.
    @exclusivity(unchecked) var isRunningTokenWork = false
    @exclusivity(unchecked) var tokenWork: [(() -> Void)?] = []
    @exclusivity(unchecked) var tokenWorkHead = 0

    /// The executor whose job is running on this thread, for ``CurrentExecutor``: a built-in one,
    /// or a custom one (kept apart, so that reading a built-in one copies no existential), and what
    /// it runs on (see ``Affinity``).
    @exclusivity(unchecked) var currentBuiltIn: BuiltInExecutor?
    @exclusivity(unchecked) var currentCustom: RecordingExecutor?
    @exclusivity(unchecked) var currentAffinity: Affinity?
    /// True while the library completes a future in a job, right after the user code of that job
    /// returned (``Drain/completingInJob(_:)``), and in the drain loop that completion starts: only
    /// then may a callback for the job's executor run in the job. Never while user code of the job
    /// is on the stack (it may hold a lock, or be inside `sync` on another queue).
    @exclusivity(unchecked) var affinityOpen = false

    /// The key whose destructor releases a thread's context when the thread exits. Read only when
    /// a thread makes its context: the context itself is found through a C thread-local, because a
    /// Swift global such as this one takes a lock on every read under ThreadSanitizer (see the C
    /// module), and the context is read for every callback.
    private static let releaseAtExit: pthread_key_t = {
        var key = pthread_key_t()
        #if canImport(Darwin)
        let error = pthread_key_create(&key) { pointer in
            ThreadContext.releaseAtThreadExit(pointer)
        }
        #else
        let error = pthread_key_create(&key) { pointer in
            if let pointer { ThreadContext.releaseAtThreadExit(pointer) }
        }
        #endif
        precondition(error == 0, "pthread_key_create failed: \(error)")
        return key
    }()

    /// Forgets and releases the context of a thread that is exiting. Code that runs later in the
    /// thread's exit (another key's destructor) and needs a context makes a new one, which the key
    /// releases in turn, as a key whose value is set again during the destructors is called again.
    private static func releaseAtThreadExit(_ pointer: UnsafeMutableRawPointer) {
        if swift_futures_thread_context_get() == pointer { swift_futures_thread_context_set(nil) }
        Unmanaged<ThreadContext>.fromOpaque(pointer).release()
    }

    /// This thread's context, created on first use and released when the thread exits.
    static var current: Unmanaged<ThreadContext> {
        if let pointer = swift_futures_thread_context_get() { return Unmanaged.fromOpaque(pointer) }
        // The thread-local may be gone while the key still holds the context: on Apple platforms a
        // thread's C thread-locals are freed by a key destructor of the loader's, which can run
        // before ours as the thread exits. Making a new context then would leak the old one.
        if let pointer = pthread_getspecific(releaseAtExit) {
            swift_futures_thread_context_set(pointer)
            return Unmanaged.fromOpaque(pointer)
        }
        let context = Unmanaged.passRetained(ThreadContext())
        swift_futures_thread_context_set(context.toOpaque())
        pthread_setspecific(releaseAtExit, context.toOpaque())
        return context
    }

    /// This thread's context if it has one (does not create it).
    static var existing: ThreadContext? {
        existingPointer.map { Unmanaged<ThreadContext>.fromOpaque($0).takeUnretainedValue() }
    }

    /// The address of this thread's context, if it has one.
    static var existingPointer: UnsafeMutableRawPointer? { swift_futures_thread_context_get() }
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
