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
