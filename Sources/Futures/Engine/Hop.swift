/// Where a registered callback's user code runs, resolved once at registration.
///
/// `.inline` is ``ImmediateExecutor``: the code runs in the drain loop on the completing thread.
/// Everything else is handed to an executor that records itself as the running executor, so that
/// ``CurrentExecutor`` registered inside the callback sticks to it.
@usableFromInline
enum Hop: Sendable {
    case inline
    case executor(any Executor)

    @inlinable
    init<E: Executor>(_ executor: E) {
        // Metatype comparisons fold away once specialised; no dynamic cast on the hot path.
        if E.self == ImmediateExecutor.self {
            self = .inline
        } else if E.self == CurrentExecutor.self {
            self = .executor(CurrentExecutor.resolve())
        } else if E.self is any RecordsItself.Type {
            self = .executor(executor)
        } else {
            self = .executor(RecordingExecutor(base: executor))
        }
    }

    /// Runs `work` inline or on the executor.
    @inlinable
    func run(_ work: @escaping @Sendable () -> Void) {
        switch self {
        case .inline: work()
        case .executor(let executor): executor.execute(work)
        }
    }
}

/// The built-in executors, which record themselves as the running executor in their jobs.
@usableFromInline
protocol RecordsItself {}

extension MainExecutor: RecordsItself {}
extension MainImmediateExecutor: RecordsItself {}
extension GlobalExecutor: RecordsItself {}
extension QueueExecutor: RecordsItself {}
extension OperationQueueExecutor: RecordsItself {}

/// Wraps a custom executor so its jobs record it as the running executor.
@usableFromInline
struct RecordingExecutor: Executor {
    @usableFromInline let base: any Executor

    @inlinable init(base: any Executor) { self.base = base }

    @inlinable
    func execute(_ work: @escaping @Sendable () -> Void) {
        let base = self.base
        base.execute { Drain.run(on: base, work) }
    }
}

/// Turns a `@MainActor` closure into a plain `@Sendable` one for an executor that runs on the main
/// queue (``MainActorExecutor``): it asserts, rather than assumes, that it runs on the main actor.
@inlinable
func onMainActor<Argument: Sendable, Result: Sendable>(
    _ body: @escaping @MainActor @Sendable (Argument) throws -> Result
) -> @Sendable (Argument) throws -> Result {
    { argument in try MainActor.assumeIsolated { try body(argument) } }
}
