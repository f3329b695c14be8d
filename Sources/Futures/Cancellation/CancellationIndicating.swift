import Foundation

/// An error that may mean the work was cancelled rather than that it failed.
///
/// A future that fails with such an error, or whose closure throws one, ends ``Outcome/cancelled``
/// when ``indicatesCancellation`` is `true`, exactly as with `CancellationError`: failure handlers
/// do not see it, cancellation handlers do. `URLError` (code `.cancelled`) and `CocoaError`
/// (code `.userCancelled`) conform, and an `NSError` with the same domain and code counts too, so a
/// wrapped network request or file coordination that was cancelled ends cancelled, not failed.
///
/// ```swift
/// enum DownloadError: Error, CancellationIndicating {
///     case aborted, corrupt
///     var indicatesCancellation: Bool { self == .aborted }
/// }
///
/// let download = Future<Data>(error: DownloadError.aborted)
/// // download.outcome is .cancelled
/// ```
public protocol CancellationIndicating: Error {
    /// Whether this error means the work was cancelled.
    var indicatesCancellation: Bool { get }
}

extension URLError: CancellationIndicating {
    /// `true` for `URLError.cancelled`.
    public var indicatesCancellation: Bool { code == .cancelled }
}

extension CocoaError: CancellationIndicating {
    /// `true` for `CocoaError.userCancelled`.
    public var indicatesCancellation: Bool { code == .userCancelled }
}

/// Whether `error` means cancellation: a `CancellationError`, or a ``CancellationIndicating`` error
/// that says so.
/// An `NSError` (as errors from Objective-C APIs arrive) counts by its domain and code.
@usableFromInline
func indicatesCancellation(_ error: any Error) -> Bool {
    if error is CancellationError { return true }
    if let indicating = error as? any CancellationIndicating { return indicating.indicatesCancellation }
    // A metatype test, so that a Swift error is not bridged (boxed) into an `NSError` to find out.
    guard type(of: error) is NSError.Type else { return false }
    let nsError = unsafeDowncast(error as AnyObject, to: NSError.self)
    switch nsError.domain {
    case NSURLErrorDomain: return nsError.code == NSURLErrorCancelled
    case NSCocoaErrorDomain: return nsError.code == CocoaError.userCancelled.rawValue
    default: return false
    }
}
