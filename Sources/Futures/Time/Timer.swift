/// One scheduled piece of work on any `Clock`: fires once, or is cancelled and releases its work
/// (and everything the work holds) at once, not when the sleeping task next wakes.
final class Timer: @unchecked Sendable {
    // Safety: `work`, `task` and `cancelled` are only touched under `LockTable.withLock(self)`;
    // the work runs, and is released, outside the lock.
    private var work: (@Sendable () -> Void)?
    private var task: Task<Void, Never>?
    private var cancelled = false

    private init(_ work: @escaping @Sendable () -> Void) { self.work = work }

    /// Runs `work` once `duration` has passed on `clock`, measured from now.
    ///
    /// The deadline is computed here, synchronously, so advancing a manual clock right after this
    /// call fires the timer even if its task has not started sleeping yet.
    static func start<C: Clock>(
        after duration: C.Duration,
        clock: C,
        _ work: @escaping @Sendable () -> Void
    ) -> Timer {
        let timer = Timer(work)
        let deadline = clock.now.advanced(by: duration)
        let task = Task {
            do {
                try await clock.sleep(until: deadline, tolerance: nil)
            } catch {
                return
            }
            timer.fire()
        }
        let cancelNow = LockTable.withLock(timer) { () -> Bool in
            timer.task = task
            return timer.cancelled
        }
        if cancelNow { task.cancel() }
        return timer
    }

    private func fire() {
        let work = LockTable.withLock(self) { () -> (@Sendable () -> Void)? in
            defer { self.work = nil; task = nil }
            return self.work
        }
        work?()
    }

    /// Stops the timer: its work never runs and is released now.
    func cancel() {
        let (work, task) = LockTable.withLock(self) { () -> ((@Sendable () -> Void)?, Task<Void, Never>?) in
            cancelled = true
            defer { self.work = nil; self.task = nil }
            return (self.work, self.task)
        }
        task?.cancel()
        _ = work
    }
}
