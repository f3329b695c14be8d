/// Runs `body` with a token that is cancelled when the current task is (task → token).
///
/// ```swift
/// try await withCancellationToken { token in
///     try await legacyDownload(url, cancelledBy: token).value
/// }
/// ```
///
/// - Parameter body: the work; it receives the token.
/// - Returns: what `body` returns.
public func withCancellationToken<Result>(
    _ body: (CancellationToken) async throws -> Result
) async rethrows -> Result {
    let source = CancellationSource()
    return try await withTaskCancellationHandler {
        try await body(source.token)
    } onCancel: {
        source.cancel()
    }
}

/// Runs `operation` in a task that is cancelled when `token` is cancelled, or when the current task
/// is (token → task).
///
/// ```swift
/// let data = try await withTaskCancellation(by: screen.token) {
///     try await URLSession.shared.data(from: url).0
/// }
/// ```
///
/// The registration on the token is removed when the operation ends.
///
/// - Parameters:
///   - token: the token that cancels the operation.
///   - operation: the asynchronous work.
/// - Returns: what `operation` returns; throws what it throws (`CancellationError` if it stops on
///   cancellation).
public func withTaskCancellation<Result: Sendable>(
    by token: CancellationToken,
    _ operation: @escaping @Sendable () async throws -> Result
) async throws -> Result {
    let task = Task { try await operation() }
    let registration = token.core?.add { task.cancel() }
    defer { if let registration { token.core?.remove(registration) } }
    return try await withTaskCancellationHandler {
        try await task.value
    } onCancel: {
        task.cancel()
    }
}

extension Future {
    /// Like `Future { try await work() }`, with the task also cancelled when `token` is.
    ///
    /// - Parameters:
    ///   - token: the token that cancels the work.
    ///   - file: the file of the call, for diagnostics; leave the default.
    ///   - line: the line of the call, for diagnostics; leave the default.
    ///   - operation: the asynchronous work.
    /// - Returns: a future of the work's result.
    public static func run(
        cancelledBy token: CancellationToken,
        file: StaticString = #fileID,
        line: UInt = #line,
        _ operation: @escaping @Sendable () async throws -> Value
    ) -> Future<Value> {
        Future(file: file, line: line, operation).cancelled(by: token).made("task", file, line)
    }

    /// The form above without the call site, kept so that code naming it still compiles; a
    /// call chooses the form above.
    @_disfavoredOverload
    public static func run(
        cancelledBy token: CancellationToken,
        _ operation: @escaping @Sendable () async throws -> Value
    ) -> Future<Value> {
        Future(operation).cancelled(by: token)
    }
}
