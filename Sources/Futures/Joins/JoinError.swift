/// The failures of a join or race whose members failed: every `(index, error)`, in input order.
///
/// ```swift
/// switch await Future.all(downloads, policy: .collectErrors).result {
/// case .failure(let join as JoinError):
///     for (index, error) in join.failures { print("download \(index): \(error)") }
/// default: break
/// }
/// ```
public struct JoinError: Error, Sendable, CustomStringConvertible {
    /// Each failed member's position in the input and its error, in input order. A member cancelled
    /// from outside the join appears with ``FutureError/cancelledMember``.
    public let failures: [(index: Int, error: any Error)]

    /// Creates a join error from member failures (sorted into input order).
    ///
    /// - Parameter failures: the failed members' indices and errors.
    public init(failures: [(index: Int, error: any Error)]) {
        self.failures = failures.sorted { $0.index < $1.index }
    }

    /// `n members failed: [index: error, ...]`.
    public var description: String {
        let list = failures.map { "\($0.index): \($0.error)" }.joined(separator: ", ")
        return "\(failures.count) member\(failures.count == 1 ? "" : "s") failed: [\(list)]"
    }
}
