import Dispatch
import Futures
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Prints the pending futures as a tree to standard error on SIGQUIT (Ctrl-\), and goes on, as a
/// JVM prints its threads. Tracking is turned on first, so that the tree has futures to show.
///
/// The signal is noted as for Ctrl-C (see ``Interrupt``): on Linux a handler writes a byte to a
/// pipe that a dispatch source reads, on Darwin a dispatch signal source sees it.
final class QuitDump {
    private let queue = DispatchQueue(label: "futures-demo.quit-dump")
    // Kept for the life of the process; a dispatch source may be used from any thread.
    private let source: (any DispatchSourceProtocol)?

    init() {
        FutureDiagnostics.startTracking()
        source = Self.listen(on: queue)
        guard let source else { return }
        source.setEventHandler {
            Self.drain()
            let tree = Array(FutureDiagnostics.dumpPending().utf8)
            tree.withUnsafeBytes { bytes in
                var offset = 0
                while offset < bytes.count {
                    let count = write(STDERR_FILENO, bytes.baseAddress! + offset, bytes.count - offset)
                    if count < 0, errno == EINTR { continue }
                    if count <= 0 { break }
                    offset += count
                }
            }
        }
        source.resume()
    }

    #if os(Linux)
    private static func listen(on queue: DispatchQueue) -> (any DispatchSourceProtocol)? {
        var ends: [Int32] = [-1, -1]
        guard pipe(&ends) == 0 else { return nil }
        for end in ends {
            _ = fcntl(end, F_SETFD, FD_CLOEXEC)
            _ = fcntl(end, F_SETFL, O_NONBLOCK)
        }
        quitPipe = (ends[0], ends[1])
        signal(SIGQUIT, noteQuit)
        return DispatchSource.makeReadSource(fileDescriptor: ends[0], queue: queue)
    }

    /// Empties the pipe, so that the source fires again only on a new signal.
    private static func drain() {
        var bytes = (UInt64(0), UInt64(0))
        while withUnsafeMutableBytes(of: &bytes, { read(quitPipe.read, $0.baseAddress, $0.count) }) > 0 {}
    }
    #else
    private static func listen(on queue: DispatchQueue) -> (any DispatchSourceProtocol)? {
        signal(SIGQUIT, SIG_IGN)
        return DispatchSource.makeSignalSource(signal: SIGQUIT, queue: queue)
    }

    private static func drain() {}
    #endif
}

#if os(Linux)
/// The pipe the SIGQUIT handler writes to: set before the handler is installed, never changed after.
private nonisolated(unsafe) var quitPipe: (read: Int32, write: Int32) = (-1, -1)

/// The SIGQUIT handler: only async-signal-safe calls (one non-blocking `write`), and `errno` as it was.
private func noteQuit(_: Int32) {
    let saved = errno
    var byte: UInt8 = 1
    _ = write(quitPipe.write, &byte, 1)
    errno = saved
}
#endif
