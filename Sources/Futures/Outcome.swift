/// How a future ended: with a value, with an error, or cancelled.
///
/// Cancellation is its own outcome, not an error: failure handlers never see it, completion handlers
/// do. A `CancellationError`, or an error that indicates cancellation (``CancellationIndicating``),
/// thrown into or failed into a future makes it `.cancelled`.
///
/// ```swift
/// switch await download.result {
/// case .success(let data): show(data)
/// case .failure(let error): report(error)
/// case .cancelled: break   // the user walked away; nothing to report
/// }
/// ```
public enum Outcome<Value> {
    /// The future produced a value.
    case success(Value)
    /// The future failed with an error.
    case failure(any Error)
    /// The future was cancelled before it produced a value.
    case cancelled
}

extension Outcome: Sendable where Value: Sendable {}

extension Outcome {
    /// Creates an outcome from a `Result`; a failure that means cancellation (a `CancellationError`,
    /// or see ``CancellationIndicating``) becomes ``cancelled``.
    ///
    /// - Parameter result: the result to convert.
    @inlinable
    public init<Failure: Error>(_ result: Result<Value, Failure>) {
        switch result {
        case .success(let value): self = .success(value)
        case .failure(let error): self = .init(failure: error)
        }
    }

    /// Creates an outcome by running `body`: its value, its error, or ``cancelled`` if it throws an
    /// error that means cancellation (a `CancellationError`, or see ``CancellationIndicating``).
    ///
    /// - Parameter body: the work whose result becomes the outcome.
    @inlinable
    public init(catching body: () throws -> Value) {
        do {
            self = .success(try body())
        } catch {
            self = .init(failure: error)
        }
    }

    /// A failure, or ``cancelled`` if `error` means cancellation.
    @inlinable
    init(failure error: any Error) {
        self = indicatesCancellation(error) ? .cancelled : .failure(error)
    }

    /// This outcome as a `Result`; ``cancelled`` becomes `.failure(CancellationError())`.
    @inlinable
    public var result: Result<Value, any Error> {
        switch self {
        case .success(let value): .success(value)
        case .failure(let error): .failure(error)
        case .cancelled: .failure(CancellationError())
        }
    }

    /// The value, or throws the error (`CancellationError` when cancelled).
    ///
    /// - Returns: the success value.
    @inlinable
    public func get() throws -> Value {
        switch self {
        case .success(let value): return value
        case .failure(let error): throw error
        case .cancelled: throw CancellationError()
        }
    }

    /// The value if this is a success, else `nil`.
    @inlinable
    public var value: Value? {
        if case .success(let value) = self { return value }
        return nil
    }

    /// The error if this is a failure, else `nil` (a cancelled outcome has no error).
    @inlinable
    public var error: (any Error)? {
        if case .failure(let error) = self { return error }
        return nil
    }

    /// Whether this is ``success(_:)``.
    @inlinable
    public var isSuccess: Bool {
        if case .success = self { return true }
        return false
    }

    /// Whether this is ``failure(_:)``.
    @inlinable
    public var isFailure: Bool {
        if case .failure = self { return true }
        return false
    }

    /// Whether this is ``cancelled``.
    @inlinable
    public var isCancelled: Bool {
        if case .cancelled = self { return true }
        return false
    }

    /// Transforms the value of a success; failures and cancellation pass through.
    ///
    /// - Parameter transform: maps the success value.
    /// - Returns: the transformed outcome.
    @inlinable
    public func map<NewValue>(_ transform: (Value) throws -> NewValue) rethrows -> Outcome<NewValue> {
        switch self {
        case .success(let value): .success(try transform(value))
        case .failure(let error): .failure(error)
        case .cancelled: .cancelled
        }
    }

    /// The outcome of `transform` on a value (an error it throws fails it, a `CancellationError`
    /// cancels it); failures and cancellation pass through without calling it.
    @inlinable
    func then<NewValue>(_ transform: (Value) throws -> NewValue) -> Outcome<NewValue> {
        switch self {
        case .success(let value): Outcome<NewValue> { try transform(value) }
        case .failure(let error): .failure(error)
        case .cancelled: .cancelled
        }
    }

    /// The same outcome with an error that means cancellation mapped to ``cancelled`` (a future that
    /// fails with one is cancelled).
    @inlinable
    var normalized: Outcome<Value> {
        if case .failure(let error) = self, indicatesCancellation(error) { return .cancelled }
        return self
    }
}

extension Outcome: CustomStringConvertible {
    /// `success(value)`, `failure(error)` or `cancelled`.
    public var description: String {
        switch self {
        case .success(let value): "success(\(value))"
        case .failure(let error): "failure(\(error))"
        case .cancelled: "cancelled"
        }
    }
}

extension Result where Failure == any Error {
    /// Creates a result from an outcome; ``Outcome/cancelled`` becomes `.failure(CancellationError())`.
    ///
    /// - Parameter outcome: the outcome to convert.
    public init(_ outcome: Outcome<Success>) {
        self = outcome.result
    }
}
