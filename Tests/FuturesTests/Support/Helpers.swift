import Foundation
import FuturesTestHelpers
@testable import Futures

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An object whose lifetime a test watches through a weak reference.
final class Probe: Sendable {
    let id: Int
    init(_ id: Int = 0) { self.id = id }
}

/// A thread-safe list that callbacks append to (shared by every test target).
typealias Recorder<Element: Sendable> = FuturesTestHelpers.Recorder<Element>

/// A counter several threads increment.
final class Counter: @unchecked Sendable {
    // Safety: `value` is only touched while holding `lock`.
    private let lock = NSLock()
    private var count = 0

    @discardableResult
    func increment() -> Int {
        lock.lock()
        defer { lock.unlock() }
        count += 1
        return count
    }

    var value: Int {
        lock.lock()
        defer { lock.unlock() }
        return count
    }
}

/// A closure handed to a new thread. Each is run by one thread, once.
private final class ThreadBody: @unchecked Sendable {
    let body: () -> Void
    init(_ body: @escaping () -> Void) { self.body = body }
}

/// Runs `body` on a new thread with a 512 KiB stack (an ordinary secondary-thread stack), suspending
/// until it finishes: a recursion a million frames deep would crash it. The caller suspends instead
/// of blocking a thread of Swift concurrency's pool: a test that runs for long must leave the pool
/// to the tests beside it (the library's timers on custom clocks, for one, sleep in tasks).
func onSmallStackOffThePool(_ body: @escaping () -> Void) async {
    let body = ThreadBody(body)
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        startSmallStackThread {
            body.body()
            continuation.resume()
        }
    }
}

/// Runs `body` like `onSmallStackOffThePool(_:)` and returns what it returned.
func onSmallStackOffThePoolReturning<Result: Sendable>(_ body: @escaping () -> Result) async -> Result {
    let result = Locked<Result?>(nil)
    await onSmallStackOffThePool { result.withLock { $0 = body() } }
    return result.withLock { $0 }!
}

/// Starts a detached thread with a 512 KiB stack that runs `body`.
private func startSmallStackThread(_ body: @escaping () -> Void) {
    var attributes = pthread_attr_t()
    pthread_attr_init(&attributes)
    defer { pthread_attr_destroy(&attributes) }
    pthread_attr_setstacksize(&attributes, 512 * 1024)
    pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
    let argument = Unmanaged.passRetained(ThreadBody(body)).toOpaque()
    #if canImport(Darwin)
    var thread: pthread_t?
    let error = pthread_create(&thread, &attributes, { argument in
        Unmanaged<ThreadBody>.fromOpaque(argument).takeRetainedValue().body()
        return nil
    }, argument)
    #else
    var thread = pthread_t()
    let error = pthread_create(&thread, &attributes, { argument in
        Unmanaged<ThreadBody>.fromOpaque(argument!).takeRetainedValue().body()
        return nil
    }, argument)
    #endif
    precondition(error == 0)
}

struct TestError: Error, Equatable {
    var code = 1
}

/// A dispatch queue that knows it is current.
final class MarkedQueue: Sendable {
    let queue: DispatchQueue
    private let key = DispatchSpecificKey<UInt8>()

    init(_ label: String) {
        queue = DispatchQueue(label: label)
        queue.setSpecific(key: key, value: 1)
    }

    var isCurrent: Bool { DispatchQueue.getSpecific(key: key) != nil }
}

func isBrokenPromise<V>(_ outcome: Outcome<V>?) -> Bool {
    if case .failure(FutureError.brokenPromise) = outcome { return true }
    return false
}

func isCycle<V>(_ outcome: Outcome<V>?) -> Bool {
    if case .failure(FutureError.cycle) = outcome { return true }
    return false
}

/// Bytes of heap one iteration of `scenario` keeps, measured by `futures-leakcheck` (built with the
/// tests) in a process of its own, where no other test allocates meanwhile. `nil` when the heap
/// cannot be measured (under a sanitizer, whose allocator malloc's counters do not see).
func heapKeptPerIteration(_ scenario: String) async throws -> Int? {
    let words = try await runLeakCheck([scenario])
    guard words.count == 2, words[0] == scenario else {
        throw LeakCheckError(output: words.joined(separator: " "), status: 0)
    }
    return words[1] == "unmeasured" ? nil : Int(words[1])
}

/// Runs `futures-leakcheck` with `arguments`, off the pool; returns the words it printed.
func runLeakCheck(_ arguments: [String]) async throws -> [String] {
    let result = try await runBuiltExecutable("futures-leakcheck", arguments, standardError: .inherited)
    guard result.status == 0 else { throw LeakCheckError(output: result.output, status: result.status ?? -1) }
    return result.output.split(whereSeparator: \.isWhitespace).map(String.init)
}

struct LeakCheckError: Error {
    var output: String
    var status: Int32
}

/// The directory holding the test binary and the executables built with it.
var builtProductsDirectory: URL {
    #if canImport(Darwin)
    if let bundle = Bundle.allBundles.first(where: { $0.bundlePath.hasSuffix(".xctest") }) {
        return bundle.bundleURL.deletingLastPathComponent()
    }
    #endif
    return URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
}

/// The progress observers on `future` (user handlers, sequences and the listeners of followers).
func progressListenerCount<Value>(_ future: Future<Value>) -> Int {
    let root = future.storage.root()
    return LockTable.withLock(root) { root.progress?.observers.count ?? 0 }
}

/// How many callbacks a future's root holds.
func entryCount<Value>(_ future: Future<Value>) -> Int {
    let root = future.storage.root()
    return LockTable.withLock(root) { root.callbacks.count }
}
