// Built with the package trait FuturesTracing, which brings swift-distributed-tracing; without it
// the module is empty.
#if FuturesTracing
import Futures
import Tracing

extension Future {
    /// Starts a span around the future that `body` returns: it ends when that future completes.
    ///
    /// ```swift
    /// let user = Future.withSpan("load user") { span in
    ///     loadUser(id: 42)
    /// }
    /// ```
    ///
    /// The span is a child of the current `ServiceContext` (a root span without one), and its
    /// context is current inside `body`: spans started there, and, once `FuturesTracing.bootstrap()`
    /// has run, spans started in the callbacks registered there, are its children. When the future
    /// completes, a failure is recorded on the span (`recordError`), and a cancellation sets the
    /// attribute `future.cancelled` to `true`; then the span ends. A future that can never
    /// complete (`Future.never`, or one rooted in it) ends the span when it lets go of its
    /// callback, with the attribute `future.abandoned` set to `true`.
    ///
    /// The span observes the future and does not consume it: the result is the future `body`
    /// returned, and cancelling it is the same as cancelling that future. Nor does it start it: a
    /// `Future.deferred` stays deferred until something else needs it (one that never starts ends
    /// the span, marked `future.abandoned`, when it is released).
    ///
    /// - Parameters:
    ///   - operationName: the span's name.
    ///   - kind: the span's kind.
    ///   - function: the function that starts the span, for the tracer; leave the default.
    ///   - fileID: the file that starts the span, for the tracer; leave the default.
    ///   - line: the line that starts the span, for the tracer; leave the default.
    ///   - body: runs at once, with the span, and returns the future to trace; an error it throws
    ///     is recorded and fails the result.
    /// - Returns: the future `body` returned (a failed one if it threw).
    public static func withSpan(
        _ operationName: String,
        ofKind kind: SpanKind = .internal,
        function: String = #function,
        file fileID: String = #fileID,
        line: UInt = #line,
        _ body: (any Span) throws -> Future<Value>
    ) -> Future<Value> {
        let span = startSpan(operationName, ofKind: kind, function: function, file: fileID, line: line)
        let future: Future<Value>
        do {
            future = try ServiceContext.withValue(span.context) { try body(span) }
        } catch {
            future = Future(error: error)
        }
        let ending = SpanEnding(span)
        // An observer that does not start a deferred future: the span waits for a real consumer.
        future.whenCompleteWithoutStarting { outcome in ending.end(with: outcome) }
        return future
    }
}

/// Ends a span when the traced future completes, or, if that never happens (the future is
/// `never`, or rooted in it, and its callback is dropped unrun), when the callback is released:
/// a span is never left open.
///
/// `@unchecked Sendable`: `ended` is written only by `end(with:)`, which the one callback that
/// holds this object calls at most once, and read only by `deinit`, which runs after that
/// callback released its reference (the release orders the write before the deinit's read).
private final class SpanEnding: @unchecked Sendable {
    private let span: any Span
    private var ended = false

    init(_ span: any Span) { self.span = span }

    func end<Value>(with outcome: Outcome<Value>) {
        switch outcome {
        case .success: break
        case .failure(let error): span.recordError(error)
        case .cancelled: span.attributes["future.cancelled"] = true
        }
        ended = true
        span.end()
    }

    deinit {
        guard !ended else { return }
        span.attributes["future.abandoned"] = true
        span.end()
    }
}
#endif
