import Dispatch
import Foundation
import Futures
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One run of `futures-demo hash`: hashing a list of files, or checking them against a list of
/// digests (`--check`).
///
/// Every file becomes a future from a `FutureQueue` that runs `jobs` at a time; each is cancellable
/// by one `CancellationSource`, which Ctrl-C fires. The lines are printed in input order as the
/// futures complete, so a file that finishes early waits for the ones before it. Files are found
/// (by a ``TreeWalk``) and their futures made only a few `jobs` ahead of the line being printed,
/// so a run over many files keeps little. On a terminal, a first walk counts the files and bytes
/// for the progress bar. A `--check` list is read whole.
struct HashJob {
    enum Mode {
        /// Hash the files under these paths (as bytes).
        case hash(paths: [[UInt8]])
        /// Check the files listed in this file (`-`: standard input).
        case check(list: [UInt8])
    }

    let mode: Mode
    let jobs: Int
    let timeout: Duration?

    func run() async -> Int32 {
        let stop = CancellationSource()
        // Listening for Ctrl-C first: from here on it cancels the run instead of killing it.
        let interrupt = Interrupt { _ = stop.cancel() }
        defer { interrupt.end() }
        // Ctrl-\ prints what is still pending (a read that waits on a FIFO nobody writes, say).
        let quitDump = QuitDump()
        defer { withExtendedLifetime(quitDump) {} }
        let showsBar = isatty(STDERR_FILENO) != 0

        // What to hash: a walk for paths, which finds the files as the window below moves on;
        // the whole list for `--check`.
        var nextInput: () -> HashInput?
        var fileCount: Int?  // known once the walk has ended, or for a list
        var totalBytes: Int64 = 0
        var improperLines = 0
        var listName: [UInt8] = []
        switch mode {
        case .hash(let paths):
            if showsBar {
                // The bar's totals: a first walk counts the files and bytes, reading no file.
                var count = TreeWalk(roots: paths, wantsSizes: true)
                var files = 0
                while let item = count.next() {
                    if stop.token.isCancelled {
                        interrupt.end()
                        Display(meter: nil).error("interrupted: 0 of at least \(files) files hashed, the rest cancelled")
                        return 130
                    }
                    guard item.error == 0 else { continue }
                    files += 1
                    totalBytes += item.size
                }
                fileCount = files
            }
            var walk = TreeWalk(roots: paths, wantsSizes: showsBar)
            nextInput = {
                guard let item = walk.next() else { return nil }
                var bytes: [UInt8] = []
                bytes.reserveCapacity(walk.name.count + 1)
                bytes += walk.name
                bytes.append(0)
                return HashInput(
                    names: NameTable(bytes: bytes), name: Name(start: 0, count: walk.name.count), size: item.size,
                    listError: item.error)
            }
        case .check(let path):
            let isStandardInput = path == [UInt8(ascii: "-")]
            listName = isStandardInput ? Array("standard input".utf8) : path
            let text: [UInt8]
            switch Self.readList(path, isStandardInput: isStandardInput) {
            case .success(let bytes): text = bytes
            case .failure(let failure):
                Display(meter: nil).error(quotedForMessage(listName) + Array(": \(failure)".utf8))
                return 1
            }
            let list = ChecksumList(text, isStandardInput: isStandardInput)
            guard !list.isEmpty else {
                Display(meter: nil).error(quotedForMessage(listName) + Array(": no properly formatted checksum lines found".utf8))
                return 1
            }
            improperLines = list.improperLines
            let inputs = showsBar ? list.inputs().map(Self.withSize) : list.inputs()
            fileCount = inputs.count
            totalBytes = inputs.reduce(0) { $0 + $1.size }
            var index = 0
            nextInput = {
                guard index < inputs.count else { return nil }
                defer { index += 1 }
                return inputs[index]
            }
        }
        let checking = if case .check = mode { true } else { false }

        let meter = showsBar ? Meter(totalBytes: totalBytes, totalFiles: fileCount ?? 0) : nil
        let display = Display(meter: meter)
        let queue = FutureQueue(maxConcurrent: jobs)
        let buffers = BufferPool()
        let timeout = self.timeout
        let counted: (@Sendable (Int) -> Void)? = if let meter { { meter.add(bytes: $0) } } else { nil }

        func hash(_ input: HashInput) -> Future<Digest>? {
            guard input.listError == 0 else { return nil }
            let source = FileSource(
                names: input.names, name: input.name,
                isStandardInput: checking && input.names.withName(input.name) { $0.elementsEqual([UInt8(ascii: "-")]) }
            )
            let future = queue.add { () -> Future<Digest> in
                // Nothing queued starts once the run is cancelled (the queue may be starting this
                // one as the cancellation reaches it).
                if stop.token.isCancelled { return .cancelled }
                let hash = sha256(of: source, buffers: buffers, counted: counted)
                guard let timeout else { return hash }
                return hash.timeout(after: timeout)
            }
            .cancellable(by: stop.token)
            guard let meter else { return future }
            let size = input.size
            return future.always(on: .immediate) { _ in meter.fileDone(size: size) }
        }

        // The next `window` inputs and their futures, in a ring: the walk is never further ahead
        // of the printed line than that.
        let window = max(4 * jobs, 64)
        var ahead = [(input: HashInput, future: Future<Digest>?)?](repeating: nil, count: window)
        var scheduled = 0
        var listedFiles = 0
        var ended = false
        var printed = 0
        var failed = 0
        var unreadable = 0
        var mismatched = 0
        var done = 0
        var line: [UInt8] = []
        line.reserveCapacity(256)

        func interrupted() -> Int32 {
            interrupt.end()  // before the message, so that the backstop does not print one too
            _ = display.stop()
            let what = checking ? "checked" : "hashed"
            // A walk cut short does not know how many files are left: it says how many it found.
            let total = fileCount.map { "\($0)" } ?? "at least \(listedFiles)"
            display.error("interrupted: \(done) of \(total) files \(what), the rest cancelled")
            return 130
        }

        func message(_ input: HashInput, _ text: String) {
            display.error(input.names.withName(input.name) { quotedForMessage($0) } + Array(": \(text)".utf8))
        }

        display.start()
        while true {
            while !ended, scheduled < printed + window {
                guard let input = nextInput() else {
                    ended = true
                    fileCount = listedFiles
                    break
                }
                if input.listError == 0 { listedFiles += 1 }
                ahead[scheduled % window] = (input, hash(input))
                scheduled += 1
            }
            guard printed < scheduled, let (input, future) = ahead[printed % window] else { break }
            ahead[printed % window] = nil
            printed += 1
            if stop.token.isCancelled { return interrupted() }
            line.removeAll(keepingCapacity: true)
            guard let future else {
                message(input, String(cString: strerror(input.listError)))
                failed += 1
                continue
            }
            var failure: String?
            // A future that is complete already is read without suspending.
            switch await future.result {
            case .success(let digest):
                done += 1
                input.names.withName(input.name) { name in
                    if let expected = input.expected {
                        if digest != expected { mismatched += 1 }
                        appendVerdictLine(name: name, verdict: digest == expected ? "OK" : "FAILED", to: &line)
                    } else {
                        appendChecksumLine(digest: digest, name: name, to: &line)
                    }
                }
            case .failure(FutureError.timedOut):
                failure = "timed out after \(timeoutText)"
            case .failure(let error):
                failure = "\(error)"
            case .cancelled:
                // Only Ctrl-C cancels.
                return interrupted()
            }
            if let failure {
                message(input, failure)
                failed += 1
                guard checking else { continue }
                unreadable += 1
                input.names.withName(input.name) { appendVerdictLine(name: $0, verdict: "FAILED open or read", to: &line) }
            }
            if let error = display.line(line) {
                _ = display.stop()
                display.error("write error: \(String(cString: strerror(error)))")
                return 1
            }
        }
        if let error = display.stop() {
            display.error("write error: \(String(cString: strerror(error)))")
            return 1
        }
        if checking {
            if improperLines > 0 {
                display.error("WARNING: \(improperLines) \(improperLines == 1 ? "line is" : "lines are") improperly formatted")
            }
            if unreadable > 0 {
                display.error("WARNING: \(unreadable) listed \(unreadable == 1 ? "file" : "files") could not be read")
            }
            if mismatched > 0 {
                display.error("WARNING: \(mismatched) computed \(mismatched == 1 ? "checksum" : "checksums") did NOT match")
            }
            return failed == 0 && mismatched == 0 ? 0 : 1
        }
        return failed == 0 ? 0 : 1
    }

    private var timeoutText: String {
        guard let timeout else { return "" }
        return "\(timeout.inSeconds.formatted()) s"
    }

    /// The whole list file, or why it could not be read (`sha256sum`'s words).
    private static func readList(_ path: [UInt8], isStandardInput: Bool) -> Result<[UInt8], HashFailure> {
        let descriptor = isStandardInput ? dup(STDIN_FILENO) : (path + [0]).withUnsafeBufferPointer {
            open(UnsafeRawPointer($0.baseAddress!).assumingMemoryBound(to: CChar.self), O_RDONLY | O_CLOEXEC)
        }
        guard descriptor >= 0 else { return .failure(HashFailure(errno: errno)) }
        defer { close(descriptor) }
        var text: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count >= 0 else { return .failure(HashFailure(description: "read error")) }
            if count == 0 { return .success(text) }
            text += chunk[..<count]
        }
    }

    /// `input` with its size, for the progress bar.
    private static func withSize(_ input: HashInput) -> HashInput {
        var info = stat()
        var sized = input
        if input.names.withCString(input.name, { stat($0, &info) }) == 0, (info.st_mode & S_IFMT) == S_IFREG {
            sized.size = Int64(info.st_size)
        }
        return sized
    }
}
