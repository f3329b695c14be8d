import Foundation

/// Runs `body` on a thread of its own and returns what it returned, suspending meanwhile.
///
/// A test that blocks (on a semaphore, on a subprocess, on heavy work) must not block a thread of
/// Swift concurrency's pool: the pool has as many threads as the machine has cores, and the tests
/// beside it (the library's timers on custom clocks, for one, which sleep in tasks) would wait for
/// as long as it blocks, minutes under a sanitizer.
public func offThePool<Result: Sendable>(_ body: @escaping @Sendable () -> Result) async -> Result {
    await withCheckedContinuation { continuation in
        let thread = Thread { continuation.resume(returning: body()) }
        thread.stackSize = 4 << 20
        thread.start()
    }
}
