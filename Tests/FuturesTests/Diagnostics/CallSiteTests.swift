import Foundation
import Futures
import FuturesTestSupport
import Testing

/// Main-actor state, which only a closure isolated to the main actor may touch: a call that
/// compiles with it chose a main-actor overload.
@MainActor var mainActorTouches = 0

/// Each operator's future names the call that made it, and what kind of operator it is, rather
/// than a promise or an operator inside the library.
@Suite struct CallSiteTests {
    /// Expects the scope's pending futures of `kind` to exist and to be made at `line` of this
    /// file, and nothing in the scope to be made elsewhere (inside the library).
    @discardableResult
    func expectMade(
        _ kind: String,
        at line: Int,
        in scope: FutureDiagnostics.Scope,
        sourceLocation: SourceLocation = #_sourceLocation
    ) -> [PendingFuture] {
        let pending = scope.pendingFutures
        let made = pending.filter { $0.kind == kind }
        #expect(!made.isEmpty, "no pending \(kind) in \(pending)", sourceLocation: sourceLocation)
        for future in made {
            #expect(future.file == #fileID, sourceLocation: sourceLocation)
            #expect(future.line == line, sourceLocation: sourceLocation)
        }
        for future in pending {
            #expect(future.file == #fileID, "\(future) was made inside the library", sourceLocation: sourceLocation)
        }
        return made
    }

    @Test func zip() {
        FutureDiagnostics.startTracking()
        let scope = FutureDiagnostics.Scope()
        let number = Promise<Int>()
        let word = Promise<String>()
        let (zipped, line) = scope.run { (Future.zip(number.future, word.future), #line) }
        expectMade("zip", at: line, in: scope)
        number.succeed(1)
        word.succeed("one")
        #expect(zipped.outcome?.value?.0 == 1)
        #expect(zipped.outcome?.value?.1 == "one")
    }

    @Test func serially() {
        FutureDiagnostics.startTracking()
        let scope = FutureDiagnostics.Scope()
        let step = Promise<Int>()
        let (results, line) = scope.run { (Future.serially([1]) { _ in step.future }, #line) }
        expectMade("serially", at: line, in: scope)
        step.succeed(7)
        #expect(results.outcome?.value == [7])
    }

    @Test func concurrently() {
        FutureDiagnostics.startTracking()
        let scope = FutureDiagnostics.Scope()
        let step = Promise<Int>()
        let (results, line) = scope.run { (Future.concurrently([1], limit: 1) { _ in step.future }, #line) }
        let made = expectMade("concurrently", at: line, in: scope)
        #expect(made.count == 1)
        step.succeed(7)
        #expect(results.outcome?.value == [7])
    }

    @Test func retry() {
        FutureDiagnostics.startTracking()
        let scope = FutureDiagnostics.Scope()
        let attempt = Promise<Int>()
        let (result, line) = scope.run { (Future.retry(attempts: 2) { attempt.future }, #line) }
        expectMade("retry", at: line, in: scope)
        attempt.succeed(3)
        #expect(result.outcome?.value == 3)
    }

    @Test func raceUntil() {
        FutureDiagnostics.startTracking()
        let scope = FutureDiagnostics.Scope()
        let contender = Promise<Int>()
        let screen = CancellationSource()
        let (winner, line) = scope.run {
            (Future<Int>.race([{ _ in contender.future }], until: screen.token), #line)
        }
        expectMade("race", at: line, in: scope)
        contender.succeed(5)
        #expect(winner.outcome?.value == 5)
        screen.cancel()
    }

    @Test func orderedByCompletion() {
        FutureDiagnostics.startTracking()
        let scope = FutureDiagnostics.Scope()
        let first = Promise<Int>()
        let second = Promise<Int>()
        let (slots, line) = scope.run { ([first.future, second.future].orderedByCompletion(), #line) }
        let made = expectMade("orderedByCompletion", at: line, in: scope)
        #expect(made.count == 2)
        second.succeed(2)
        first.succeed(1)
        #expect(slots.map { $0.outcome?.value } == [2, 1])
    }

    @Test func observe() {
        FutureDiagnostics.startTracking()
        let scope = FutureDiagnostics.Scope()
        let upload = Promise<Int>()
        let (branch, line) = scope.run { (upload.future.observe(), #line) }
        let made = expectMade("observe", at: line, in: scope)
        #expect(made.count == 1)
        upload.succeed(1)
        #expect(branch.outcome?.value == 1)
    }

    @Test func cancellable() {
        FutureDiagnostics.startTracking()
        let scope = FutureDiagnostics.Scope()
        let picture = Promise<Int>()
        let screen = CancellationSource()
        let (shown, line) = scope.run { (picture.future.cancellable(by: screen.token), #line) }
        expectMade("cancellable", at: line, in: scope)
        screen.cancel()
        #expect(shown.outcome?.isCancelled == true)
    }

    @Test func asyncWork() async throws {
        FutureDiagnostics.startTracking()
        let scope = FutureDiagnostics.Scope()
        let gate = Promise<Int>()
        let (work, line) = scope.run { (Future { try await gate.future.value + 1 }, #line) }
        expectMade("task", at: line, in: scope)
        let (cancellableWork, runLine) = scope.run {
            (Future.run(cancelledBy: CancellationSource().token) { try await gate.future.value }, #line)
        }
        #expect(scope.pendingFutures.contains { $0.kind == "task" && $0.line == runLine && $0.file == #fileID })
        gate.succeed(1)
        #expect(try await work.value == 2)
        #expect(try await cancellableWork.value == 1)
    }

    @Test func workOnAnExecutor() {
        FutureDiagnostics.startTracking()
        let scope = FutureDiagnostics.Scope()
        let executor = ManualExecutor()
        let (work, line) = scope.run { (Future(on: executor) { 42 }, #line) }
        expectMade("run", at: line, in: scope)
        _ = executor.runAll()
        #expect(work.outcome?.value == 42)
    }

    @Test func mainActorOverloads() async throws {
        FutureDiagnostics.startTracking()
        let scope = FutureDiagnostics.Scope()
        let source = Promise<Int>()
        let future = source.future
        // Each closure touches main-actor state, so each call is a main-actor overload's.
        let made: [(String, Int, Future<Int>)] = scope.run {
            [
                ("map", #line, future.map(on: .main) { mainActorTouches += 1; return $0 }),
                ("flatMap", #line, future.flatMap(on: .main) { mainActorTouches += 1; return Future(value: $0) }),
                ("mapError", #line, future.mapError(on: .main) { mainActorTouches += 1; return $0 }),
                ("recover", #line, future.recover(on: .main) { _ in mainActorTouches += 1; return 0 }),
                ("flatMapError", #line, future.flatMapError(on: .main) { _ in mainActorTouches += 1; return Future(value: 0) }),
                ("always", #line, future.always(on: .main) { _ in mainActorTouches += 1 }),
                ("mapOutcome", #line, future.mapOutcome(on: .main) { mainActorTouches += 1; return try $0.get() }),
                ("flatMapOutcome", #line, future.flatMapOutcome(on: .main) { _ in mainActorTouches += 1; return future }),
                ("run", #line, Future(on: .main) { mainActorTouches += 1; return 0 }),
            ]
        }
        let pending = scope.pendingFutures
        for (kind, line, _) in made.dropLast() {
            #expect(pending.contains { $0.kind == kind && $0.file == #fileID && $0.line == line }, "\(kind) at line \(line)")
        }
        let run = made[made.count - 1]
        #expect(pending.allSatisfy { $0.file == #fileID })
        // The main queue may already have run the last one: if not, it shows where it was made.
        if let record = pending.first(where: { $0.kind == "run" }) { #expect(record.line == run.1) }
        source.succeed(1)
        for (_, _, future) in made { _ = await future.result }
    }

    @Test func queueCacheAndOperation() {
        FutureDiagnostics.startTracking()
        let scope = FutureDiagnostics.Scope()
        let queue = FutureQueue(maxConcurrent: 1)
        let running = Promise<Int>()
        let (queued, queueLine) = scope.run { (queue.add { running.future }, #line) }
        expectMade("queue", at: queueLine, in: scope)

        let cache = FutureCache<String, Int>()
        let fetch = Promise<Int>()
        let (cached, cacheLine) = scope.run { (cache.value(for: "answer") { fetch.future }, #line) }
        expectMade("cache", at: cacheLine, in: scope)
        let (shared, sharedLine) = scope.run { (cache.value(for: "answer") { fetch.future }, #line) }
        #expect(scope.pendingFutures.contains { $0.kind == "cache" && $0.line == sharedLine })

        let (operation, operationLine) = scope.run { (FutureOperation { Future(value: 3) }, #line) }
        expectMade("operation", at: operationLine, in: scope)

        running.succeed(1)
        fetch.succeed(2)
        operation.start()
        #expect(queued.outcome?.value == 1)
        #expect(cached.outcome?.value == 2)
        #expect(shared.outcome?.value == 2)
        #expect(operation.future.outcome?.value == 3)
    }
}
