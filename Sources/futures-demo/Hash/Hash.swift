import ArgumentParser
import Foundation

/// `futures-demo hash`: the SHA-256 of every file under the given paths, several at a time, printed
/// as `sha256sum` prints them.
struct Hash: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print the SHA-256 of files, as sha256sum does, hashing several at a time.",
        discussion: """
            Hashes every regular file under each PATH (directories recursively, in byte order of \
            their paths, as `find DIR -type f | LC_ALL=C sort` lists them) and prints one line per \
            file, `<hex>  <path>`, in that order whatever order they finish in, so the output can \
            be checked with `sha256sum -c`.

            Names are bytes: any name the file system holds, valid UTF-8 or not, is hashed and \
            printed as sha256sum prints it (a name with a backslash, a newline or a carriage \
            return escaped, and its line starting with a backslash).

            With --check FILE, reads sha256sum's output from FILE (- for standard input) and checks \
            every file it lists as `sha256sum -c` does: `<name>: OK`, `<name>: FAILED` or \
            `<name>: FAILED open or read` per file, in the order listed, and warnings on standard \
            error about improperly formatted lines, unreadable files and mismatches.

            When standard error is a terminal, a progress bar there shows the bytes and files done, \
            the rate and the time left. A path that cannot be read, or a file that takes longer \
            than --timeout, is reported on standard error and the others go on. Ctrl-C cancels \
            everything at once: files being read stop between chunks, queued ones never start.

            Exit status: 0 if every file was hashed (with --check: every file matched), 1 if any \
            failed (with --check: any mismatch, unreadable file, or no properly formatted line), 2 \
            for bad arguments, 130 when interrupted.
            """
    )

    // Unconditional: `--jobs -3` is a number that is too small, not a missing value.
    @Option(
        parsing: .unconditional,
        help: ArgumentHelp("Files hashed at a time (default: the number of active processors).", valueName: "n")
    )
    var jobs: Int?

    @Option(
        parsing: .unconditional,
        help: ArgumentHelp("Give up on a file that takes longer than this many seconds.", valueName: "seconds")
    )
    var timeout: Double?

    @Option(help: ArgumentHelp("Check the files listed in FILE (sha256sum's output; - for standard input).", valueName: "file"))
    var check: String?

    @Argument(help: ArgumentHelp("Files and directories to hash.", valueName: "path"))
    var paths: [String] = []

    /// More files at a time than any machine has threads would only hold more files open (and
    /// the window of futures made ahead of the printed line is a multiple of it).
    static let maximumJobs = 65_536

    func validate() throws {
        if check != nil {
            guard paths.isEmpty else {
                throw ValidationError("--check takes the files to check from its list: give no path with it.")
            }
        } else {
            guard !paths.isEmpty else { throw ValidationError("Give at least one file or directory.") }
        }
        if let jobs {
            if jobs < 1 { throw ValidationError("--jobs must be at least 1, not \(jobs).") }
            if jobs > Self.maximumJobs { throw ValidationError("--jobs must be at most \(Self.maximumJobs), not \(jobs).") }
        }
        if let timeout {
            guard timeout.isFinite else {
                throw ValidationError("--timeout must be a number of seconds, not \(timeout).")
            }
            if !(timeout > 0) { throw ValidationError("--timeout must be above 0 seconds, not \(timeout.formatted()).") }
            if timeout > 1e9 { throw ValidationError("--timeout must be at most 1e9 seconds, not \(timeout.formatted()).") }
        }
    }

    func run() async throws {
        // The arguments as the system gave them: names that are not UTF-8 stay as they are.
        let raw = RawArguments()
        let mode: HashJob.Mode = if let check {
            .check(list: raw.bytes(of: [check])[0])
        } else {
            .hash(paths: raw.bytes(of: paths))
        }
        let status = await HashJob(
            mode: mode,
            jobs: jobs ?? ProcessInfo.processInfo.activeProcessorCount,
            timeout: timeout.map { Duration.milliseconds(Int64(($0 * 1000).rounded(.up))) }
        ).run()
        if status != 0 { throw ExitCode(status) }
    }
}

/// The command line as bytes. Swift's `CommandLine.arguments` (which the parser reads) replaces
/// bytes that are not UTF-8; these are the arguments as the system passed them.
struct RawArguments {
    let arguments: [[UInt8]]

    init() {
        arguments = (1..<Int(CommandLine.argc)).map { index in
            guard let argument = CommandLine.unsafeArgv[index] else { return [] }
            return Array(UnsafeBufferPointer(start: UnsafeRawPointer(argument).assumingMemoryBound(to: UInt8.self), count: strlen(argument)))
        }
    }

    /// The bytes of each of `parsed` (arguments as the parser read them, in command-line order):
    /// the next raw argument that reads the same.
    func bytes(of parsed: [String]) -> [[UInt8]] {
        var next = 0
        return parsed.map { text in
            var index = next
            while index < arguments.count {
                if String(decoding: arguments[index], as: UTF8.self) == text {
                    next = index + 1
                    return arguments[index]
                }
                index += 1
            }
            return Array(text.utf8)
        }
    }
}
