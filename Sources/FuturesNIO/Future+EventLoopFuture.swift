// Built with the package trait FuturesNIO, which brings SwiftNIO; without it the module is empty.
#if FuturesNIO
import Futures
import NIOCore

extension Future {
    /// A future that completes when `eventLoopFuture` does, with its value or its error.
    ///
    /// ```swift
    /// let greeting = Future(loop.makeSucceededFuture("hello"))
    /// let shout = greeting.map(on: .eventLoop(loop)) { $0.uppercased() }
    /// ```
    ///
    /// An error that means cancellation (`CancellationError`, or one that is
    /// `CancellationIndicating`) makes the future `.cancelled`, as it
    /// does everywhere in the library. SwiftNIO has no cancellation, so cancelling the returned
    /// future ends only the future: the work behind `eventLoopFuture` goes on.
    ///
    /// - Parameters:
    ///   - eventLoopFuture: the SwiftNIO future to follow.
    ///   - file: where the future is made, for `FutureError.brokenPromise(file:line:)` if
    ///     the source is released without completing it; leave the default.
    ///   - line: the line of `file`; leave the default.
    @inlinable
    public init(_ eventLoopFuture: EventLoopFuture<Value>, file: StaticString = #fileID, line: UInt = #line) {
        let promise = Promise<Value>(file: file, line: line)
        self = promise.future
        eventLoopFuture.whenComplete { result in
            _ = promise.complete(with: result)
        }
    }

    /// An `EventLoopFuture` on `eventLoop` that completes when this future does.
    ///
    /// ```swift
    /// let total: EventLoopFuture<Int> = countRows().eventLoopFuture(on: channel.eventLoop)
    /// ```
    ///
    /// The `EventLoopFuture` succeeds with the value or fails with the error; a
    /// `.cancelled` outcome fails it with `CancellationError`, since SwiftNIO has no
    /// cancelled state. Its callbacks run on `eventLoop`, as SwiftNIO's always do.
    ///
    /// The conversion is one of this future's consumers, like a task awaiting it: this future is not
    /// cancelled because its other consumers withdrew while the `EventLoopFuture` still waits for it.
    /// It never withdraws, so each conversion of a pending future keeps a small registration on it
    /// until it completes, even if the `EventLoopFuture` is dropped: convert a long-lived future once
    /// and share the result.
    ///
    /// The loop must outlive the future: on a loop that has shut down, the `EventLoopFuture` never
    /// completes (SwiftNIO drops the work, and its debug builds report the promise as leaked), as
    /// with any promise of a shut-down loop.
    ///
    /// A future that never completes (`Future.never`, or one derived from it) gives an
    /// `EventLoopFuture` that never completes either; SwiftNIO's debug builds report such a promise
    /// when it is dropped, naming the call that made it.
    ///
    /// - Parameters:
    ///   - eventLoop: the loop the returned future belongs to.
    ///   - file: where the conversion is made, for SwiftNIO's report of a promise dropped before it
    ///     completed; leave the default.
    ///   - line: the line of `file`; leave the default.
    /// - Returns: a future of the same outcome on `eventLoop`.
    @inlinable
    public func eventLoopFuture(
        on eventLoop: any EventLoop, file: StaticString = #fileID, line: UInt = #line
    ) -> EventLoopFuture<Value> {
        if let outcome {
            return eventLoop.makeCompletedFuture(outcome.result)
        }
        let promise = eventLoop.makePromise(of: Value.self, file: file, line: line)
        // A derived future is a consumer that never withdraws; its callback hands the outcome over
        // on whichever thread completes it, and NIO moves it to the loop.
        consumer().whenComplete(on: .immediate) { outcome in
            promise.completeWith(outcome.result)
        }
        return promise.futureResult
    }
}
#endif
