/// How long ``Future/retry(attempts:backoff:clock:while:file:line:_:)`` waits before each new attempt.
public struct Backoff<Duration: DurationProtocol & Sendable>: Sendable {
    /// The delay before attempt `n + 1`, after `n` failed attempts (`n >= 1`).
    public let delay: @Sendable (_ failedAttempts: Int) -> Duration

    /// A backoff computing each delay with `delay`.
    ///
    /// - Parameter delay: the delay after the given number of failed attempts.
    public init(_ delay: @escaping @Sendable (_ failedAttempts: Int) -> Duration) {
        self.delay = delay
    }

    /// Retries at once.
    public static var none: Backoff { Backoff { _ in .zero } }

    /// Waits `delay` before every retry.
    ///
    /// - Parameter delay: the delay.
    public static func constant(_ delay: Duration) -> Backoff { Backoff { _ in delay } }

    /// Waits `initial`, then `initial * factor`, `initial * factor²`, ..., at most `maximum`.
    ///
    /// The delay stops growing at `maximum`. Without one, a `Duration` stops growing past a century
    /// (a wait that long means "never" to a timer): it never overflows, however many attempts
    /// fail. Another duration type, whose range the backoff cannot know, stops after growing
    /// 2^20-fold: if `initial * 2^20` could overflow that type, pass a `maximum`.
    ///
    /// - Parameters:
    ///   - initial: the first delay.
    ///   - factor: how much each delay grows (at least 1).
    ///   - maximum: the longest delay, if any.
    public static func exponential(initial: Duration, factor: Int = 2, maximum: Duration? = nil) -> Backoff {
        precondition(factor >= 1, "the backoff factor must be at least 1")
        let ceiling = maximum ?? (TimerThread.longestSleep as? Duration)
        return Backoff { failedAttempts in
            let growths = max(failedAttempts, 1) - 1
            guard let ceiling else {
                // A duration type of unknown range: a bounded multiplier.
                var multiplier = 1
                for _ in 0..<growths {
                    let (next, overflow) = multiplier.multipliedReportingOverflow(by: factor)
                    if overflow || next > 1 << 20 || next == multiplier { break }
                    multiplier = next
                }
                return initial * multiplier
            }
            var delay = initial
            for _ in 0..<growths {
                // Would `delay * factor` pass the ceiling? Asked without computing a product that
                // could overflow. (Written so that a NaN or infinite floating-point duration stops too.)
                if !(delay <= ceiling / factor) { return ceiling }
                guard delay > .zero, factor > 1 else { break }
                let next = delay * factor
                if !(next > delay) { break }
                delay = next
            }
            return delay <= ceiling ? delay : ceiling
        }
    }
}

/// How many attempts without a backoff a retry starts one after another, in the same call, before
/// one hop to a global queue.
let inlineAttempts = 256

extension Future {
    /// Runs `operation` until it succeeds, at most `attempts` times, waiting `backoff` between
    /// attempts; when attempts run out (or `while` says not to retry an error) it fails with the
    /// last error.
    ///
    /// ```swift
    /// let profile = Future.retry(attempts: 3, backoff: .exponential(initial: .milliseconds(10), factor: 2)) {
    ///     fetchProfile()
    /// }
    /// ```
    ///
    /// Cancelling the result cancels the attempt in flight (or the wait) and stops retrying. A
    /// cancelled attempt is not retried: it cancels the result.
    ///
    /// - Parameters:
    ///   - attempts: the most attempts to make (at least 1).
    ///   - backoff: the wait before each retry.
    ///   - clock: the clock to wait on.
    ///   - shouldRetry: whether an error is worth another attempt.
    ///   - file: the file of the call, for diagnostics; leave the default.
    ///   - line: the line of the call, for diagnostics; leave the default.
    ///   - operation: starts one attempt.
    /// - Returns: the first successful attempt's value, or the last error.
    public static func retry<C: Clock>(
        attempts: Int,
        backoff: Backoff<C.Duration> = .none,
        clock: C = ContinuousClock(),
        while shouldRetry: @escaping @Sendable (any Error) -> Bool = { _ in true },
        file: StaticString = #fileID,
        line: UInt = #line,
        _ operation: @escaping @Sendable () -> Future<Value>
    ) -> Future<Value> {
        retrying(attempts: attempts, backoff: backoff, clock: clock, while: shouldRetry, file: file, line: line, operation)
            .made("retry", file, line)
    }

    /// ``retry(attempts:backoff:clock:while:file:line:_:)`` without the call site, kept so that
    /// code naming this form still compiles; a call chooses the form above.
    @_disfavoredOverload
    public static func retry<C: Clock>(
        attempts: Int,
        backoff: Backoff<C.Duration> = .none,
        clock: C = ContinuousClock(),
        while shouldRetry: @escaping @Sendable (any Error) -> Bool = { _ in true },
        _ operation: @escaping @Sendable () -> Future<Value>
    ) -> Future<Value> {
        retrying(attempts: attempts, backoff: backoff, clock: clock, while: shouldRetry, file: #fileID, line: #line, operation)
    }

    static func retrying<C: Clock>(
        attempts: Int,
        backoff: Backoff<C.Duration>,
        clock: C,
        while shouldRetry: @escaping @Sendable (any Error) -> Bool,
        file: StaticString,
        line: UInt,
        _ operation: @escaping @Sendable () -> Future<Value>
    ) -> Future<Value> {
        precondition(attempts >= 1, "retry needs at least one attempt")
        // Set as the result is cancelled (a producer handler: before its callbacks run). A step
        // cancelled while its source's callbacks are running may still see that source's outcome,
        // so each step checks it before starting a wait or an attempt.
        let stopped = Locked(false)
        @Sendable func attempt(_ number: Int) -> Future<Value> {
            operation().flatMapError(hop: .inline) { error in
                guard number < attempts, shouldRetry(error) else { throw error }
                if stopped.withLock({ $0 }) { return .cancelled }
                let delay = backoff.delay(number)
                if delay > .zero {
                    return Future<Void>.after(delay, value: (), clock: clock, file: file, line: line)
                        .flatMap(hop: .inline) { stopped.withLock { $0 } ? .cancelled : attempt(number + 1) }
                }
                // No wait: the next attempt starts here, with no timer (this runs in a callback,
                // so an attempt that fails at once queues behind it rather than recursing). Every
                // so often it starts after a hop to a global queue instead (a callback on an
                // executor other than `.immediate` never runs inside the call that registers it),
                // so that attempts failing at once neither keep `retry` from returning nor hold the
                // calling thread for ever.
                if number % inlineAttempts != 0 { return attempt(number + 1) }
                return Future<Void>(value: ())
                    .flatMap(on: .global()) { stopped.withLock { $0 } ? .cancelled : attempt(number + 1) }
            }
        }
        let result = attempt(1)
        result.storage.onCancel { stopped.withLock { $0 = true } }
        return result
    }
}
