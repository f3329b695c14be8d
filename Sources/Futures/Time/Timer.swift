import Dispatch
import Foundation

#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Android)
import Android
#endif

/// One scheduled piece of work on a `Clock`: it fires once, or is cancelled and releases its work
/// (and everything the work holds) at once.
///
/// On the standard clocks (`ContinuousClock`, `SuspendingClock`) a timer is an entry in the heap of
/// one timer thread (``TimerThread``), so a cancelled timer leaves nothing behind: no sleeping task,
/// no kernel object. On any other clock a task sleeps on the clock; cancelling it releases the work
/// at once, and the task itself lives until the clock wakes it (a manual clock wakes it at once).
///
/// A duration too long to sleep (``TimerThread/longestSleep`` or more) means "never": the timer
/// holds its work until it is cancelled, and never fires.
final class Timer: @unchecked Sendable {
    // Safety: every field is only touched while holding `TimerThread.shared`'s lock (one lock for
    // every timer: arming, firing and cancelling are rare next to the work they guard). The work
    // runs, and is released, after that lock is released.
    fileprivate var work: (@Sendable () -> Void)?
    /// The sleeping task, on a clock other than the standard ones.
    fileprivate var task: Task<Void, Never>?
    /// The deadline in nanoseconds of ``TimerThread/now()``, on the standard clocks.
    fileprivate var deadline: UInt64 = 0
    /// The position in the timer thread's heap, or -1 when not in it.
    fileprivate var heapIndex = -1

    private init(_ work: @escaping @Sendable () -> Void) { self.work = work }

    /// Runs `work` once `duration` has passed on `clock`, measured from now.
    ///
    /// A zero or negative duration fires as soon as possible, never inline. The deadline is computed
    /// here, synchronously, so advancing a manual clock right after this call fires the timer even
    /// if its task has not started sleeping yet.
    static func start<C: Clock>(
        after duration: C.Duration,
        clock: C,
        _ work: @escaping @Sendable () -> Void
    ) -> Timer {
        let timer = Timer(work)
        if let duration = duration as? Duration, duration >= TimerThread.longestSleep {
            return timer  // never fires; holds its work until cancelled
        }
        if C.self == ContinuousClock.self || C.self == SuspendingClock.self {
            TimerThread.shared.schedule(timer, after: duration as! Duration)
            return timer
        }
        let deadline = clock.now.advanced(by: duration)
        let task = Task {
            do {
                try await clock.sleep(until: deadline, tolerance: nil)
            } catch {
                return
            }
            timer.fire()
        }
        // Nobody else holds the timer yet, so it cannot have been cancelled; it may have fired
        // already (then the task handle is kept until the timer is released, which is harmless).
        TimerThread.shared.withLock { timer.task = task }
        return timer
    }

    /// The deadline passed: runs the work, unless the timer was cancelled.
    fileprivate func fire() {
        let (work, task) = TimerThread.shared.withLock { () -> ((@Sendable () -> Void)?, Task<Void, Never>?) in
            var taken: ((@Sendable () -> Void)?, Task<Void, Never>?)
            swap(&taken.0, &self.work)
            swap(&taken.1, &self.task)
            return taken
        }
        work?()
        releaseOutsideLock((work, task))
    }

    /// Stops the timer: its work never runs and is released now.
    func cancel() {
        let (work, task) = TimerThread.shared.withLock { () -> ((@Sendable () -> Void)?, Task<Void, Never>?) in
            TimerThread.shared.removeLocked(self)
            var taken: ((@Sendable () -> Void)?, Task<Void, Never>?)
            swap(&taken.0, &self.work)
            swap(&taken.1, &self.task)
            return taken
        }
        task?.cancel()
        releaseOutsideLock((work, task))
    }
}

/// The thread that fires the standard clocks' timers: a binary min-heap of deadlines, and a
/// condition variable it sleeps on until the earliest one.
///
/// Deadlines are measured on the system's monotonic clock, which `SuspendingClock` is; a
/// `ContinuousClock` timer that spans a system sleep fires late by the time the system slept. Fired
/// work runs on a global dispatch queue, never on the timer thread, so slow work cannot delay other
/// timers.
final class TimerThread: @unchecked Sendable {
    // Safety: `heap` and `started` are only touched while holding `mutex`; the mutex and condition
    // are allocated once, in `init`, never moved or freed (the shared instance lives forever).
    static let shared = TimerThread()

    /// Durations from this one up mean "never" (about 136 years: far past any real deadline, and
    /// far from overflowing a deadline in nanoseconds).
    static let longestSleep = Duration.seconds(Int64(1) << 32)

    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let condition: UnsafeMutablePointer<pthread_cond_t>
    private var heap: [Timer] = []
    private var started = false

    private init() {
        mutex = .allocate(capacity: 1)
        pthread_mutex_init(mutex, nil)
        condition = .allocate(capacity: 1)
        #if canImport(Darwin)
        pthread_cond_init(condition, nil)
        #else
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(condition, &attributes)
        pthread_condattr_destroy(&attributes)
        #endif
    }

    /// Nanoseconds on the monotonic clock.
    static func now() -> UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return UInt64(time.tv_sec) &* 1_000_000_000 &+ UInt64(time.tv_nsec)
    }

    /// Runs `body` holding the lock that guards every timer. `body` must not call user code or
    /// release the last reference to anything.
    func withLock<R>(_ body: () -> R) -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return body()
    }

    /// Arms `timer` to fire `duration` from now (`duration` is below ``longestSleep``).
    func schedule(_ timer: Timer, after duration: Duration) {
        // A positive duration below `longestSleep` splits safely; a negative one may not (its
        // seconds can exceed `Int64`), and means "now" anyway.
        var nanoseconds: UInt64 = 0
        if duration > .zero {
            let (seconds, attoseconds) = duration.components
            nanoseconds = UInt64(seconds) * 1_000_000_000 + UInt64(attoseconds / 1_000_000_000)
        }
        let deadline = Self.now() + nanoseconds
        // Nobody else holds `timer` yet (`Timer.start` arms it before returning it), so it cannot
        // have been cancelled.
        let (wake, start) = withLock { () -> (Bool, Bool) in
            timer.deadline = deadline
            timer.heapIndex = heap.count
            heap.append(timer)
            siftUp(heap.count - 1)
            defer { started = true }
            return (timer.heapIndex == 0, !started)
        }
        if start {
            let thread = Thread { [self] in run() }
            thread.name = "swift-futures timers"
            thread.start()
        } else if wake {
            pthread_cond_signal(condition)
        }
    }

    /// Takes `timer` out of the heap if it is there (caller holds the lock). The thread is not
    /// woken: if it slept for this deadline, it wakes, finds nothing due, and sleeps again.
    fileprivate func removeLocked(_ timer: Timer) {
        let index = timer.heapIndex
        guard index >= 0 else { return }
        timer.heapIndex = -1
        let last = heap.removeLast()
        shrinkIfSparseLocked()
        guard index < heap.count else { return }
        heap[index] = last
        last.heapIndex = index
        siftDown(index)
        siftUp(index)
    }

    /// Gives back most of the heap's capacity once it is three quarters empty, so that a burst of
    /// timers (a long chain of timeouts, say) leaves no large buffer behind (caller holds the lock).
    /// Halving at a quarter full keeps the copying amortised constant per removal.
    private func shrinkIfSparseLocked() {
        guard heap.capacity > 64, heap.count < heap.capacity / 4 else { return }
        var smaller: [Timer] = []
        smaller.reserveCapacity(heap.count * 2)
        smaller.append(contentsOf: heap)
        heap = smaller  // frees the old buffer only: every timer is still held by `smaller`
    }

    /// How many timers the heap has room for (for tests).
    var heapCapacity: Int { withLock { heap.capacity } }

    /// Whether `timer` is in the heap (for tests).
    func isScheduled(_ timer: Timer) -> Bool { withLock { timer.heapIndex >= 0 } }

    /// Checks the heap order and every timer's recorded position (for tests).
    func checkInvariants() {
        withLock {
            for (index, timer) in heap.enumerated() {
                precondition(timer.heapIndex == index, "a timer's heap index is stale")
                if index > 0 {
                    precondition(heap[(index - 1) / 2].deadline <= timer.deadline, "the timer heap is out of order")
                }
            }
        }
    }

    private func run() {
        pthread_mutex_lock(mutex)
        while true {
            guard let first = heap.first else {
                pthread_cond_wait(condition, mutex)
                continue
            }
            let now = Self.now()
            if first.deadline > now {
                wait(nanoseconds: first.deadline - now)
                continue
            }
            // A timer cancelled during the wait may be owned only by `first` now; its deinit frees
            // nothing, since `cancel()` took its work under this mutex.
            var due: [Timer] = []
            while let earliest = heap.first, earliest.deadline <= now {
                removeLocked(earliest)
                due.append(earliest)
            }
            pthread_mutex_unlock(mutex)
            for timer in due { DispatchQueue.global().async { timer.fire() } }
            releaseOutsideLock(due)
            pthread_mutex_lock(mutex)
        }
    }

    /// Sleeps on the condition for at most `nanoseconds` (caller holds the mutex).
    private func wait(nanoseconds: UInt64) {
        #if canImport(Darwin)
        var relative = timespec(
            tv_sec: Int(nanoseconds / 1_000_000_000), tv_nsec: Int(nanoseconds % 1_000_000_000))
        pthread_cond_timedwait_relative_np(condition, mutex, &relative)
        #else
        let deadline = Self.now() + nanoseconds
        var absolute = timespec(
            tv_sec: Int(deadline / 1_000_000_000), tv_nsec: Int(deadline % 1_000_000_000))
        pthread_cond_timedwait(condition, mutex, &absolute)
        #endif
    }

    private func siftUp(_ start: Int) {
        var child = start
        while child > 0 {
            let parent = (child - 1) / 2
            guard heap[child].deadline < heap[parent].deadline else { return }
            swapAt(child, parent)
            child = parent
        }
    }

    private func siftDown(_ start: Int) {
        var parent = start
        while true {
            var smallest = parent
            let left = 2 * parent + 1
            let right = left + 1
            if left < heap.count, heap[left].deadline < heap[smallest].deadline { smallest = left }
            if right < heap.count, heap[right].deadline < heap[smallest].deadline { smallest = right }
            guard smallest != parent else { return }
            swapAt(parent, smallest)
            parent = smallest
        }
    }

    private func swapAt(_ a: Int, _ b: Int) {
        heap.swapAt(a, b)
        heap[a].heapIndex = a
        heap[b].heapIndex = b
    }
}
