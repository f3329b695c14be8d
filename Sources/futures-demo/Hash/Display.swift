import Dispatch
import Foundation
#if canImport(Glibc)
import Glibc
private let systemWrite = Glibc.write
#elseif canImport(Darwin)
import Darwin
private let systemWrite = Darwin.write
#endif

/// Counts the bytes and files done, from any thread.
final class Meter: @unchecked Sendable {
    // Safety: `bytes`, `files` and `finishedSizes` are only touched while holding `lock`.
    private let lock = NSLock()
    private var bytes: Int64 = 0
    private var files = 0
    private var finishedSizes: Int64 = 0
    let totalBytes: Int64
    let totalFiles: Int
    let started = ContinuousClock.now

    init(totalBytes: Int64, totalFiles: Int) {
        self.totalBytes = totalBytes
        self.totalFiles = totalFiles
    }

    func add(bytes count: Int) {
        lock.lock()
        bytes += Int64(count)
        lock.unlock()
    }

    /// A file is done, hashed or not: what was not read of it counts as done, so that the time
    /// left is not waiting for it.
    func fileDone(size: Int64) {
        lock.lock()
        files += 1
        finishedSizes += size
        bytes = min(totalBytes, max(bytes, finishedSizes))
        lock.unlock()
    }

    var snapshot: ProgressSnapshot {
        lock.lock()
        defer { lock.unlock() }
        return ProgressSnapshot(
            bytes: bytes, totalBytes: totalBytes, files: files, totalFiles: totalFiles,
            seconds: started.duration(to: .now).inSeconds
        )
    }
}


/// Where the output goes: lines on stdout, messages on stderr, and, when stderr is a terminal, a
/// progress bar there, redrawn at most ten times a second.
///
/// Lines are gathered and written a few kilobytes at a time, each write ending at the end of a line
/// and at most `PIPE_BUF` (4,096) bytes long, so that a write blocked on a full pipe never leaves
/// part of a line behind when the process is ended. What is gathered is written at the latest
/// 50 ms later, before any message, and at the end. Everything is written on one serial queue, so
/// a line never lands in the middle of the bar: the bar is erased before lines or a message are
/// written and drawn again on the next tick.
final class Display: @unchecked Sendable {
    // Safety: `timer`, `barShown`, `lastBar`, `pending`, `flushScheduled` and `writeError` are
    // only touched on `queue`.
    private let queue = DispatchQueue(label: "futures-demo.display")
    private let meter: Meter?
    private var timer: (any DispatchSourceTimer)?
    private var barShown = false
    private var lastBar = ""
    private var pending: [UInt8] = []
    private var flushScheduled = false
    private var writeError: Int32?

    /// The most written to stdout at once: a pipe takes a write up to this size whole or not at all.
    static let writeLimit = 4096

    /// `meter`: what the progress bar shows; `nil` for no bar.
    init(meter: Meter?) {
        self.meter = meter
        pending.reserveCapacity(Self.writeLimit)
    }

    func start() {
        guard meter != nil else { return }
        let timer = DispatchSource.makeTimerSource(queue: queue)
        timer.schedule(deadline: .now(), repeating: .milliseconds(100))
        timer.setEventHandler { [self] in drawBar() }
        queue.sync { self.timer = timer }
        timer.resume()
    }

    /// Writes what is gathered, erases the bar and stops drawing it; the `errno` of a write to
    /// stdout that failed, if any did.
    func stop() -> Int32? {
        queue.sync {
            timer?.cancel()
            timer = nil
            flush()
            eraseBar()
            return writeError
        }
    }

    /// Adds a line (ending in a newline) to stdout; the `errno` of a write that failed, if any did
    /// (the lines are then dropped).
    func line(_ text: [UInt8]) -> Int32? {
        text.withUnsafeBufferPointer { text in
            queue.sync {
                guard writeError == nil else { return writeError }
                if pending.count + text.count > Self.writeLimit { flush() }
                if text.count > Self.writeLimit {
                    // A line longer than a pipe takes whole: written alone.
                    eraseBar()
                    writeAll(UnsafeRawBufferPointer(text), to: STDOUT_FILENO)
                    return writeError
                }
                pending.append(contentsOf: text)
                if !flushScheduled {
                    flushScheduled = true
                    queue.asyncAfter(deadline: .now() + .milliseconds(50)) { [self] in
                        flushScheduled = false
                        flush()
                    }
                }
                return writeError
            }
        }
    }

    /// Writes `futures-demo: <message>` to stderr, after the lines gathered so far.
    func error(_ message: [UInt8]) {
        var text = Array("futures-demo: ".utf8)
        text += message
        text.append(UInt8(ascii: "\n"))
        queue.sync {
            flush()
            eraseBar()
            text.withUnsafeBytes { _ = writeAll($0, to: STDERR_FILENO) }
        }
    }

    func error(_ message: String) {
        error(Array(message.utf8))
    }

    /// Writes the gathered lines. On `queue`.
    private func flush() {
        guard !pending.isEmpty else { return }
        if writeError == nil {
            eraseBar()
            pending.withUnsafeBytes { _ = writeAll($0, to: STDOUT_FILENO) }
        }
        pending.removeAll(keepingCapacity: true)
    }

    /// Writes all of `bytes` to `descriptor`; on stdout, records a failure in `writeError`.
    @discardableResult
    private func writeAll(_ bytes: UnsafeRawBufferPointer, to descriptor: Int32) -> Bool {
        if writeBytes(bytes, to: descriptor) { return true }
        if descriptor == STDOUT_FILENO, writeError == nil { writeError = errno }
        return false
    }

    private func eraseBar() {
        guard barShown else { return }
        write("\r\u{1B}[K", to: STDERR_FILENO)
        barShown = false
        lastBar = ""
    }

    private func drawBar() {
        guard let meter else { return }
        var size = winsize()
        let columns = ioctl(STDERR_FILENO, UInt(TIOCGWINSZ), &size) == 0 && size.ws_col > 0 ? Int(size.ws_col) : 80
        let bar = ProgressBar.text(meter.snapshot, columns: columns)
        guard bar != lastBar else { return }
        write("\r\u{1B}[K" + bar, to: STDERR_FILENO)
        barShown = true
        lastBar = bar
    }
}

/// Writes all of `bytes` to `descriptor` (a write may be cut short by a signal or a full pipe);
/// `false` on an error, which `errno` then names.
func writeBytes(_ bytes: UnsafeRawBufferPointer, to descriptor: Int32) -> Bool {
    var rest = bytes
    while !rest.isEmpty {
        let written = systemWrite(descriptor, rest.baseAddress, rest.count)
        if written < 0 {
            if errno == EINTR { continue }
            return false
        }
        rest = UnsafeRawBufferPointer(rebasing: rest[written...])
    }
    return true
}

/// Writes all of `text` to `descriptor`; `false` on an error, which `errno` then names.
@discardableResult
func write(_ text: String, to descriptor: Int32) -> Bool {
    Array(text.utf8).withUnsafeBytes { writeBytes($0, to: descriptor) }
}

extension Duration {
    /// The duration in seconds, as a `Double`.
    var inSeconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}
