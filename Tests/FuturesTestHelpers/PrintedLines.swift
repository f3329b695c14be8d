import Foundation

/// What a documentation example prints. A test gives the example a local `print` that records each
/// line here instead of writing it to the test log, then checks the lines:
///
///     let printed = PrintedLines()
///     @Sendable func print(_ items: any Sendable...) { printed.record(items) }
///
/// Callbacks print on their executors, after the future the test awaits may have completed, so the
/// checks wait for the lines they expect.
public final class PrintedLines: @unchecked Sendable {
    // Safety: `lines` and `waiters` are only touched while holding `lock`; continuations are resumed
    // after it is released, each once, because each is taken out of `waiters` under the lock.
    private let lock = NSLock()
    private var lines: [String] = []
    private var waiters: [(ready: @Sendable ([String]) -> Bool, continuation: CheckedContinuation<[String], Never>)] = []

    public init() {}

    /// Records one line, `items` joined as `print` joins them.
    public func record(_ items: [any Sendable], separator: String = " ") {
        let line = items.map { "\($0)" }.joined(separator: separator)
        lock.lock()
        lines.append(line)
        let snapshot = lines
        let ready = waiters.filter { $0.ready(snapshot) }
        waiters.removeAll { $0.ready(snapshot) }
        lock.unlock()
        for waiter in ready { waiter.continuation.resume(returning: snapshot) }
    }

    /// The lines printed so far.
    public var all: [String] {
        lock.lock()
        defer { lock.unlock() }
        return lines
    }

    /// Waits until the lines printed satisfy `ready`, and returns them.
    public func when(_ ready: @escaping @Sendable ([String]) -> Bool) async -> [String] {
        await withCheckedContinuation { continuation in
            lock.lock()
            if ready(lines) {
                let snapshot = lines
                lock.unlock()
                continuation.resume(returning: snapshot)
            } else {
                waiters.append((ready, continuation))
                lock.unlock()
            }
        }
    }

    /// Waits until at least `count` lines were printed, and returns the lines printed by then.
    public func first(_ count: Int) async -> [String] {
        await when { $0.count >= count }
    }

    /// Waits until `line` is printed (a line that never comes keeps the test waiting).
    public func contains(_ line: String) async -> Bool {
        await when { $0.contains(line) }.contains(line)
    }
}
