import CFuturesAtomicGlobals

/// A value that follows a future's callbacks from where they are registered to wherever they run:
/// a task-local request context, a tracing context, a logger's metadata.
///
/// A callback runs later, often on another thread, where the task-local values of the code that
/// registered it are gone. Install a carrier once, at start-up, with
/// ``FutureContext/bootstrap(_:)``: every registration then calls ``capture()``, and whatever thread
/// runs the callback runs it inside ``restore(_:)`` of the captured value, or, if there was none,
/// inside ``withoutValue(_:)``.
///
/// ```swift
/// enum RequestID {
///     @TaskLocal static var current: String?
/// }
///
/// struct RequestIDCarrier: FutureContextCarrier {
///     let id: String
///
///     static func capture() -> RequestIDCarrier? {
///         RequestID.current.map(RequestIDCarrier.init)
///     }
///
///     func restore<R>(_ body: () throws -> R) rethrows -> R {
///         try RequestID.$current.withValue(id, operation: body)
///     }
///
///     static func withoutValue<R>(_ body: () throws -> R) rethrows -> R {
///         try RequestID.$current.withValue(nil, operation: body)
///     }
/// }
/// ```
///
/// All three are called often, outside the library's locks: keep them short, and never block or
/// register on a future inside them.
public protocol FutureContextCarrier: Sendable {
    /// The value current now, or `nil` when there is none.
    ///
    /// Called once where a callback is registered (a `map`, a `whenComplete`, a join, the work of
    /// `Future(on:)` handed to its executor, ...). With `nil`, the callback runs inside
    /// ``withoutValue(_:)``: with no value, not with whatever the thread that completes the future
    /// or runs the callback has current.
    static func capture() -> Self?

    /// Runs `body` with this value current, so that ``capture()`` inside `body` returns it.
    ///
    /// Called around the callback, on the thread that runs it, once per run.
    func restore<R>(_ body: () throws -> R) rethrows -> R

    /// Runs `body` with no value current, so that ``capture()`` inside `body` returns `nil`.
    ///
    /// Called around a callback whose registration captured no value of this carrier, on the
    /// thread that runs it, once per run.
    static func withoutValue<R>(_ body: () throws -> R) rethrows -> R
}

/// Carries values such as a task-local request or tracing context into futures' callbacks.
///
/// ```swift
/// FutureContext.bootstrap(RequestIDCarrier.self)
///
/// RequestID.$current.withValue("r-1") {
///     loadUser().whenSuccess(on: .global()) { user in
///         log("loaded \(user) for \(RequestID.current!)")  // "r-1", on a global queue, later
///     }
/// }
/// ```
///
/// The context captured when a callback is registered is current while that callback runs, on
/// whatever executor runs it, and so is its absence: a callback registered where no carrier has a
/// value runs with none, not with the context of the thread that completes the future or runs the
/// callback. It is captured once, at the registration, and restored once, around the callback: transforms (`map`, `flatMap`, `recover`, ...), observers
/// (`whenComplete`, `whenSuccess`, `whenProgress`, ...), callbacks on joins, timeouts and retries,
/// a promise's and a token's `onCancel`, the work of `Future(on:)` and `Future.deferred`, the
/// operations of a `FutureQueue` (each with the context of the `add` that queued it), the work of a
/// `FutureOperation` and the key-value notifications of its cancellation and its finishing (with
/// the context where it was made, so for `OperationQueue.addFuture` that of the call), and the
/// callbacks the bridges register. `Future { try await ... }` runs its task with the task-local
/// values of the call that made it, as every `Task` does.
///
/// Without a carrier installed, a registration pays one relaxed atomic load, and nothing else, on
/// every platform. With carriers installed, a registration calls each carrier's ``FutureContextCarrier/capture()`` once and wraps the callback
/// (one allocation), whether or not a value was captured: the wrapper restores the values, or
/// their absence. With three carriers or more, a registration where any has a value allocates the
/// list of values too. The library's own registrations, which run no user code (the steps of
/// joins, `observe()`, `cancellable(by:)`, timeouts, races, `wait()`), capture nothing: a
/// `zip` with one callback pays for that one callback.
public enum FutureContext {
    /// Installs the carriers whose values follow callbacks, for the whole process.
    ///
    /// Call it once, at start-up, before futures are made: callbacks registered before it carry
    /// nothing. A second call traps, as swift-log's `LoggingSystem.bootstrap` does: install every
    /// carrier the process needs in the one call. Restoring nests in the order given (the first
    /// carrier's value is restored outermost).
    ///
    /// - Parameter carriers: the carrier types; at least one, each at most once.
    public static func bootstrap(_ carriers: any FutureContextCarrier.Type...) {
        precondition(!carriers.isEmpty, "FutureContext.bootstrap needs at least one carrier")
        for (index, carrier) in carriers.enumerated() {
            precondition(
                !carriers[..<index].contains { $0 == carrier },
                "FutureContext.bootstrap was given \(carrier) twice")
        }
        let installed = CarrierSet.install(carriers)
        precondition(installed, "FutureContext.bootstrap may only be called once")
    }

    /// Whether carriers are installed: one relaxed atomic load.
    ///
    /// Relaxed is enough: the answer only chooses a path. `false` (nothing installed, or not yet
    /// seen by this thread) means carrying nothing, as for a registration made before
    /// ``bootstrap(_:)``; `true` leads to ``CarrierSet/installed``, whose acquiring load orders the
    /// reads of the set after its publication.
    @inlinable @inline(__always)
    static var isInstalled: Bool {
        swift_futures_installed_carriers_load_relaxed() != 0
    }

    /// The context the installed carriers capture now (their values, or their absence), or `nil` if
    /// none is installed.
    @inlinable
    static func capture() -> CapturedContext? {
        if _fastPath(!isInstalled) { return nil }
        return captureInstalled()
    }

    @usableFromInline @inline(never)
    static func captureInstalled() -> CapturedContext? {
        CarrierSet.installed?.capture()
    }

    /// `work`, made to run with the context current now (`work` itself if there is none).
    @inlinable
    static func carrying(_ work: @escaping @Sendable () -> Void) -> @Sendable () -> Void {
        if _fastPath(!isInstalled) { return work }
        return carryingInstalled(work)
    }

    @usableFromInline @inline(never)
    static func carryingInstalled(_ work: @escaping @Sendable () -> Void) -> @Sendable () -> Void {
        guard let context = captureInstalled() else { return work }
        return { context.restore(work) }
    }

    /// `work`, made to run with the context current now (`work` itself if there is none).
    @inlinable
    static func carrying<Argument>(_ work: @escaping @Sendable (Argument) -> Void) -> @Sendable (Argument) -> Void {
        if _fastPath(!isInstalled) { return work }
        return carryingInstalled(work)
    }

    @usableFromInline @inline(never)
    static func carryingInstalled<Argument>(_ work: @escaping @Sendable (Argument) -> Void) -> @Sendable (Argument) -> Void {
        guard let context = captureInstalled() else { return work }
        return { argument in context.restore { work(argument) } }
    }

    /// An error handler, `work`, made to run with the context current now; for callers that check
    /// ``isInstalled`` first. Not the generic form: passing an `(any Error) -> Void` through a
    /// generic parameter converts it to and from the generic representation, each conversion a
    /// closure of its own.
    @usableFromInline @inline(never)
    static func carryingInstalled(_ work: @escaping @Sendable (any Error) -> Void) -> @Sendable (any Error) -> Void {
        guard let context = captureInstalled() else { return work }
        return { error in context.restore { work(error) } }
    }

    /// A derived future's step, `work`, made to run with the context current now; for callers
    /// that check ``isInstalled`` first (so that without carriers the step is not converted at all).
    @usableFromInline @inline(never)
    static func carryingInstalled<Source, NewValue>(
        _ work: @escaping @Sendable (Outcome<Source>) -> Continuation<NewValue>
    ) -> @Sendable (Outcome<Source>) -> Continuation<NewValue> {
        guard let context = captureInstalled() else { return work }
        return { outcome in context.restore { work(outcome) } }
    }

    /// `work`, made to run with the context current now (`work` itself if there is none).
    @inlinable
    static func carryingThrowing<Argument, Result>(
        _ work: @escaping @Sendable (Argument) throws -> Result
    ) -> @Sendable (Argument) throws -> Result {
        if _fastPath(!isInstalled) { return work }
        return carryingThrowingInstalled(work)
    }

    @usableFromInline @inline(never)
    static func carryingThrowingInstalled<Argument, Result>(
        _ work: @escaping @Sendable (Argument) throws -> Result
    ) -> @Sendable (Argument) throws -> Result {
        guard let context = captureInstalled() else { return work }
        return { argument in try context.restore { try work(argument) } }
    }

    /// `work`, made to run with the context current now (`work` itself if there is none).
    @inlinable
    static func carryingThrowing<Result>(_ work: @escaping @Sendable () throws -> Result) -> @Sendable () throws -> Result {
        if _fastPath(!isInstalled) { return work }
        return carryingThrowingInstalled(work)
    }

    @usableFromInline @inline(never)
    static func carryingThrowingInstalled<Result>(_ work: @escaping @Sendable () throws -> Result) -> @Sendable () throws -> Result {
        guard let context = captureInstalled() else { return work }
        return { try context.restore(work) }
    }

    /// `work`, made to run with the context current now (`work` itself if there is none).
    @inlinable
    static func carrying<First, Second>(
        _ work: @escaping @Sendable (First, Second) -> Void
    ) -> @Sendable (First, Second) -> Void {
        if _fastPath(!isInstalled) { return work }
        return carryingInstalled(work)
    }

    @usableFromInline @inline(never)
    static func carryingInstalled<First, Second>(
        _ work: @escaping @Sendable (First, Second) -> Void
    ) -> @Sendable (First, Second) -> Void {
        guard let context = captureInstalled() else { return work }
        return { first, second in context.restore { work(first, second) } }
    }
}

/// The carriers ``FutureContext/bootstrap(_:)`` installed, in memory allocated once and never
/// freed: reading them, at every registration, costs no reference counting.
@usableFromInline
struct CarrierSet: @unchecked Sendable {
    // Safety: the buffer is filled before the set is published (with release ordering) and is never
    // written or freed after; a carrier type is a metatype, which is immutable.
    let carriers: UnsafeBufferPointer<any FutureContextCarrier.Type>

    /// Installs `carriers` unless a set is installed already.
    ///
    /// The set is published by its address, in an atomic global (see `CFuturesAtomicGlobals`) with a
    /// constant initial value, 0, so that reading it needs no lazy initialisation.
    static func install(_ carriers: [any FutureContextCarrier.Type]) -> Bool {
        let buffer = UnsafeMutableBufferPointer<any FutureContextCarrier.Type>.allocate(capacity: carriers.count)
        _ = buffer.initialize(from: carriers)
        let stored = UnsafeMutablePointer<CarrierSet>.allocate(capacity: 1)
        stored.initialize(to: CarrierSet(carriers: UnsafeBufferPointer(buffer)))
        // Release: the writes of the buffer and of the set above happen before any thread that
        // reads the address with acquire (``installed``) reads through it. A failed exchange
        // publishes nothing, so its relaxed failure ordering is enough.
        if swift_futures_installed_carriers_install_release(UInt(bitPattern: stored)) { return true }
        stored.deinitialize(count: 1)
        stored.deallocate()
        buffer.deallocate()
        return false
    }

    /// The installed set, if any.
    static var installed: CarrierSet? {
        // Acquire, pairing with the release of ``install(_:)``: the set and its buffer are read
        // through the address only after it, so they are seen as written.
        UnsafePointer<CarrierSet>(bitPattern: swift_futures_installed_carriers_load_acquire())?.pointee
    }

    /// What the carriers capture now: the values, or the absence of a value, of each.
    func capture() -> CapturedContext {
        if carriers.count == 1 {
            guard let value = carriers[0].capture() else { return CapturedContext(.nothing(self)) }
            return CapturedContext(.one(value))
        }
        if carriers.count == 2 {
            // Held inline, in the callback's wrapper: no list to allocate.
            let first = carriers[0].capture()
            let second = carriers[1].capture()
            if first == nil && second == nil { return CapturedContext(.nothing(self)) }
            return CapturedContext(.two(first, second, self))
        }
        // The list is made at the first value found: capturing nothing allocates nothing here.
        // A plain loop: `enumerated()` would look up its iterator's generic metadata on every
        // call, which under ThreadSanitizer takes a lock of the Swift runtime.
        var values: [(any FutureContextCarrier)?]? = nil
        var index = 0
        while index < carriers.count {
            let carrier = carriers[index]
            index += 1
            guard let value = carrier.capture() else {
                values?.append(nil)
                continue
            }
            if values == nil {
                var made: [(any FutureContextCarrier)?] = []
                made.reserveCapacity(carriers.count)
                while made.count < index - 1 { made.append(nil) }
                values = made
            }
            values!.append(value)
        }
        guard let values else { return CapturedContext(.nothing(self)) }
        return CapturedContext(.several(values, self))
    }
}

/// The context captured at one registration, restored around its callback: each carrier's value,
/// or its absence.
@usableFromInline
struct CapturedContext: Sendable {
    @usableFromInline
    enum Values: Sendable {
        /// The value of the one installed carrier.
        case one(any FutureContextCarrier)
        /// No carrier had a value: each runs the callback without one.
        case nothing(CarrierSet)
        /// Two carriers, in the order installed, each with its value or `nil` (not both `nil`).
        case two((any FutureContextCarrier)?, (any FutureContextCarrier)?, CarrierSet)
        /// Three carriers or more, in the order installed, each with its value or `nil`.
        case several([(any FutureContextCarrier)?], CarrierSet)
    }

    @usableFromInline let values: Values

    init(_ values: Values) { self.values = values }

    /// Runs `body` with the captured context current.
    @usableFromInline
    func restore<R>(_ body: () throws -> R) rethrows -> R {
        switch values {
        case .one(let value): try value.restore(body)
        case .nothing(let set): try Self.restore(nil, set.carriers, from: 0, body)
        case .two(let first, let second, let set):
            try Self.restore(first, set.carriers[0]) { try Self.restore(second, set.carriers[1], body) }
        case .several(let values, let set): try Self.restore(values, set.carriers, from: 0, body)
        }
    }

    /// Restores `value`, or runs `carrier` without one.
    private static func restore<R>(
        _ value: (any FutureContextCarrier)?,
        _ carrier: any FutureContextCarrier.Type,
        _ body: () throws -> R
    ) rethrows -> R {
        if let value { return try value.restore(body) }
        return try carrier.withoutValue(body)
    }

    /// Restores the value of each carrier from `index` on, or runs it without one, nested in the
    /// order installed (the first outermost). `values` is `nil` when no carrier had one.
    ///
    /// By index, not through slices: a slice's generic metadata is looked up on every call, and
    /// under ThreadSanitizer each lookup takes a lock of the Swift runtime.
    private static func restore<R>(
        _ values: [(any FutureContextCarrier)?]?,
        _ carriers: UnsafeBufferPointer<any FutureContextCarrier.Type>,
        from index: Int,
        _ body: () throws -> R
    ) rethrows -> R {
        guard index < carriers.count else { return try body() }
        if let value = values?[index] {
            return try value.restore { try restore(values, carriers, from: index + 1, body) }
        }
        return try carriers[index].withoutValue { try restore(values, carriers, from: index + 1, body) }
    }
}
