// The examples of the DocC article "Finding a future that never completes", compiled and run.
import Futures
import FuturesTestSupport
import Testing

struct Abandoned: Error {}

/// A stand-in for a logging library's logger.
struct ArticleLogger {
    let messages = Recorder<String>()
    func warning(_ message: String) { messages.append(message) }
}

@Suite struct DiagnosticsArticleTests {
    // The two examples that print every tracked future run in a process of their own: a snapshot
    // of every future holds, until it ends, what those futures link to, and tests beside these
    // check that futures they let go of are freed at once.
    @Test func aPromiseCapturedByItsOwnCancellationHandlerShowsInTheTree() async {
        await #expect(processExitsWith: .success) { try Self.aPromiseCapturedByItsOwnCancellationHandler() }
    }

    @Test func aCycleThroughAJoinShowsInTheTree() async {
        await #expect(processExitsWith: .success) { try Self.aCycleThroughAJoin() }
    }

    static func aPromiseCapturedByItsOwnCancellationHandler() throws {
        FutureDiagnostics.startTracking()
        let scope = FutureDiagnostics.Scope()
        let (answer, tree, line) = scope.run { () -> (Future<Int>, String, Int) in
            let line = #line + 2
            func loadAnswer() -> Future<Int> {
                let promise = Promise<Int>()
                promise.onCancel { promise.fail(Abandoned()) }  // the handler keeps the promise alive
                return promise.future
            }

            let answer = loadAnswer().named("answer")
            answer.whenSuccess { print($0) }
            let tree = FutureDiagnostics.dumpPending()
            return (answer, tree, line)
        }
        #expect(tree.contains("answer (promise) at \(#fileID):\(line), pending for"))
        let pending = try #require(scope.pendingFutures.first)
        #expect(scope.pendingFutures.count == 1)
        #expect(pending.observers == 1)
        #expect(scope.dumpPending().hasSuffix("[1 observer]\n"))
        // Cancelling runs the handler, which lets the promise go.
        answer.cancel()
        #expect(scope.pendingFutures.isEmpty)
    }

    static func aCycleThroughAJoin() throws {
        FutureDiagnostics.startTracking()
        let scope = FutureDiagnostics.Scope()
        let (first, cycle) = scope.run { () -> (Promise<Int>, String) in
            let first = Promise<Int>()
            let second = Promise<Int>()
            let total = Future.all([first.future, second.future]).map { $0.reduce(0, +) }.named("total")
            first.complete(with: total)  // a bug: first waits on total, which waits on first
            second.succeed(1)
            let cycle = FutureDiagnostics.dumpPending()
            return (first, cycle)
        }
        #expect(cycle.contains("in a cycle:"))
        let ours = scope.dumpPending().split(separator: "\n").map(String.init)
        #expect(ours.count == 6)
        #expect(ours[0] == "3 pending futures:")
        #expect(ours[1] == "  in a cycle:")
        #expect(ours[2].hasPrefix("    #") && ours[2].contains(" promise at "))
        #expect(ours[3].hasPrefix("      #") && ours[3].contains("total (map)"))
        #expect(ours[4].hasPrefix("        #") && ours[4].contains(" all at "))
        #expect(ours[5].hasPrefix("          #") && ours[5].hasSuffix("(the cycle closes here)"))
        // The cycle is pending for ever; cancelling one of its futures ends it.
        first.cancel()
        #expect(scope.pendingFutures.isEmpty)
    }

    /// The only test that installs the process's reporter (a second call would trap): it hears the
    /// events of every test, and looks for its own.
    @Test func theReporterAndTheWatchdog() {
        FutureDiagnostics.startTracking()
        let logger = ArticleLogger()
        FutureDiagnostics.bootstrap { event in
            logger.warning("\(event)")
        }
        let watchdog = FutureDiagnostics.watch(olderThan: .seconds(30), every: .seconds(5))
        var line = 0
        let future: Future<Int> = {
            let promise = Promise<Int>(); line = #line
            return promise.future
        }()
        #expect(future.outcome?.error != nil)
        #expect(logger.messages.all.contains { $0.hasPrefix("broken promise: #") && $0.contains(" promise at \(#fileID):\(line):") })
        #expect(watchdog.cancel())
    }

    @Test func doublesTheAnswer() throws {
        try expectNoPendingFutures {
            let promise = Promise<Int>()
            let doubled = promise.future.map(on: .immediate) { $0 * 2 }
            promise.succeed(21)
            #expect(doubled.outcome?.value == 42)
        }
    }
}
