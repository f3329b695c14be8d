import Dispatch
import Foundation
import Futures
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One run of `futures-demo hash`.
///
/// Every file becomes a future from a `FutureQueue` that runs `jobs` at a time; each is cancellable
/// by one `CancellationSource`, which Ctrl-C fires. The lines are printed in input order as the
/// futures complete, so a file that finishes early waits for the ones before it. Futures are made
/// only a few `jobs` ahead of the line being printed, so a run over many files keeps little.
struct HashJob {
    let paths: [String]
    let jobs: Int
    let timeout: Duration?

    func run() async -> Int32 {
        let stop = CancellationSource()
        // Listening for Ctrl-C first: from here on it cancels the run instead of killing it.
        let interrupt = Interrupt { _ = stop.cancel() }
        defer { interrupt.end() }

        let inputs = FileList.inputs(of: paths)
        let fileCount = inputs.reduce(0) { count, input in if case .file = input { count + 1 } else { count } }
        let meter = Meter(totalBytes: inputs.reduce(0) { total, input in
            if case .file(_, _, let size) = input { total + size } else { total }
        }, totalFiles: fileCount)
        let display = Display(meter: meter, showsBar: isatty(STDERR_FILENO) != 0)
        let queue = FutureQueue(maxConcurrent: jobs)
        let timeout = self.timeout

        func hash(_ input: HashInput) -> Future<String>? {
            guard case .file(_, let path, let size) = input else { return nil }
            return queue.add {
                // Nothing queued starts once the run is cancelled (the queue may be starting this
                // one as the cancellation reaches it).
                if stop.token.isCancelled { return .cancelled }
                let hash = sha256(ofFileAt: path) { meter.add(bytes: $0) }
                guard let timeout else { return hash }
                return hash.timeout(after: timeout)
            }
            .cancellable(by: stop.token)
            .always(on: .immediate) { _ in meter.fileDone(size: size) }
        }

        let window = max(2 * jobs, 16)
        var pending: [Int: Future<String>] = [:]
        var scheduledUpTo = 0
        var failed = 0
        var hashed = 0

        func interrupted() -> Int32 {
            interrupt.end()  // before the message, so that the backstop does not print one too
            display.stop()
            display.error("interrupted: \(hashed) of \(fileCount) files hashed, the rest cancelled")
            return 130
        }

        display.start()
        for (index, input) in inputs.enumerated() {
            while scheduledUpTo < min(inputs.count, index + window) {
                pending[scheduledUpTo] = hash(inputs[scheduledUpTo])
                scheduledUpTo += 1
            }
            if stop.token.isCancelled { return interrupted() }
            guard let future = pending.removeValue(forKey: index) else {
                display.error("\(input.display): \(input.reason)")
                failed += 1
                continue
            }
            // A future that is complete already is read without suspending.
            switch await future.result {
            case .success(let hex):
                if let error = display.line(checksumLine(hex: hex, name: input.display)) {
                    display.stop()
                    display.error("write error: \(String(cString: strerror(error)))")
                    return 1
                }
                hashed += 1
            case .failure(FutureError.timedOut):
                display.error("\(input.display): timed out after \(timeoutText)")
                failed += 1
            case .failure(let error):
                display.error("\(input.display): \(error)")
                failed += 1
            case .cancelled:
                // Only Ctrl-C cancels.
                return interrupted()
            }
        }
        display.stop()
        return failed == 0 ? 0 : 1
    }

    private var timeoutText: String {
        guard let timeout else { return "" }
        return "\(timeout.inSeconds.formatted()) s"
    }
}

extension HashInput {
    /// Why an unreadable input was not listed.
    var reason: String {
        if case .unreadable(_, let reason) = self { reason } else { "" }
    }
}

/// Calls `handler` on the first SIGINT (Ctrl-C) instead of ending the process, on a queue of its
/// own (not the shared pool, which busy hashing may fill). Should the run not end within a quarter
/// of a second after that (it is blocked writing to a pipe nobody reads), the process exits with
/// status 130 on its own; a blocked write of a line up to 4,096 bytes (`PIPE_BUF`) has written
/// nothing, so no partial line is left. If SIGINT was ignored when the tool started, it stays
/// ignored.
final class Interrupt: @unchecked Sendable {
    // Safety: `source` is set once in `init`; a dispatch source may be used from any thread.
    // `ended` is only touched on `queue`.
    private var source: (any DispatchSourceSignal)?
    private var ended = false
    private let queue = DispatchQueue(label: "futures-demo.interrupt")

    init(_ handler: @escaping @Sendable () -> Void) {
        let previous = signal(SIGINT, SIG_IGN)
        guard unsafeBitCast(previous, to: Int.self) != unsafeBitCast(SIG_IGN, to: Int.self) else { return }
        let source = DispatchSource.makeSignalSource(signal: SIGINT, queue: queue)
        source.setEventHandler { [self] in
            handler()
            queue.asyncAfter(deadline: .now() + .milliseconds(250)) { [self] in
                guard !ended else { return }
                // The message only if stderr can take it now: it may be the full pipe that stopped
                // the run, and the exit must not wait for it.
                var pollable = pollfd(fd: STDERR_FILENO, events: Int16(POLLOUT), revents: 0)
                if poll(&pollable, 1, 0) == 1 { write("futures-demo: interrupted\n", to: STDERR_FILENO) }
                _exit(130)
            }
        }
        source.resume()
        self.source = source
    }

    /// Stops listening, once; a later SIGINT ends the process as usual.
    func end() {
        guard let source, queue.sync(execute: { defer { ended = true }; return !ended }) else { return }
        source.cancel()
        signal(SIGINT, SIG_DFL)
    }
}
