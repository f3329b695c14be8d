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
/// futures complete, so a file that finishes early waits for the ones before it.
struct HashJob {
    let paths: [String]
    let jobs: Int
    let timeout: Duration?

    func run() async -> Int32 {
        let inputs = FileList.inputs(of: paths)
        let meter = Meter(totalBytes: inputs.reduce(0) { total, input in
            if case .file(_, _, let size) = input { total + size } else { total }
        }, totalFiles: inputs.count)
        let display = Display(meter: meter, showsBar: isatty(STDERR_FILENO) != 0)

        let stop = CancellationSource()
        let interrupt = Interrupt { _ = stop.cancel() }
        let queue = FutureQueue(maxConcurrent: jobs)
        let timeout = self.timeout
        let hashes: [Future<String>?] = inputs.map { input in
            guard case .file(_, let path, let size) = input else { return nil }
            return queue.add {
                // Nothing queued starts once the run is cancelled (the queue may be starting this
                // one as the cancellation reaches it).
                if stop.token.isCancelled { return .cancelled }
                let hash = sha256(ofFileAt: path, size: size) { meter.add(bytes: $0) }
                guard let timeout else { return hash }
                return hash.timeout(after: timeout)
            }
            .cancellable(by: stop.token)
            .always(on: .immediate) { _ in meter.fileDone(size: size) }
        }

        display.start()
        var failed = 0
        var hashed = 0
        for (input, hash) in zip(inputs, hashes) {
            guard let hash else {
                display.error("\(input.display): \(input.reason)")
                failed += 1
                continue
            }
            switch await hash.result {
            case .success(let hex):
                display.line(checksumLine(hex: hex, name: input.display))
                hashed += 1
            case .failure(FutureError.timedOut):
                display.error("\(input.display): timed out after \(timeoutText)")
                failed += 1
            case .failure(let error):
                display.error("\(input.display): \(error)")
                failed += 1
            case .cancelled:
                // Only Ctrl-C cancels: stop printing at once.
                let files = inputs.filter { if case .file = $0 { true } else { false } }.count
                display.stop()
                display.error("interrupted: \(hashed) of \(files) files hashed, the rest cancelled")
                interrupt.end()
                return 130
            }
        }
        display.stop()
        interrupt.end()
        return failed == 0 ? 0 : 1
    }

    private var timeoutText: String {
        guard let timeout else { return "" }
        let seconds = Double(timeout.components.seconds) + Double(timeout.components.attoseconds) / 1e18
        return "\(seconds.formatted()) s"
    }
}

extension HashInput {
    /// Why an unreadable input was not listed.
    var reason: String {
        if case .unreadable(_, let reason) = self { reason } else { "" }
    }
}

/// Calls `handler` once on the first SIGINT (Ctrl-C), on a background queue, instead of ending the
/// process.
final class Interrupt: @unchecked Sendable {
    // Safety: `source` is set once in `init`; a dispatch source may be used from any thread.
    private let source: any DispatchSourceSignal

    init(_ handler: @escaping @Sendable () -> Void) {
        signal(SIGINT, SIG_IGN)
        source = DispatchSource.makeSignalSource(signal: SIGINT, queue: .global())
        source.setEventHandler(handler: handler)
        source.resume()
    }

    /// Stops listening; a later SIGINT ends the process as usual.
    func end() {
        source.cancel()
        signal(SIGINT, SIG_DFL)
    }
}
