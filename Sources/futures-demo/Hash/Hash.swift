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

            When standard error is a terminal, a progress bar there shows the bytes and files done, \
            the rate and the time left. A path that cannot be read, or a file that takes longer \
            than --timeout, is reported on standard error and the others go on. Ctrl-C cancels \
            everything at once: files being read stop between chunks, queued ones never start.

            Exit status: 0 if every file was hashed, 1 if any failed, 2 for bad arguments, 130 when \
            interrupted. File names must be valid UTF-8: one that is not is reported as not found.
            """
    )

    @Option(help: ArgumentHelp("Files hashed at a time (default: the number of active processors).", valueName: "n"))
    var jobs: Int?

    @Option(help: ArgumentHelp("Give up on a file that takes longer than this many seconds.", valueName: "seconds"))
    var timeout: Double?

    @Argument(help: ArgumentHelp("Files and directories to hash.", valueName: "path"))
    var paths: [String]

    /// More files at a time than any machine has threads would only hold more files open (and
    /// the window of futures made ahead of the printed line is a multiple of it).
    static let maximumJobs = 65_536

    func validate() throws {
        guard !paths.isEmpty else { throw ValidationError("Give at least one file or directory.") }
        if let jobs, !(1...Self.maximumJobs).contains(jobs) {
            throw ValidationError("--jobs must be between 1 and \(Self.maximumJobs).")
        }
        if let timeout, !(timeout > 0 && timeout <= 1e9) {
            throw ValidationError("--timeout must be a number of seconds above 0 and at most 1e9.")
        }
    }

    func run() async throws {
        let status = await HashJob(
            paths: paths,
            jobs: jobs ?? ProcessInfo.processInfo.activeProcessorCount,
            timeout: timeout.map { Duration.milliseconds(Int64(($0 * 1000).rounded(.up))) }
        ).run()
        if status != 0 { throw ExitCode(status) }
    }
}
