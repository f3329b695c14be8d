import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

@Suite(.timeLimit(.minutes(2))) struct QuitDumpTests {
    /// Ctrl-\ prints the pending futures to stderr, and the run goes on: hashing a FIFO that nobody
    /// writes to, the tree names the read that waits on it.
    @Test func sigquitPrintsThePendingTreeNamingTheStuckRead() throws {
        let folder = try TemporaryFolder()
        try folder.makeTree()
        #expect(mkfifo(folder.path("stuck"), 0o600) == 0)
        let process = Process()
        process.executableURL = demo
        process.currentDirectoryURL = folder.url
        process.arguments = ["hash", "--jobs", "2", "data/one", "stuck"]
        let output = Pipe()
        let error = Pipe()
        process.standardOutput = output
        process.standardError = error
        try process.run()
        // The first line is out: the handler is installed, and the FIFO's job is queued or waiting.
        var first = Data()
        while !first.contains(UInt8(ascii: "\n")) {
            let more = output.fileHandleForReading.availableData
            if more.isEmpty { break }
            first += more
        }
        // Each SIGQUIT prints a tree; until the FIFO's read has started, it may not be in it yet.
        var dumps = ""
        for _ in 0..<100 where !dumps.contains("read stuck (promise)") {
            kill(process.processIdentifier, SIGQUIT)
            let more = error.fileHandleForReading.availableData
            if more.isEmpty { break }
            dumps += String(decoding: more, as: UTF8.self)
        }
        #expect(dumps.contains("pending future"))
        #expect(dumps.contains("read stuck (promise) at futures_demo/HashFile.swift:"))
        // A writer that opens and closes the FIFO at once: the read sees its end, and the run ends.
        let writer = open(folder.path("stuck"), O_WRONLY)
        #expect(writer >= 0)
        close(writer)
        process.waitUntilExit()
        let rest = output.fileHandleForReading.readDataToEndOfFile()
        #expect(process.terminationReason == .exit)
        #expect(process.terminationStatus == 0)
        let lines = String(decoding: first + rest, as: UTF8.self).split(separator: "\n")
        #expect(lines.count == 2)
        #expect(lines.last?.hasSuffix("  stuck") == true)
    }
}
