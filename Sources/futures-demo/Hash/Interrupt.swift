import Dispatch
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Calls `handler` on SIGINT (Ctrl-C) instead of ending the process, on a queue of its own (not the
/// shared pool, which busy hashing may fill). Should the run not end within a quarter of a second
/// after that (it is blocked writing to a pipe nobody reads), the process exits with status 130 on
/// its own; a blocked write of a line up to 4,096 bytes (`PIPE_BUF`) has written nothing, so no
/// partial line is left. If SIGINT was ignored when the tool started, it stays ignored.
///
/// On Linux the signal is caught by a handler that writes one byte to a pipe, and a dispatch source
/// reads the pipe: with SIGINT ignored and a dispatch signal source alone, a Ctrl-C was lost now
/// and then on a busy machine (the run went on to the end), while a handler of the process's own
/// runs on whichever thread takes the signal. On Darwin, kqueue sees a signal even when it is
/// ignored, so a dispatch signal source is enough.
final class Interrupt: @unchecked Sendable {
    // Safety: `source` is set once in `init`; a dispatch source may be used from any thread.
    // `ended` is only touched on `queue`.
    private var source: (any DispatchSourceProtocol)?
    private var ended = false
    private let queue = DispatchQueue(label: "futures-demo.interrupt")

    init(_ handler: @escaping @Sendable () -> Void) {
        guard let source = Self.listen(on: queue) else { return }
        source.setEventHandler { [self] in
            Self.drain()
            handler()
            queue.asyncAfter(deadline: .now() + .milliseconds(250)) { [self] in
                guard !ended else { return }
                // The message only if stderr can take it now: it may be the full pipe that stopped
                // the run, and the exit must not wait for it.
                var pollable = pollfd(fd: STDERR_FILENO, events: Int16(POLLOUT), revents: 0)
                if poll(&pollable, 1, 0) == 1 { _ = write("futures-demo: interrupted\n", to: STDERR_FILENO) }
                _exit(130)
            }
        }
        source.resume()
        self.source = source
    }

    /// Stops listening, once; a later SIGINT ends the process as usual.
    func end() {
        guard let source, queue.sync(execute: { defer { ended = true }; return !ended }) else { return }
        signal(SIGINT, SIG_DFL)
        source.cancel()
    }

    #if os(Linux)
    /// Installs the handler and returns a source that fires when it has run, or `nil` if SIGINT
    /// was ignored (it stays ignored) or no pipe could be made (Ctrl-C then ends the process as
    /// usual).
    private static func listen(on queue: DispatchQueue) -> (any DispatchSourceProtocol)? {
        // Ignored while the pipe is made (as it stays, if it was ignored already).
        let previous = signal(SIGINT, SIG_IGN)
        guard unsafeBitCast(previous, to: Int.self) != unsafeBitCast(SIG_IGN, to: Int.self) else { return nil }
        var ends: [Int32] = [-1, -1]
        guard pipe(&ends) == 0 else {
            signal(SIGINT, SIG_DFL)
            return nil
        }
        for end in ends {
            _ = fcntl(end, F_SETFD, FD_CLOEXEC)
            _ = fcntl(end, F_SETFL, O_NONBLOCK)
        }
        // Both ends stay open for the life of the process: a handler may still be running on
        // another thread after `end()`, and must never write to a descriptor reused since.
        interruptPipe = (ends[0], ends[1])
        signal(SIGINT, noteInterrupt)
        return DispatchSource.makeReadSource(fileDescriptor: ends[0], queue: queue)
    }

    /// Empties the pipe, so that the source fires again only on a new signal.
    private static func drain() {
        var bytes = (UInt64(0), UInt64(0))
        while withUnsafeMutableBytes(of: &bytes, { read(interruptPipe.read, $0.baseAddress, $0.count) }) > 0 {}
    }
    #else
    private static func listen(on queue: DispatchQueue) -> (any DispatchSourceProtocol)? {
        let previous = signal(SIGINT, SIG_IGN)
        guard unsafeBitCast(previous, to: Int.self) != unsafeBitCast(SIG_IGN, to: Int.self) else { return nil }
        return DispatchSource.makeSignalSource(signal: SIGINT, queue: queue)
    }

    private static func drain() {}
    #endif
}

#if os(Linux)
/// The pipe the SIGINT handler writes to: set before the handler is installed, never changed after.
private nonisolated(unsafe) var interruptPipe: (read: Int32, write: Int32) = (-1, -1)

/// The SIGINT handler: only async-signal-safe calls (one non-blocking `write`), and `errno` as it was.
private func noteInterrupt(_: Int32) {
    let saved = errno
    var byte: UInt8 = 1
    _ = write(interruptPipe.write, &byte, 1)
    errno = saved
}
#endif
