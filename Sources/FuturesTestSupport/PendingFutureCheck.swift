import Futures

/// Thrown by ``expectNoPendingFutures(_:)`` when the body left futures it made pending.
public struct PendingFuturesLeft: Error, CustomStringConvertible {
    /// The futures made by the body that were still pending when it returned, oldest first.
    public let futures: [PendingFuture]
    /// Those futures as a tree (see `FutureDiagnostics.dumpPending()`).
    public let tree: String

    /// What was left pending, as a tree.
    public var description: String { "futures left pending:\n" + tree }
}

/// Runs `body` and throws ``PendingFuturesLeft`` if a future it made is still pending when it
/// returns.
///
/// It turns tracking on (see `FutureDiagnostics.startTracking()`) and leaves it on. Only the
/// futures made inside `body` (and in tasks it starts, which inherit the scope) count, so tests
/// running in parallel do not see each other's futures.
///
/// ```swift
/// @Test func loadsThePicture() throws {
///     try expectNoPendingFutures {
///         let promise = Promise<Int>()
///         let doubled = promise.future.map(on: .immediate) { $0 * 2 }
///         promise.succeed(21)
///         #expect(doubled.outcome == .success(42))
///     }
/// }
/// ```
///
/// - Parameter body: the code under test.
/// - Returns: what `body` returns.
@discardableResult
public func expectNoPendingFutures<R>(_ body: () throws -> R) throws -> R {
    FutureDiagnostics.startTracking()
    let scope = FutureDiagnostics.Scope()
    let result = try scope.run(body)
    try check(scope)
    return result
}

/// ``expectNoPendingFutures(_:)`` for an asynchronous body.
///
/// - Parameters:
///   - isolation: the caller's isolation, kept while `body` runs.
///   - body: the code under test.
/// - Returns: what `body` returns.
@discardableResult
public func expectNoPendingFutures<R: Sendable>(
    isolation: isolated (any Actor)? = #isolation,
    _ body: () async throws -> R
) async throws -> R {
    FutureDiagnostics.startTracking()
    let scope = FutureDiagnostics.Scope()
    let result = try await scope.run(isolation: isolation, body)
    try check(scope)
    return result
}

private func check(_ scope: FutureDiagnostics.Scope) throws {
    let left = scope.pendingFutures
    if !left.isEmpty { throw PendingFuturesLeft(futures: left, tree: scope.dumpPending()) }
}
