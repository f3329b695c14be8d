import Foundation
import Testing

/// Every operator that composes futures, nested or chained deep, ended every way that applies
/// (producers succeed, the root fails, every producer fails, the outermost future is cancelled, the
/// innermost producer cancels, a timeout on the outermost future fires, every reference is dropped
/// while pending): the outcome the rules give, whether the innermost producer heard its
/// cancellation, and that the heap comes back. Each case runs in a process of its own
/// (`futures-depthcheck`) whose every thread has a 512 KiB stack, so a stack overflow fails that case
/// alone and names it.
///
/// Depths: 100,000 levels for chain-like operators and 20,000 for joins and token structures in
/// release builds; fewer in debug builds and under sanitizers, whose frames are larger and slower.
@Suite("Stack-safety matrix")
struct DepthMatrixTests {
    struct Case: CustomTestStringConvertible, Sendable {
        let structure: String
        let ending: String
        let kind: String
        var testDescription: String { "\(structure) \(ending)" }
    }

    static let cases: [Case] = {
        guard let output = try? runDepthCheck(["--list"]).output else { return [] }
        return output.split(separator: "\n").compactMap { line in
            let words = line.split(separator: " ").map(String.init)
            return words.count == 3 ? Case(structure: words[0], ending: words[1], kind: words[2]) : nil
        }
    }()

    /// Whether the tests run under a sanitizer (whose allocator malloc's counters do not see).
    static let sanitized = (try? runDepthCheck(["--sanitized"]).output.hasPrefix("yes")) ?? true

    /// The depth of a case in this build.
    static func depth(of kind: String) -> Int {
        let chain = kind == "chain"
        if sanitized { return chain ? 1_000 : 300 }
        #if DEBUG
        return chain ? 5_000 : 1_000
        #else
        return chain ? 100_000 : 20_000
        #endif
    }

    @Test func everyOperatorIsListed() throws {
        let names = Set(Self.cases.map(\.structure))
        for name in [
            "map", "flatMap", "mapError", "recover", "flatMapError", "always", "mapOutcome", "flatMapOutcome",
            "flatten", "observe", "cancellable", "timeout", "delayed", "deferred", "retry", "queue", "cache",
            "operation", "serially", "concurrently", "all-failFast", "all-collectErrors", "all-ignoreErrors",
            "allSettled", "allOrNil", "zip", "race", "any", "raceOperations", "orderedByCompletion", "either",
            "both", "linkedSource", "completionToken",
        ] {
            #expect(names.contains(name), "\(name) is missing from the matrix")
        }
        #expect(Self.cases.count >= 200)
    }

    @Test(arguments: cases)
    func endsAtDepth(_ entry: Case) async throws {
        let depth = Self.depth(of: entry.kind)
        let result = try await runBuiltExecutable(
            "futures-depthcheck", [entry.structure, entry.ending, String(depth)], stackKiB: 512, standardError: .discarded
        )
        #expect(result.status == 0, "\(entry.structure) \(entry.ending) at depth \(depth): \(result.output)")
        #expect(result.output.hasPrefix("ok "), "\(entry.structure) \(entry.ending) at depth \(depth): \(result.output)")
    }
}

/// Runs `futures-depthcheck` with every thread's stack limited to 512 KiB; returns its exit status
/// (a signal's number plus 128 for a crash) and what it printed.
func runDepthCheck(_ arguments: [String]) throws -> (status: Int32, output: String) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/bin/sh")
    // The stack limit applies to the main thread and is every new thread's default size.
    process.arguments = ["-c", "ulimit -s 512 && exec \"$0\" \"$@\"",
                         builtProductsDirectory.appendingPathComponent("futures-depthcheck").path] + arguments
    let output = Pipe()
    process.standardOutput = output
    process.standardError = FileHandle.nullDevice
    try process.run()
    let data = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    let status = process.terminationReason == .uncaughtSignal ? 128 + process.terminationStatus : process.terminationStatus
    return (status, String(decoding: data, as: UTF8.self))
}
