import Foundation
import FuturesTestHelpers

/// Where a subprocess's standard error goes: into its output, nowhere, or to the tests' own.
enum StandardError {
    case merged, discarded, inherited
}

/// What a subprocess printed (standard output, and standard error unless discarded) and its exit
/// status: a signal's number plus 128 for a crash, and `nil` when it was killed for running past
/// its deadline.
struct SubprocessResult: Sendable {
    var status: Int32?
    var output: String
}

/// Runs a built executable (one of the helpers built with the tests) off the pool, at most as many
/// at once as the machine has cores, and kills it if it runs past `deadline`.
///
/// With `stackKiB`, every thread of the process gets a stack of that size (the limit applies to the
/// main thread and is every new thread's default size).
func runBuiltExecutable(
    _ name: String,
    _ arguments: [String],
    stackKiB: Int? = nil,
    standardError: StandardError = .merged,
    deadline: Duration = .seconds(20 * 60)
) async throws -> SubprocessResult {
    await SubprocessSlots.shared.acquire()
    defer { SubprocessSlots.shared.release() }
    let process = Process()
    let executable = builtProductsDirectory.appendingPathComponent(name).path
    if let stackKiB {
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", "ulimit -s \(stackKiB) && exec \"$0\" \"$@\"", executable] + arguments
    } else {
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
    }
    let output = Pipe()
    process.standardOutput = output
    switch standardError {
    case .merged: process.standardError = output
    case .discarded: process.standardError = FileHandle.nullDevice
    case .inherited: break
    }
    let end = ProcessEnd()
    try process.run()
    let pid = process.processIdentifier
    DispatchQueue.global().asyncAfter(deadline: .now() + Double(deadline.components.seconds)) {
        // Never once the process has exited: its number may belong to another process by now.
        end.killUnlessExited(pid)
    }
    // `waitUntilExit()`, not a termination handler: on Linux a `Process` given one is never freed
    // (LeakSanitizer reports it and what it holds).
    let finished = ProcessBox(process)
    let data = await offThePool {
        // The writing end closes when the process (and anything it started) exits or is killed.
        let data = output.fileHandleForReading.readDataToEndOfFile()
        finished.process.waitUntilExit()
        end.exited()
        return data
    }
    let text = String(decoding: data, as: UTF8.self)
    if end.wasKilled { return SubprocessResult(status: nil, output: text) }
    let status = process.terminationReason == .uncaughtSignal ? 128 + process.terminationStatus : process.terminationStatus
    return SubprocessResult(status: status, output: text)
}

/// A process handed to the thread that waits for it (which alone touches it until it has exited).
private final class ProcessBox: @unchecked Sendable {
    // Safety: the launching task hands the process over and reads it again only after the waiting
    // thread has resumed it (the continuation orders the two).
    let process: Process
    init(_ process: Process) { self.process = process }
}

/// Whether a subprocess exited, and whether the watchdog killed it first.
private final class ProcessEnd: @unchecked Sendable {
    // Safety: both flags are only touched while holding `lock`.
    private let lock = NSLock()
    private var hasExited = false
    private var killed = false

    func exited() { lock.withLock { hasExited = true } }

    func killUnlessExited(_ pid: Int32) {
        lock.withLock {
            guard !hasExited else { return }
            killed = true
            kill(pid, SIGKILL)
        }
    }

    var wasKilled: Bool { lock.withLock { killed } }
}

/// How many subprocesses may run at once: one per core. Without a bound, a parameterised test whose
/// cases each wait for a subprocess off the pool would start every case's process at once.
final class SubprocessSlots: @unchecked Sendable {
    // Safety: `free` and `waiting` are only touched while holding `lock`.
    static let shared = SubprocessSlots(max(2, ProcessInfo.processInfo.activeProcessorCount))

    private let lock = NSLock()
    private var free: Int
    private var waiting: [CheckedContinuation<Void, Never>] = []

    init(_ count: Int) { free = count }

    func acquire() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let granted = lock.withLock {
                if free > 0 {
                    free -= 1
                    return true
                }
                waiting.append(continuation)
                return false
            }
            if granted { continuation.resume() }
        }
    }

    /// Hands the slot to the first waiter, or frees it.
    func release() {
        let next = lock.withLock { () -> CheckedContinuation<Void, Never>? in
            if waiting.isEmpty {
                free += 1
                return nil
            }
            return waiting.removeFirst()
        }
        next?.resume()
    }
}
