// Built with the package trait FuturesNIO, which brings SwiftNIO; without it the module is empty.
#if FuturesNIO
import Futures
import NIOCore

/// Runs callbacks on a SwiftNIO event loop (`Executor.eventLoop(_:)`).
///
/// A callback given `on: .eventLoop(loop)` runs on `loop`'s thread, where it may touch the state of
/// the loop's channels and handlers; `.current` inside it resolves to the same loop, so a chain
/// started there stays there.
///
/// ```swift
/// let shout = Future(loop.makeSucceededFuture("hello"))
///     .map(on: .eventLoop(loop)) { $0.uppercased() }
/// ```
///
/// Like every executor but `.immediate` and `.mainImmediate`, it never runs a callback inside the
/// call that registers it, not even on the loop's own thread: the callback is queued behind the
/// loop's current task. A loop that has shut down drops what it is given (SwiftNIO's own
/// `execute(_:)` does the same), so shut a loop down only after the futures using it are done.
public struct EventLoopExecutor: Executor {
    /// The loop callbacks run on.
    public let eventLoop: any EventLoop

    /// Creates an executor for `eventLoop`; prefer `Executor.eventLoop(_:)`.
    @inlinable
    public init(_ eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
    }

    /// Queues `work` on the loop.
    @inlinable
    public func execute(_ work: @escaping @Sendable () -> Void) {
        eventLoop.execute(work)
    }
}

extension Executor where Self == EventLoopExecutor {
    /// On the SwiftNIO event loop `loop`.
    @inlinable
    public static func eventLoop(_ loop: any EventLoop) -> EventLoopExecutor {
        EventLoopExecutor(loop)
    }
}
#endif
