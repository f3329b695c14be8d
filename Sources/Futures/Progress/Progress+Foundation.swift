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
            foundation.completedUnitCount = completedUnits(fraction, of: totalUnitCount)
        }
        return foundation
    }
}

/// `fraction` of `total` units, rounded to the nearest unit (a tie upwards), computed exactly, in
/// integers, for any total up to `Int64.max` (a `Double` holds integers exactly only up to 2^53):
/// never below 0 or past `total`, exactly `total` for 1, and never smaller for a larger fraction.
func completedUnits(_ fraction: Double, of total: Int64) -> Int64 {
    guard total > 0, fraction > 0 else { return 0 }  // NaN included
    guard fraction < 1 else { return total }
    // fraction = significand / 2^shift exactly, with significand < 2^53 and shift >= 53 (as
    // fraction < 1); a subnormal fraction has no implicit leading bit and the smallest exponent.
    let exponent = fraction.exponentBitPattern
    let significand = fraction.significandBitPattern | (exponent == 0 ? 0 : 1 << 52)
    let shift = 1_075 - Int(max(exponent, 1))
    // total × significand < 2^63 × 2^53: exact in 128 bits. Shifted by more than 116 bits, it is
    // below one half.
    guard shift <= 116 else { return 0 }
    let (high, low) = UInt64(total).multipliedFullWidth(by: significand)
    /// The product shifted right by `bits` (52...116), truncated to 64 bits.
    func shifted(by bits: Int) -> UInt64 {
        bits >= 64 ? high >> UInt64(bits - 64) : high << UInt64(64 - bits) | low >> UInt64(bits)
    }
    // The quotient is below `total` (the fraction is below 1), so rounding up reaches it at most.
    let quotient = shifted(by: shift)
    let half = shifted(by: shift - 1) & 1
    return Int64(quotient + half)
}

extension Promise {
    /// Makes this promise report the progress of an existing Foundation `Progress`, sampled every
    /// `interval` on `clock` until the future completes.
    ///
    /// Cancelling the future cancels the `Progress`; a `Progress` that is cancelled cancels the
    /// future. (Sampling works the same on every platform: Foundation on Linux has no key-value
    /// observation, so there is no telling when the `Progress` changes.)
    ///
    /// Samples are at least a millisecond apart: an interval below that, zero and negative
    /// included, samples every millisecond. (On a clock whose durations are not `Duration`, an
    /// interval that is not positive waits the clock's `minimumResolution` instead, or a
    /// millisecond of the continuous clock if that is not positive either.)
    ///
    /// ```swift
    /// let promise = Promise<Data>()
    /// promise.follow(task.progress)        // a URLSessionTask's progress, for instance
    /// ```
    ///
    /// - Parameters:
    ///   - progress: the `Progress` to follow.
    ///   - interval: how often to sample it; at least a millisecond.
    ///   - clock: the clock to sample on; a manual clock in tests.
    public func follow<C: Clock>(_ progress: Progress, every interval: C.Duration, clock: C) {
        let storage = self.storage
        let pause = samplingPause(interval, on: clock)
        let sampler = Task {
            while storage.isPendingFor(storage) {
                if progress.isCancelled {
                    _ = storage.cancel()
                    return
                }
                storage.setProgress(progress.fractionCompleted, from: storage)
                do {
                    if let pause {
                        try await clock.sleep(until: clock.now.advanced(by: pause), tolerance: nil)
                    } else {
                        try await ContinuousClock().sleep(for: minimumSamplingInterval)
                    }
                } catch {
                    return
                }
            }
        }
        storage.onCancel {
            sampler.cancel()
            progress.cancel()
        }
        storage.register({ _ in sampler.cancel() }, asConsumer: false, carryingContext: false, observes: false)
    }

    /// ``follow(_:every:clock:)`` on the continuous clock, sampling every 100 ms by default.
    ///
    /// - Parameters:
    ///   - progress: the `Progress` to follow.
    ///   - interval: how often to sample it; at least a millisecond.
    public func follow(_ progress: Progress, every interval: Duration = .milliseconds(100)) {
        follow(progress, every: interval, clock: ContinuousClock())
    }
}

/// The shortest wait between two samples of a followed `Progress`: a shorter interval would keep a
/// thread busy sampling.
let minimumSamplingInterval = Duration.milliseconds(1)

/// The wait between two samples of a followed `Progress` on `clock`: `interval`, but at least
/// ``minimumSamplingInterval``. On a clock whose durations are not `Duration`, an interval that is
/// not positive becomes the clock's resolution; `nil` if that is not positive either (the sampler
/// then waits the minimum on the continuous clock).
func samplingPause<C: Clock>(_ interval: C.Duration, on clock: C) -> C.Duration? {
    if let interval = interval as? Duration {
        return max(interval, minimumSamplingInterval) as? C.Duration
    }
    if interval > .zero { return interval }
    let resolution = clock.minimumResolution
    return resolution > .zero ? resolution : nil
}
