import CFuturesAtomicGlobals

/// Finds the futures that never complete, and reports the failures nobody saw.
///
/// Tracking is off by default, and then costs one relaxed atomic load per future made. Turn it on
/// with ``startTracking()``, or by setting `SWIFT_FUTURES_DIAGNOSTICS=1` in the environment before
/// the process starts. While it is on, every future made records its kind (`promise`, `map`,
/// `flatMap`, `all`, `timeout`, ...), the file and line of the call that made it, and when.
///
/// ```swift
/// FutureDiagnostics.startTracking()
/// let promise = Promise<Int>()
/// let doubled = promise.future.map { $0 * 2 }.named("doubled")
/// print(FutureDiagnostics.dumpPending())
/// ```
///
/// See <doc:FindingAFutureThatNeverCompletes>.
public enum FutureDiagnostics {
    /// Starts tracking the futures made from now on.
    public static func startTracking() { Tracking.turn(on: true) }

    /// Stops tracking new futures; those already tracked stay tracked until they are freed.
    public static func stopTracking() { Tracking.turn(on: false) }

    /// Whether futures made now are tracked.
    public static var isTracking: Bool { Tracking.isOn }

    /// The tracked futures that are still pending, oldest first.
    ///
    /// Until it returns, the snapshot keeps alive what each tracked future waits on or was merged
    /// into: a future whose last reference goes meanwhile is freed when the snapshot ends, on the
    /// caller's thread. ``dumpPending()`` and the watchdog's looks take the same snapshot; a
    /// scope's (``FutureDiagnostics/Scope/pendingFutures``) keeps alive only what its own futures
    /// hold.
    public static func pendingFutures() -> [PendingFuture] {
        Tracking.pending()
    }

    /// The pending futures as a tree: those nobody waits on at the top, and below each what it
    /// waits on, down to the promise or producer that has not completed. A cycle, where nothing is
    /// at the top, is listed from its oldest future, and marked where it closes. It takes the
    /// snapshot ``pendingFutures()`` takes.
    public static func dumpPending() -> String {
        PendingTree(Tracking.pending()).render()
    }

    /// Installs the one process-wide reporter of ``FutureEvent``s. Call it once, at start-up; a
    /// second call traps. Without a reporter nothing is reported.
    ///
    /// - Parameter report: called with each event, on the thread where it happens (a broken
    ///   promise's release, a cycle's adoption, the watchdog's timer); keep it short.
    public static func bootstrap(_ report: @escaping @Sendable (FutureEvent) -> Void) {
        let installed = Tracking.state.withLock { state -> Bool in
            guard state.reporter == nil else { return false }
            state.reporter = report
            return true
        }
        precondition(installed, "FutureDiagnostics.bootstrap may only be called once")
    }

    /// Starts a watchdog that reports ``FutureEvent/stalled(_:)`` once for each tracked future
    /// pending longer than `limit`, looking every `interval`.
    ///
    /// Each look starts `interval` after the previous one ended, its reports included, so looks
    /// never overlap, however many futures are tracked or however slow the reporter. Once the
    /// source is cancelled no look starts; one running then still reports what it found.
    ///
    /// - Parameters:
    ///   - limit: how long a future may stay pending before it is reported.
    ///   - interval: how long to wait after one look before the next.
    /// - Returns: a source whose cancellation stops the watchdog.
    public static func watch(olderThan limit: Duration, every interval: Duration) -> CancellationSource {
        watch(olderThan: limit, every: interval, clock: ContinuousClock())
    }

    /// ``watch(olderThan:every:)`` with the looks timed on `clock` (ages are always measured on
    /// the system's monotonic clock; see ``PendingFuture/age``).
    ///
    /// - Parameters:
    ///   - limit: how long a future may stay pending before it is reported.
    ///   - interval: how long to wait after one look before the next, on `clock`.
    ///   - clock: the clock that times the looks; a manual clock in tests.
    /// - Returns: a source whose cancellation stops the watchdog.
    public static func watch<C: Clock>(olderThan limit: Duration, every interval: C.Duration, clock: C) -> CancellationSource {
        let source = CancellationSource()
        let watchdog = Watchdog(limit: limit, interval: interval, clock: clock)
        source.token.onCancel { watchdog.stop() }
        watchdog.arm()
        return source
    }

    /// A group of futures: those made while it is current (see ``run(_:)``) belong to
    /// it, so that a test can ask which of its own futures are left pending, and hear of their
    /// events, while other tests run in parallel.
    public final class Scope: Sendable {
        @TaskLocal static var current: Scope?

        let onEvent: (@Sendable (FutureEvent) -> Void)?

        /// Creates a scope.
        ///
        /// - Parameter onEvent: called with the events of the scope's futures (as well as the
        ///   reporter installed by ``FutureDiagnostics/bootstrap(_:)``, if any).
        public init(onEvent: (@Sendable (FutureEvent) -> Void)? = nil) {
            self.onEvent = onEvent
            swift_futures_scope_count_add_relaxed(1)
            if onEvent != nil { Tracking.state.withLock { $0.listeningScopes += 1 } }
        }

        deinit {
            if onEvent != nil { Tracking.state.withLock { $0.listeningScopes -= 1 } }
            swift_futures_scope_count_add_relaxed(-1)
        }

        /// Runs `body` with this scope current: the futures it makes belong to the scope.
        public func run<R>(_ body: () throws -> R) rethrows -> R {
            try Self.$current.withValue(self, operation: body)
        }

        /// Runs `body` with this scope current: the futures it makes belong to the scope.
        public func run<R: Sendable>(
            isolation: isolated (any Actor)? = #isolation,
            _ body: () async throws -> R
        ) async rethrows -> R {
            try await Self.$current.withValue(self, operation: body)
        }

        /// The futures of this scope that are still pending, oldest first.
        public var pendingFutures: [PendingFuture] { Tracking.pending(in: self) }

        /// ``FutureDiagnostics/dumpPending()`` for this scope's futures.
        public func dumpPending() -> String { PendingTree(Tracking.pending(in: self)).render() }
    }
}

/// A tracked future that is still pending (see ``FutureDiagnostics/pendingFutures()``).
public struct PendingFuture: Sendable, Hashable, CustomStringConvertible {
    /// The future's number, stable for its life.
    public let id: UInt64
    /// The name given by ``Future/named(_:file:line:)``, if any.
    public let name: String?
    /// What made it: `promise`, `map`, `flatMap`, `all`, `timeout`, ...
    public let kind: String
    /// The file of the call that made it (`#fileID`).
    public let file: String
    /// The line of the call that made it.
    public let line: Int
    /// How long it has been pending, on the system's monotonic clock (which stops while the
    /// system sleeps), to within a few milliseconds: a future is timed when it is made with a
    /// coarse clock read, which is cheap.
    public let age: Duration
    /// The ids of the tracked futures it waits on: its source, the future it adopted, a join's
    /// members that are still pending.
    public let waitingOn: [UInt64]
    /// Futures derived from it and tasks awaiting it.
    public let consumers: Int
    /// Callbacks registered on it that are not consumers.
    public let observers: Int

    /// `#id name (kind) at file:line, pending for 1.250 s`.
    public var description: String {
        "\(FutureDescription(id: id, name: name, kind: kind, file: file, line: line)), pending for \(formatted(age))"
    }
}

/// What a report says of a future: its number, name, kind and where it was made.
public struct FutureDescription: Sendable, Hashable, CustomStringConvertible {
    /// The future's number, or `nil` if it was not tracked.
    public let id: UInt64?
    /// Its name, if it was given one.
    public let name: String?
    /// What made it: `promise`, `map`, `flatMap`, `all`, ...
    public let kind: String
    /// The file of the call that made it (`#fileID`); empty if unknown.
    public let file: String
    /// The line of that call; 0 if unknown.
    public let line: Int

    /// `#id name (kind) at file:line`.
    public var description: String {
        var text = id.map { "#\($0) " } ?? ""
        text += name.map { "\($0) (\(kind))" } ?? kind
        if !file.isEmpty { text += " at \(file):\(line)" }
        return text
    }
}

/// What ``FutureDiagnostics/bootstrap(_:)``'s reporter hears.
public enum FutureEvent: Sendable, CustomStringConvertible {
    /// A promise was released without completing its future, which failed.
    case brokenPromise(FutureDescription, error: FutureError)
    /// A tracked future failed and was freed without anyone ever having registered on it,
    /// adopted it or read its outcome.
    case unobservedFailure(FutureDescription, error: any Error)
    /// Adopting a future closed a cycle: the adopter and the cycle's tracked `members` failed with
    /// ``FutureError/cycle``.
    case cycle(FutureDescription, members: [FutureDescription])
    /// An executor released the job that would have completed this future, which failed.
    case droppedJob(FutureDescription)
    /// The watchdog found this future pending longer than its limit.
    case stalled(PendingFuture)

    /// The future the event is about.
    public var future: FutureDescription {
        switch self {
        case .brokenPromise(let future, _), .unobservedFailure(let future, _), .cycle(let future, _), .droppedJob(let future):
            return future
        case .stalled(let pending):
            return FutureDescription(id: pending.id, name: pending.name, kind: pending.kind, file: pending.file, line: pending.line)
        }
    }

    /// One line: what happened, and to which future.
    public var description: String {
        switch self {
        case .brokenPromise(let future, let error): "broken promise: \(future): \(error)"
        case .unobservedFailure(let future, let error): "unobserved failure: \(future) failed with \(error), and nobody looked"
        case .cycle(let future, let members):
            "cycle: \(future) adopted a future that waits on it" + (members.isEmpty ? "" : " (through \(members.map(\.description).joined(separator: ", ")))")
        case .droppedJob(let future): "dropped job: \(future)"
        case .stalled(let pending): "stalled: \(pending)"
        }
    }
}

extension Future {
    /// Names this future for diagnostics: the name shows in ``FutureDiagnostics/dumpPending()``,
    /// in ``description`` and in reports. Returns the same future (no new consumer).
    ///
    /// A named future is tracked even while tracking is off, with this call as where it was made
    /// if it was not tracked before.
    ///
    /// - Parameters:
    ///   - name: the name.
    ///   - file: recorded if the future was not tracked; leave the default.
    ///   - line: recorded if the future was not tracked; leave the default.
    /// - Returns: this future.
    @discardableResult
    public func named(_ name: String, file: StaticString = #fileID, line: UInt = #line) -> Future {
        storage.track(kind: "future", file: file, line: line, name: name)
        return self
    }

    /// The name given by ``named(_:file:line:)``, if any.
    var diagnosticName: String? {
        guard storage.isTracked else { return nil }
        return Tracking.record(of: storage)?.name
    }
}

/// `1.250 s`, `12 ms`.
func formatted(_ duration: Duration) -> String {
    let (seconds, attoseconds) = duration.components
    let milliseconds = seconds * 1000 + attoseconds / 1_000_000_000_000_000
    if milliseconds < 1000 { return "\(milliseconds) ms" }
    let fraction = milliseconds % 1000
    let padded = String(repeating: "0", count: 3 - String(fraction).count) + String(fraction)
    return "\(milliseconds / 1000).\(padded) s"
}

/// Looks at the tracked futures every `interval`, and reports those pending past `limit` once.
final class Watchdog<C: Clock>: @unchecked Sendable {
    // Safety: `timer` and `stopped` are only touched under `lock`; the rest never changes.
    let limit: Duration
    let interval: C.Duration
    let clock: C
    let lock = Lock()
    var timer: Timer?
    var stopped = false

    init(limit: Duration, interval: C.Duration, clock: C) {
        self.limit = limit
        self.interval = interval
        self.clock = clock
    }

    /// Sets the timer for the next look, `interval` after the last one ended (its reports
    /// included): looks never overlap, however long one takes (a look copies every tracked future's
    /// state, which takes a while when there are a million of them) or however slow the reporter.
    func arm() {
        if lock.withLock({ stopped }) { return }
        let next = Timer.start(after: interval, clock: clock) { [self] in look() }
        let cancelNow = lock.withLock { () -> Bool in
            if stopped { return true }
            timer = next
            return false
        }
        if cancelNow { next.cancel() }
    }

    func stop() {
        let current = lock.withLock { () -> Timer? in
            stopped = true
            defer { timer = nil }
            return timer
        }
        current?.cancel()
    }

    /// Reports the futures pending past the limit and not reported yet, then sets the next look;
    /// nothing once stopped. (A look that had started when the watchdog was stopped ends as it
    /// would have.)
    func look() {
        if lock.withLock({ stopped }) { return }
        let old = Tracking.pending().filter { $0.age >= limit }
        if !old.isEmpty {
            let fresh = Tracking.markStalled(old)
            let reporter = fresh.isEmpty ? nil : Tracking.state.withLock { $0.reporter }
            for (future, scope) in fresh {
                Tracking.deliver(.stalled(future), scope: scope, reporter: reporter)
            }
        }
        arm()
    }
}
