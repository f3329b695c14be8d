import Foundation

extension Future {
    /// A Foundation `Progress` that follows this future, for APIs and UI that speak `Progress`:
    /// its `fractionCompleted` tracks ``progress``, and its `cancel()` cancels the future (Foundation
    /// may call the cancellation handler on another queue, so the future is cancelled shortly after).
    ///
    /// ```swift
    /// progressView.observedProgress = upload.makeProgress()
    /// ```
    ///
    /// - Parameter totalUnitCount: the resolution of the `Progress` (its units of work).
    /// - Returns: a new cancellable `Progress`, completed when the future succeeds.
    public func makeProgress(totalUnitCount: Int64 = 1_000) -> Progress {
        let foundation = Progress(totalUnitCount: totalUnitCount)
        foundation.isCancellable = true
        foundation.isPausable = false
        // Weak: a future that never completes must not be kept alive by its own Progress.
        foundation.cancellationHandler = { [weak storage] in _ = storage?.cancel() }
        whenProgress(on: .immediate) { fraction in
            foundation.completedUnitCount = Int64((fraction * Double(totalUnitCount)).rounded())
        }
        return foundation
    }
}

extension Promise {
    /// Makes this promise report the progress of an existing Foundation `Progress`, sampled every
    /// `interval` on `clock` until the future completes.
    ///
    /// Cancelling the future cancels the `Progress`; a `Progress` that is cancelled cancels the
    /// future. (Sampling works the same on every platform: Foundation on Linux has no key-value
    /// observation.)
    ///
    /// ```swift
    /// let promise = Promise<Data>()
    /// promise.follow(task.progress)        // a URLSessionTask's progress, for instance
    /// ```
    ///
    /// - Parameters:
    ///   - progress: the `Progress` to follow.
    ///   - interval: how often to sample it.
    ///   - clock: the clock to sample on; a manual clock in tests.
    public func follow<C: Clock>(_ progress: Progress, every interval: C.Duration, clock: C) {
        let storage = self.storage
        let sampler = Task {
            while storage.isPendingFor(storage) {
                if progress.isCancelled {
                    _ = storage.cancel()
                    return
                }
                storage.setProgress(progress.fractionCompleted, from: storage)
                do {
                    try await clock.sleep(until: clock.now.advanced(by: interval), tolerance: nil)
                } catch {
                    return
                }
            }
        }
        storage.onCancel {
            sampler.cancel()
            progress.cancel()
        }
        storage.register({ _ in sampler.cancel() }, asConsumer: false)
    }

    /// ``follow(_:every:clock:)`` on the continuous clock, sampling every 100 ms by default.
    ///
    /// - Parameters:
    ///   - progress: the `Progress` to follow.
    ///   - interval: how often to sample it.
    public func follow(_ progress: Progress, every interval: Duration = .milliseconds(100)) {
        follow(progress, every: interval, clock: ContinuousClock())
    }
}
