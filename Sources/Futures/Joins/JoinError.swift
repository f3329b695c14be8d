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
    public var failures: [(index: Int, error: any Error)] { list.failures }

    /// The failures, in a box of their own: a join of joins fails with a join error that holds the
    /// member's join error, and so on down, and the box frees such a nest in a loop.
    private let list: FailureList

    /// Creates a join error from member failures (sorted into input order).
    ///
    /// - Parameter failures: the failed members' indices and errors.
    public init(failures: [(index: Int, error: any Error)]) {
        list = FailureList(failures.sorted { $0.index < $1.index })
    }

    /// How many failures ``description`` lists before it only counts the rest.
    static let describedFailures = 10

    /// `n members failed: [index: error, ...]`, listing the first ten failures and counting the
    /// rest, and describing a nested join error the same way, so that the text stays short however
    /// many members failed.
    public var description: String {
        let failures = failures
        var list = failures.prefix(Self.describedFailures).map { "\($0.index): \(Self.brief($0.error))" }
        if failures.count > Self.describedFailures { list.append("and \(failures.count - Self.describedFailures) more") }
        return "\(failures.count) member\(failures.count == 1 ? "" : "s") failed: [\(list.joined(separator: ", "))]"
    }

    /// An error's description for a list; a nested join error only counts its failures, so that a
    /// nest of joins does not describe itself level by level.
    private static func brief(_ error: any Error) -> String {
        if let nested = error as? JoinError {
            return "JoinError(\(nested.failures.count) member\(nested.failures.count == 1 ? "" : "s") failed)"
        }
        return String(describing: error)
    }
}

/// The failures of a ``JoinError``.
private final class FailureList: @unchecked Sendable {
    // Safety: `failures` is written in `init` and moved out in `deinit` only, when no other
    // reference to the list exists; in between it is only read.
    private(set) var failures: [(index: Int, error: any Error)]

    init(_ failures: [(index: Int, error: any Error)]) { self.failures = failures }

    deinit {
        // A member's error may be a join error whose list holds the next, and so on: free them in
        // a loop, not by recursion.
        guard !failures.isEmpty else { return }
        DeferredRelease.release {
            var taken: [(index: Int, error: any Error)] = []
            swap(&taken, &failures)
            return taken as Any
        }
    }
}
