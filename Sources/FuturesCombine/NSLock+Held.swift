// Built where Combine exists, or with the package trait FuturesCombine, which brings OpenCombine.
#if canImport(Combine) || FuturesCombine
import Foundation

extension NSLock {
    /// Runs `body` with the lock held: `withLock(_:)`, which Apple platforms have only from macOS 14
    /// and iOS 17.
    func withLockHeld<Result>(_ body: () throws -> Result) rethrows -> Result {
        lock()
        defer { unlock() }
        return try body()
    }
}
#endif
