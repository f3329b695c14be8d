import Dispatch
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

@Suite(.timeLimit(.minutes(20))) struct QuitDumpTests {
    /// Ctrl-\ prints the pending futures to stderr, and the run goes on: hashing a FIFO that nobody
    /// writes to, the tree names the read that waits on it.
    ///
    /// Every wait has a deadline, and a wait that runs out ends the demo and says what it waited
    /// for: a sanitizer's runtime may hold a signal back while the thread it landed on blocks, so
    /// a SIGQUIT with no answer is sent again.
    @Test func sigquitPrintsThePendingTreeNamingTheStuckRead() throws {
        let folder = try TemporaryFolder()
        try folder.makeTree()
        let fifo = folder.path("stuck")
        #expect(mkfifo(fifo, 0o600) == 0)
        let process = Process()
        process.executableURL = demo
        process.currentDirectoryURL = folder.url
        process.arguments = ["hash", "--jobs", "2", "data/one", "stuck"]
        let output = Pipe()
        let error = Pipe()
        process.standardOutput = output
        process.standardError = error
        try process.run()
        // Its exit is awaited on a thread of its own with `waitUntilExit()`: on Linux a `Process`
        // given a termination handler is never freed (LeakSanitizer reports it).
        let exited = DispatchSemaphore(value: 0)
        let waited = WaitedProcess(process)
        Thread.detachNewThread {
            waited.process.waitUntilExit()
            exited.signal()
        }
        let deadline = DispatchTime.now() + .seconds(480)
        func giveUp(_ waitingFor: String) {
            Issue.record("after 480 s the demo had not \(waitingFor)")
            process.terminate()
            // A writer still blocked opening the FIFO gets its reader, so that its thread ends.
            let reader = open(fifo, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
            if reader >= 0 { close(reader) }
        }

        // The first line is out: the handler is installed, and the FIFO's job is queued or waiting.
        let stdout = TimedReader(output.fileHandleForReading)
        guard var first = stdout.read(until: { $0.contains(UInt8(ascii: "\n")) }, deadline: deadline) else {
            return giveUp("printed its first line")
        }
        // Each SIGQUIT prints a tree; until the FIFO's read has started, it may not be in it yet.
        let stderr = TimedReader(error.fileHandleForReading)
        var dumps = ""
        for _ in 0..<1_000 where !dumps.contains("read stuck (promise)") && DispatchTime.now() < deadline {
            kill(process.processIdentifier, SIGQUIT)
            guard let more = stderr.read(waitingAtMost: 2_000) else { continue }
            if more.isEmpty { break }
            dumps += String(decoding: more, as: UTF8.self)
        }
        #expect(dumps.contains("pending future"))
        guard dumps.contains("read stuck (promise) at futures_demo/HashFile.swift:") else {
            Issue.record("the trees never named the FIFO's read: \(dumps.suffix(2_000))")
            return giveUp("named the read")
        }
        // A writer that opens and closes the FIFO at once: the read sees its end, and the run ends.
        // Opening waits for the demo's read to open its end, on a thread of its own.
        let opened = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            let writer = open(fifo, O_WRONLY | O_CLOEXEC)
            if writer >= 0 { close(writer) }
            opened.signal()
        }
        guard opened.wait(timeout: deadline) == .success else { return giveUp("opened the FIFO") }
        guard exited.wait(timeout: deadline) == .success else { return giveUp("exited") }
        first += stdout.readWhatIsLeft()
        #expect(process.terminationReason == .exit)
        #expect(process.terminationStatus == 0)
        let lines = String(decoding: first, as: UTF8.self).split(separator: "\n")
        #expect(lines.count == 2)
        #expect(lines.last?.hasSuffix("  stuck") == true)
    }
}

/// The read end of a child's pipe, read with deadlines.
private struct TimedReader {
    let handle: FileHandle

    init(_ handle: FileHandle) { self.handle = handle }

    /// The bytes that arrive within `milliseconds`: nil if none did, empty at the end of the stream.
    func read(waitingAtMost milliseconds: Int32) -> Data? {
        var descriptor = pollfd(fd: handle.fileDescriptor, events: Int16(POLLIN), revents: 0)
        guard poll(&descriptor, 1, milliseconds) > 0 else { return nil }
        return handle.availableData
    }

    /// Reads until what was read satisfies `done` or the stream ends; nil if `deadline` came first.
    func read(until done: (Data) -> Bool, deadline: DispatchTime) -> Data? {
        var data = Data()
        while !done(data) {
            guard DispatchTime.now() < deadline else { return nil }
            guard let more = read(waitingAtMost: 1_000) else { continue }
            if more.isEmpty { break }
            data += more
        }
        return data
    }

    /// Once the writer has exited, everything it wrote: read until the stream ends or nothing more
    /// is there at once (another child may have inherited a copy of the write end and keep it open).
    func readWhatIsLeft() -> Data {
        var data = Data()
        while let more = read(waitingAtMost: 0), !more.isEmpty { data += more }
        return data
    }
}

/// A process whose exit one thread waits for while the test reads its number or ends it.
private final class WaitedProcess: @unchecked Sendable {
    // Safety: the waiting thread only calls `waitUntilExit()`; the test reads the process's number,
    // may terminate it, and reads how it ended only after the waiting thread signalled its exit.
    let process: Process
    init(_ process: Process) { self.process = process }
}
