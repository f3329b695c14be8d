/// Errors the library itself fails futures with.
public enum FutureError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The last ``Promise`` of a pending future went away without completing it. Carries where the
    /// promise was made (`#fileID` and `#line`).
    case brokenPromise(file: String, line: Int)
    /// The future was made to adopt itself, directly or through a cycle of futures that adopt or are
    /// derived from each other.
    case cycle
    /// A `timeout(after:)` elapsed before the future completed.
    case timedOut
    /// A combinator that needs at least one future was given none.
    case emptyInput
    /// A member of a join was cancelled (by its producer, a consumer, or an error that means
    /// cancellation), not by the join.
    case cancelledMember
    /// A completion handler was called with neither a value nor an error.
    case invalidCallback
    /// A source that should have produced a value finished without one (a Combine publisher that
    /// completed empty, for `Future(publisher)`).
    case noValue
    /// A custom executor released, without running it, the job that would have completed this
    /// future (an ``Executor`` must run every job it is given).
    case droppedJob
    /// ``Future/wait()`` was called, on a pending future, where the jobs it may still need cannot run
    /// while it blocks: in a job of a serial or custom executor, on the main queue inside one of its
    /// jobs, or in a callback running inline in a completion. `await` the value or register a
    /// callback there.
    case blockingWait

    /// A one-line explanation.
    public var description: String {
        switch self {
        case .brokenPromise(let file, let line):
            "broken promise: the promise made at \(file):\(line) was released without completing its future"
        case .cycle: "cycle: a future was made to adopt itself, directly or through other futures"
        case .timedOut: "timed out"
        case .emptyInput: "empty input: the combinator needs at least one future"
        case .cancelledMember: "a member of the join was cancelled"
        case .invalidCallback: "invalid callback: a completion handler got neither a value nor an error"
        case .noValue: "no value: the source finished without producing a value"
        case .droppedJob: "dropped job: an executor released the job that would have completed this future without running it"
        case .blockingWait:
            "blocking wait: wait() was called where the future's callbacks may need to run (a job of a serial or custom executor, the main queue inside one of its jobs, or an inline callback); await the value or register a callback instead"
        }
    }
}
