import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `futures-demo hash`, run as a subprocess on files the tests make, and checked against
/// `sha256sum`. The time limit stops a hung subprocess before CI's limit of a step (30 minutes),
/// and leaves room for a sanitizer build on a loaded two-core machine, where a test's every step
/// waits for a thread of a pool that the busiest tests keep busy for minutes.
@Suite(.timeLimit(.minutes(20))) struct HashCommandTests {
    @Test(arguments: [1, 3])
    func printsWhatSha256sumPrintsForATreeOfManySizes(jobs: Int) async throws {
        let folder = try TemporaryFolder()
        try folder.makeTree()
        let ours = try await run(["hash", "--jobs", "\(jobs)", "data"], in: folder)
        let theirs = try shell("find data -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum", in: folder)
        #expect(ours.status == 0)
        #expect(ours.error == "")
        #expect(ours.output == theirs)
        #expect(ours.output.split(separator: "\n").count == TemporaryFolder.treeFileCount)
    }

    @Test func pathsComeInTheOrderGivenJoinedWithTheFilesInside() async throws {
        let folder = try TemporaryFolder()
        try folder.makeTree()
        let ours = try await run(["hash", "data/sub/", "data/one"], in: folder)
        let theirs = try shell("find data/sub/ -type f | LC_ALL=C sort | xargs -d '\\n' sha256sum; sha256sum data/one", in: folder)
        #expect(ours.output == theirs)
        #expect(ours.output.contains("  data/sub/deeper/z\n"))
    }

    @Test func aMissingPathIsReportedAndTheOthersGoOn() async throws {
        let folder = try TemporaryFolder()
        try folder.makeTree()
        try FileManager.default.createSymbolicLink(atPath: folder.path("dangling"), withDestinationPath: "nowhere")
        let ours = try await run(["hash", "missing", "data/one", "dangling"], in: folder)
        #expect(ours.status == 1)
        #expect(ours.output == (try shell("sha256sum data/one", in: folder)))
        #expect(ours.error.contains("futures-demo: missing: No such file or directory\n"))
        #expect(ours.error.contains("futures-demo: dangling: No such file or directory\n"))
    }

    @Test(.disabled(if: getuid() == 0, "root reads every file"))
    func anUnreadableFileIsReportedAndTheOthersGoOn() async throws {
        let folder = try TemporaryFolder()
        try folder.makeTree()
        chmod(folder.path("data/one"), 0)
        let ours = try await run(["hash", "data"], in: folder)
        #expect(ours.status == 1)
        #expect(ours.error.contains("futures-demo: data/one: Permission denied\n"))
        #expect(ours.output.split(separator: "\n").count == TemporaryFolder.treeFileCount - 1)
    }

    @Test func aFileThatTakesLongerThanTheTimeoutFailsAndTheOthersGoOn() async throws {
        let folder = try TemporaryFolder()
        try folder.makeTree()
        try folder.makeSparseFile("huge.img", size: 40 << 30)
        try folder.makeSparseFile("huge2.img", size: 40 << 30)
        // As many huge files as jobs (two), so that every job is busy while the timers fire.
        let ours = try await run(["hash", "--jobs", "2", "--timeout", "0.3", "huge.img", "huge2.img", "data/one"], in: folder)
        #expect(ours.status == 1)
        #expect(ours.error == "futures-demo: huge.img: timed out after 0.3 s\nfutures-demo: huge2.img: timed out after 0.3 s\n")
        #expect(ours.output == (try shell("sha256sum data/one", in: folder)))
    }

    /// Several runs: on a busy machine a Ctrl-C handled by a dispatch signal source alone was lost
    /// now and then (the run went on to the end).
    @Test(arguments: 1...5) func ctrlCCancelsEverythingAndExitsWith130(run: Int) async throws {
        let folder = try TemporaryFolder()
        try folder.makeTree()
        try folder.makeSparseFile("huge.img", size: 40 << 30)
        try folder.makeSparseFile("huge2.img", size: 40 << 30)
        // The default number of jobs: the huge files keep every job busy while Ctrl-C arrives. Once
        // the first line is out, the second file is being read and the rest are queued.
        let (reason, status, stdout, message) = try await interruptAfterFirstLine(
            ["hash", "data/one", "huge.img", "huge2.img", "data"], in: folder)
        #expect(reason == .exit)
        #expect(status == 130)
        // Exactly one whole line reached stdout, and nothing after it: the huge file being read
        // when Ctrl-C came was cancelled, not read to its end (no time is asserted: a sanitizer's
        // run on a loaded machine took a second to exit).
        #expect(stdout == (try shell("sha256sum data/one", in: folder)))
        #expect(message.contains("futures-demo: interrupted: 1 of \(TemporaryFolder.treeFileCount + 3) files hashed, the rest cancelled"))
    }

    @Test func drawsAProgressBarOnATerminalAtMostTenTimesASecond() async throws {
        let folder = try TemporaryFolder()
        try folder.makeTree()
        try folder.makeSparseFile("big.img", size: 256 << 20)
        // `script` runs the command in a pseudo-terminal and copies what it writes.
        let started = ContinuousClock.now
        let recorded = try await shellRun("script -qfec '\(demo.path) hash --jobs 2 big.img data' /dev/null", in: folder).output
        let elapsed = started.duration(to: .now)
        let frames = recorded.components(separatedBy: "\r\u{1B}[K[").count - 1
        #expect(frames >= 1)
        #expect(Double(frames) <= elapsed / .milliseconds(100) + 2, "\(frames) frames in \(elapsed)")
        #expect(recorded.contains("% "))
        #expect(recorded.contains(" files "))
        // The bar is erased before each line, so every checksum line is whole.
        #expect(recorded.contains("  data/sub/deeper/z\r\n"))
        // Without a terminal there is no bar at all.
        let piped = try await run(["hash", "big.img"], in: folder)
        #expect(piped.error == "")
    }

    @Test func aWriteErrorIsReportedWithStatus1() async throws {
        let folder = try TemporaryFolder()
        try folder.makeTree()
        let full = try await shellRun("\(demo.path) hash data/one 2>&1 >/dev/full; echo \"status $?\"", in: folder).output
        #expect(full == "futures-demo: write error: No space left on device\nstatus 1\n")
    }

    @Test func badArgumentsExitWith2AndShowTheUsage() async throws {
        let folder = try TemporaryFolder()
        let bad = [
            ["hash"], ["hash", "--jobs", "0", "x"], ["hash", "--jobs", "4611686018427387904", "x"],
            ["hash", "--jobs", "65537", "x"], ["hash", "--timeout", "0", "x"], ["hash", "--timeout", "1e16", "x"],
            ["hash", "--timeout", "soon", "x"], ["hash", "--frobnicate", "x"],
        ]
        for arguments in bad {
            let ours = try await run(arguments, in: folder)
            #expect(ours.status == 2, "\(arguments)")
            #expect(ours.error.contains("Usage: futures-demo hash"), "\(arguments)")
            #expect(ours.output == "")
        }
    }

    @Test func helpDocumentsTheCommand() async throws {
        let help = try await run(["hash", "--help"], in: try TemporaryFolder())
        #expect(help.status == 0)
        for text in ["--jobs", "--timeout", "sha256sum", "Ctrl-C", "130", "2 for bad arguments"] {
            #expect(help.output.contains(text), "\(text)")
        }
    }

    @Test func theTourIsTheDefault() async throws {
        let tour = try await run([], in: try TemporaryFolder())
        #expect(tour.status == 0)
        #expect(tour.output.contains("4. Done: Ada Lovelace's picture"))
    }
}

// MARK: - Running the demo

/// The `futures-demo` built with the tests.
var demo: URL {
    #if canImport(Darwin)
    if let bundle = Bundle.allBundles.first(where: { $0.bundlePath.hasSuffix(".xctest") }) {
        return bundle.bundleURL.deletingLastPathComponent().appendingPathComponent("futures-demo")
    }
    #endif
    return URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("futures-demo")
}

struct Run {
    var status: Int32
    var output: String
    var error: String
    /// The same, byte for byte (names need not be UTF-8).
    var outputBytes: Data
    var errorBytes: Data
}

func run(_ arguments: [String], in folder: TemporaryFolder) async throws -> Run {
    let directory = folder.url
    return try await offThePool { try launch(demo, arguments, in: directory) }
}

/// Runs `body` on a thread of its own, suspending meanwhile: a test waiting for the demo must not
/// block a thread of Swift concurrency's pool, which the tests beside it need (under a sanitizer
/// the demo runs for seconds). At most one body per core runs at once, as when each test held a
/// thread of the pool: the tests that time the demo need it to get the processor.
func offThePool<Result: Sendable>(_ body: @escaping @Sendable () throws -> Result) async throws -> Result {
    try await withCheckedThrowingContinuation { continuation in
        Thread.detachNewThread {
            demoSlots.wait()
            let result = Swift.Result { try body() }
            demoSlots.signal()
            continuation.resume(with: result)
        }
    }
}

private let demoSlots = DispatchSemaphore(value: max(2, ProcessInfo.processInfo.activeProcessorCount))

/// Runs `command` with `sh -c` in `folder` and returns its standard output.
/// Runs the demo with `arguments` in `folder`, sends it SIGINT once its first line is on standard
/// output, and waits for it to end: the process, everything it printed on standard output and on
/// standard error.
func interruptAfterFirstLine(
    _ arguments: [String],
    in folder: TemporaryFolder
) async throws -> (reason: Process.TerminationReason, status: Int32, stdout: String, stderr: String) {
    let directory = folder.url
    return try await offThePool { try interruptAfterFirstLine(arguments, in: directory) }
}

private func interruptAfterFirstLine(
    _ arguments: [String],
    in directory: URL
) throws -> (reason: Process.TerminationReason, status: Int32, stdout: String, stderr: String) {
    let process = Process()
    process.executableURL = demo
    process.currentDirectoryURL = directory
    process.arguments = arguments
    let output = Pipe()
    let error = Pipe()
    process.standardOutput = output
    process.standardError = error
    try process.run()
    var first = Data()
    while !first.contains(UInt8(ascii: "\n")) {
        let more = output.fileHandleForReading.availableData
        if more.isEmpty { break }
        first += more
    }
    process.interrupt()
    process.waitUntilExit()
    let rest = output.fileHandleForReading.readDataToEndOfFile()
    let message = String(decoding: error.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    return (process.terminationReason, process.terminationStatus, String(decoding: first + rest, as: UTF8.self), message)
}

func shell(_ command: String, in folder: TemporaryFolder) throws -> String {
    try launch(URL(fileURLWithPath: "/bin/sh"), ["-c", command], in: folder.url).output
}

/// Runs `command` with `sh -c` in `folder`, with `$demo` set to the demo's path.
func shellRun(_ command: String, in folder: TemporaryFolder) async throws -> Run {
    let directory = folder.url
    return try await offThePool {
        try launch(URL(fileURLWithPath: "/bin/sh"), ["-c", "demo='\(demo.path)'; " + command], in: directory)
    }
}

private func launch(_ executable: URL, _ arguments: [String], in directory: URL) throws -> Run {
    let process = Process()
    process.executableURL = executable
    process.arguments = arguments
    process.currentDirectoryURL = directory
    let output = Pipe()
    let error = Pipe()
    process.standardOutput = output
    process.standardError = error
    try process.run()
    // Read both pipes to the end before waiting, so that a full pipe never blocks the child.
    let errorText = Recorded()
    let readError = DispatchSemaphore(value: 0)
    Thread.detachNewThread {
        errorText.data = error.fileHandleForReading.readDataToEndOfFile()
        readError.signal()
    }
    let outputData = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    readError.wait()
    return Run(
        status: process.terminationStatus,
        output: String(decoding: outputData, as: UTF8.self),
        error: String(decoding: errorText.data, as: UTF8.self),
        outputBytes: outputData,
        errorBytes: errorText.data
    )
}

final class Recorded: @unchecked Sendable {
    // Safety: written by the reader thread before it signals the semaphore the launching thread
    // waits on; read only after that wait.
    var data = Data()
}

/// A folder of its own in the temporary directory, removed when the test ends.
final class TemporaryFolder {
    let url: URL

    init() throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("futures-demo-tests-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(at: url) }

    func path(_ relative: String) -> String { url.appendingPathComponent(relative).path }

    /// Files of many sizes, from empty to several megabytes, some in nested folders, one with a
    /// space and one with a backslash in its name (which sha256sum escapes), and a symbolic link
    /// (which `find -type f` leaves out).
    static let treeSizes: [(String, Int)] = [
        ("data/empty", 0), ("data/one", 1), ("data/short", 55), ("data/block", 64),
        ("data/sub/page-1", 4095), ("data/sub/page", 4096), ("data/sub/A space", 65_537),
        ("data/sub/deeper/z", 1 << 20), ("data/sub/deeper/a", (1 << 20) + 1),
        ("data/b/several-mb", 3_500_000), ("data/back\\slash", 10),
        // Names sha256sum escapes: a carriage return, a CR LF pair (one Swift character), a newline,
        // and a backslash before a combining accent (one character too).
        ("data/odd/cr\rname", 3), ("data/odd/crlf\r\nname", 4), ("data/odd/new\nline", 5),
        ("data/odd/accent\\\u{301}", 6), ("data/odd/caf\u{E9}", 7),
    ]
    static var treeFileCount: Int { treeSizes.count }

    func makeTree() throws {
        let random = try FileHandle(forReadingFrom: URL(fileURLWithPath: "/dev/urandom"))
        defer { try? random.close() }
        for (name, size) in Self.treeSizes {
            let file = url.appendingPathComponent(name)
            try FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
            try (random.readData(ofLength: size)).write(to: file)
        }
        try FileManager.default.createSymbolicLink(atPath: path("data/sub/link"), withDestinationPath: "../one")
    }

    /// A file of `size` bytes that takes no room on disk (all zeros, read back very fast but not
    /// instantly).
    func makeSparseFile(_ name: String, size: UInt64) throws {
        _ = FileManager.default.createFile(atPath: path(name), contents: nil)
        let handle = try FileHandle(forWritingTo: url.appendingPathComponent(name))
        try handle.truncate(atOffset: size)
        try handle.close()
    }
}
