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

    private var finishedSizes: Int64 = 0

    var snapshot: (bytes: Int64, files: Int) {
        lock.lock()
        defer { lock.unlock() }
        return (bytes, files)
    }
}

/// Where the output goes: checksum lines on stdout, messages on stderr, and, when stderr is a
/// terminal, a progress bar there, redrawn at most ten times a second.
///
/// Everything is written on one serial queue, so a line never lands in the middle of the bar: the
/// bar is erased before a line or a message is written and drawn again on the next tick.
final class Display: @unchecked Sendable {
    // Safety: `timer`, `barShown` and `lastBar` are only touched on `queue`.
    private let queue = DispatchQueue(label: "futures-demo.display")
    private let meter: Meter
    private let showsBar: Bool
    private var timer: (any DispatchSourceTimer)?
    private var barShown = false
    private var lastBar = ""

    init(meter: Meter, showsBar: Bool) {
        self.meter = meter
        self.showsBar = showsBar
    }

    func start() {
        guard showsBar else { return }
        let timer = DispatchSource.makeTimerSource(queue: queue)
        timer.schedule(deadline: .now(), repeating: .milliseconds(100))
        timer.setEventHandler { [self] in drawBar() }
        queue.sync { self.timer = timer }
        timer.resume()
    }

    /// Erases the bar and stops drawing it.
    func stop() {
        queue.sync {
            timer?.cancel()
            timer = nil
            eraseBar()
        }
    }

    /// Writes a checksum line (ending in a newline) to stdout in one piece; the `errno` of a write
    /// that failed, else `nil`.
    func line(_ text: String) -> Int32? {
        queue.sync {
            eraseBar()
            return write(text, to: STDOUT_FILENO) ? nil : errno
        }
    }

    /// Writes `futures-demo: message` to stderr.
    func error(_ message: String) {
        queue.sync {
            eraseBar()
            write("futures-demo: \(message)\n", to: STDERR_FILENO)
        }
    }

    private func eraseBar() {
        guard barShown else { return }
        write("\r\u{1B}[K", to: STDERR_FILENO)
        barShown = false
        lastBar = ""
    }

    private func drawBar() {
        // Cut to the terminal's width: a line that wraps would not be erased by the next one.
        var size = winsize()
        let columns = ioctl(STDERR_FILENO, UInt(TIOCGWINSZ), &size) == 0 && size.ws_col > 0 ? Int(size.ws_col) : 80
        let bar = String(Self.bar(meter: meter, width: 24).prefix(columns - 1))
        guard bar != lastBar else { return }
        write("\r\u{1B}[K" + bar, to: STDERR_FILENO)
        barShown = true
        lastBar = bar
    }

    /// `[#########...............]  37%  1.2 GB of 3.4 GB  12/40 files  350 MB/s  0:07 left`
    static func bar(meter: Meter, width: Int) -> String {
        let (bytes, files) = meter.snapshot
        // At most 1: a file can grow while it is read.
        let fraction = min(1, meter.totalBytes > 0 ? Double(bytes) / Double(meter.totalBytes) : Double(files) / Double(max(meter.totalFiles, 1)))
        let filled = min(width, Int(fraction * Double(width)))
        let elapsed = meter.started.duration(to: .now)
        let seconds = elapsed.inSeconds
        let rate = seconds > 0 ? Double(bytes) / seconds : 0
        var text = "[" + String(repeating: "#", count: filled) + String(repeating: ".", count: width - filled) + "]"
        text += String(format: " %3d%%", Int(fraction * 100))
        text += "  \(byteCount(bytes)) of \(byteCount(meter.totalBytes))"
        text += "  \(files)/\(meter.totalFiles) files"
        text += "  \(byteCount(Int64(rate)))/s"
        if rate > 0, bytes < meter.totalBytes {
            let left = Int((Double(meter.totalBytes - bytes) / rate).rounded(.up))
            text += String(format: "  %d:%02d left", left / 60, left % 60)
        }
        return text
    }

    static func byteCount(_ bytes: Int64) -> String {
        let units = ["B", "KB", "MB", "GB", "TB"]
        var value = Double(bytes)
        var unit = 0
        while value >= 1000, unit < units.count - 1 {
            value /= 1000
            unit += 1
        }
        return unit == 0 ? "\(bytes) B" : String(format: "%.1f %@", value, units[unit])
    }
}

/// Writes all of `text` to `descriptor` (a write may be cut short by a signal or a full pipe);
/// `false` on an error, which `errno` then names.
@discardableResult
func write(_ text: String, to descriptor: Int32) -> Bool {
    var bytes = Array(text.utf8)[...]
    while !bytes.isEmpty {
        let written = bytes.withUnsafeBytes { systemWrite(descriptor, $0.baseAddress, $0.count) }
        if written < 0 {
            if errno == EINTR { continue }
            return false
        }
        bytes = bytes.dropFirst(written)
    }
    return true
}

extension Duration {
    /// The duration in seconds, as a `Double`.
    var inSeconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}
