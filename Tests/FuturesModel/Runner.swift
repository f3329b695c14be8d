import Dispatch
import Foundation
import Futures

extension ModelFailure {
    init(_ error: any Error) {
        switch error {
        case let error as ModelError: self = .error(error.code)
        case FutureError.brokenPromise: self = .brokenPromise
        case FutureError.timedOut: self = .timedOut
        case FutureError.cancelledMember: self = .cancelledMember
        case let error as JoinError:
            self = .joined(indices: error.failures.map(\.index), failures: error.failures.map { ModelFailure($0.error) })
        default: self = .unexpected(String(describing: error))
        }
    }
}

extension ModelOutcome {
    init(_ outcome: Outcome<Int>) {
        switch outcome {
        case .success(let value): self = .success(value)
        case .failure(let error): self = .failure(ModelFailure(error))
        case .cancelled: self = .cancelled
        }
    }
}

/// Runs a program against the library, one step at a time, each step on one of several threads and
/// its callbacks on several executors, and compares everything with ``ReferenceModel`` after each
/// step: outcomes, what each completing call returned, how often each closure and observer ran,
/// progress, and, at the end, that releasing every handle completes every observed future and frees
/// every closure.
public final class ModelRun: @unchecked Sendable {
    // Safety: the mutable properties are touched only by the thread that calls `run()`, and by the
    // steps it hands to a queue while it waits for them (a semaphore orders the two). The callbacks
    // touch only `board` and `probes`, which lock.
    private let program: Program
    private let settleTimeout: TimeInterval
    private let clock = StepClock()
    private let queueA = DispatchQueue(label: "model.A")
    private let queueB = DispatchQueue(label: "model.B")
    private let queueC = DispatchQueue(label: "model.C")
    private let board = Board()
    private let probes = Locked<[Int: Int]>([:])
    private var model = ReferenceModel()
    private var futures: [Int: Future<Int>] = [:]
    private var promises: [Int: Promise<Int>] = [:]
    private var sources: [Int: CancellationSource] = [:]
    private var tokens: [Int: CancellationToken] = [:]

    public init(_ program: Program, settleTimeout: TimeInterval = 60) {
        self.program = program
        self.settleTimeout = settleTimeout
    }

    /// Runs the program on the calling thread, which must not be one of Swift concurrency's (the
    /// library's timers on custom clocks sleep in tasks). Returns what went wrong, or `nil`.
    public func run() -> String? {
        for (index, step) in program.steps.enumerated() {
            if case .advance(let seconds) = step {
                if let failure = advance(by: seconds, at: index) { return failure }
                continue
            }
            let expected = model.apply(step)
            let returned = perform(step, at: index)
            if let expected, let returned, expected != returned {
                return "step \(index) (\(step)) returned \(returned); the model says \(expected)"
            }
            if let failure = settle(after: index) { return failure }
            // Every armed timer's task sleeps before the next step, so the sleepers' order is the
            // order the timers were armed in.
            if case .make(_, .timeout, _, _) = step, let failure = waitForSleepers(before: index + 1) { return failure }
        }
        return finish()
    }

    private func waitForSleepers(before index: Int) -> String? {
        let armed = model.armedTimers
        guard patiently({ clock.waitForSleepers(count: armed, until: $0) }) else {
            return "before step \(index): the clock has fewer than the \(armed) sleepers the armed timeouts need"
        }
        return nil
    }

    /// Advances the clock one due timer at a time, settling after each: timers due at once fire in
    /// tasks, in no order the rules fix.
    private func advance(by seconds: Int, at index: Int) -> String? {
        let target = model.time + seconds
        while let timer = model.fireNextTimer(upTo: target) {
            guard clock.wakeNext(upTo: .seconds(target)) else {
                return "step \(index): the timer of n\(timer) is due, but nothing sleeps on the clock"
            }
            if let failure = settle(after: index) { return failure }
        }
        model.setTime(target)
        clock.advance(by: .seconds(target) - clock.now.offset)
        return settle(after: index)
    }

    // MARK: Steps

    private func executor(_ place: Place) -> any Executor {
        switch place {
        case .immediate: ImmediateExecutor()
        case .queueA: QueueExecutor(queueA)
        case .queueB: QueueExecutor(queueB)
        case .global: GlobalExecutor()
        case .hopping: HoppingExecutor(queues: [queueA, queueB, queueC])
        case .current: CurrentExecutor()
        }
    }

    /// Runs a step on the runner's thread or in a job on a queue, and waits for it.
    private func perform(_ step: Step, at index: Int) -> Bool? {
        let queue: DispatchQueue? =
            switch (index &* 7 &+ program.steps.count) % 4 {
            case 1: queueA
            case 2: queueB
            case 3: DispatchQueue.global()
            default: nil
            }
        guard let queue else { return execute(step) }
        let done = DispatchSemaphore(value: 0)
        nonisolated(unsafe) var returned: Bool?
        queue.async {
            returned = self.execute(step)
            done.signal()
        }
        done.wait()
        return returned
    }

    /// Whether the runner registers an `onCancel` handler on node `id`'s promise: on most, so the
    /// producer's side is checked, and not on every one, since a handler is stored on the future.
    private static func hearsCancel(_ id: Int) -> Bool { id % 4 != 3 }

    /// How often the model says node `id`'s `onCancel` handler runs.
    private func expectedCancelHeard(_ id: Int) -> Int {
        Self.hearsCancel(id) ? model.cancelHeard(id) : 0
    }

    private func probe(_ id: Int) -> Probe {
        Probe(id: id, registry: probes)
    }

    private func execute(_ step: Step) -> Bool? {
        switch step {
        case .make(let id, let kind, let place, let observed):
            let future = make(id, kind, on: executor(place))
            futures[id] = future
            if observed {
                let board = self.board
                future.whenComplete(on: executor(place)) { _ in board.completed(id) }
                future.whenProgress(on: executor(place)) { board.reported(id, $0) }
            }
            return nil
        case .makeSource(let id):
            let source = CancellationSource()
            sources[id] = source
            tokens[id] = source.token
            return nil
        case .makeToken(let id, let kind):
            switch kind {
            case .linked(let parent):
                let source = CancellationSource(linkedTo: tokens[parent]!)
                sources[id] = source
                tokens[id] = source.token
            case .either(let a, let b): tokens[id] = CancellationToken.either(tokens[a]!, tokens[b]!)
            case .both(let a, let b): tokens[id] = CancellationToken.both(tokens[a]!, tokens[b]!)
            case .completion(let node): tokens[id] = futures[node]!.completionToken
            }
            return nil
        case .succeed(let id, let value): return promises[id]?.succeed(value)
        case .fail(let id, let code): return promises[id]?.fail(ModelError(code))
        case .completeWith(let id, let other):
            guard let promise = promises[id] else { return nil }
            return promise.complete(with: futures[other]!)
        case .dropPromise(let id):
            promises[id] = nil
            return nil
        case .setProgress(let id, let value):
            promises[id]?.progress = value
            return nil
        case .cancel(let id): return futures[id]!.cancel()
        case .cancelPromise(let id): return promises[id]?.cancel()
        case .cancelSource(let id): return sources[id]!.cancel()
        case .advance(let seconds):
            clock.advance(by: .seconds(seconds))
            return nil
        }
    }

    private func make(_ id: Int, _ kind: NodeKind, on executor: any Executor) -> Future<Int> {
        let board = self.board
        let probe = probe(id)
        switch kind {
        case .promise, .guardedPromise:
            let promise = if case .guardedPromise(let token) = kind { Promise<Int>(cancelledBy: tokens[token]!) } else { Promise<Int>() }
            promises[id] = promise
            if Self.hearsCancel(id) { promise.onCancel { board.heardCancel(id) } }
            return promise.future
        case .value(let value): return Future(value: value)
        case .failed(let code): return Future(error: ModelError(code))
        case .map(let source):
            return futures[source]!.map(on: executor) { value in
                probe.touch()
                board.ran(id)
                return try Closures.map(value)
            }
        case .flatMap(let source, let inner):
            let next = futures[inner]!
            return futures[source]!.flatMap(on: executor) { _ in
                probe.touch()
                board.ran(id)
                return next
            }
        case .recover(let source):
            return futures[source]!.recover(on: executor) { error in
                probe.touch()
                board.ran(id)
                return Closures.recover(ModelFailure(error))
            }
        case .mapOutcome(let source):
            return futures[source]!.mapOutcome(on: executor) { outcome in
                probe.touch()
                board.ran(id)
                return Closures.mapOutcome(ModelOutcome(outcome))
            }
        case .observe(let source):
            return futures[source]!.observe()
        case .cancellable(let source, let token):
            return futures[source]!.cancellable(by: tokens[token]!)
        case .timeout(let source, let seconds):
            return futures[source]!.timeout(after: .seconds(seconds), clock: clock)
        case .join(let join, let ids):
            let members = ids.map { futures[$0]! }
            switch join {
            case .all, .allCollectingErrors, .allIgnoringErrors:
                let policy: JoinPolicy = join == .all ? .failFast : join == .allCollectingErrors ? .collectErrors : .ignoreErrors
                return Future.all(members, policy: policy).map(on: .immediate) { values in
                    probe.touch()
                    return values.reduce(0, +)
                }
            case .allSettled:
                return Future.allSettled(members).map(on: .immediate) { outcomes in
                    probe.touch()
                    return Closures.settled(outcomes.map(ModelOutcome.init))
                }
            case .allOrNil:
                return Future.allOrNil(members).map(on: .immediate) { values in
                    probe.touch()
                    return Closures.orNil(values)
                }
            case .race: return Future.race(members)
            case .any: return Future.any(members)
            case .zip:
                switch members.count {
                case 2:
                    return Future.zip(members[0], members[1]).map(on: .immediate) { a, b in
                        probe.touch()
                        return a + b
                    }
                case 3:
                    return Future.zip(members[0], members[1], members[2]).map(on: .immediate) { a, b, c in
                        probe.touch()
                        return a + b + c
                    }
                default: preconditionFailure("zip of \(members.count) members")
                }
            }
        case .deferred(let inner):
            let next = futures[inner]!
            return Future<Int>.deferred {
                probe.touch()
                board.ran(id)
                return next
            }
        }
    }

    // MARK: Checking

    /// Calls `wait` with a deadline `settleTimeout` from now, and again while Swift concurrency's
    /// pool is too busy to start a task (other tests may hold all its threads for a minute): the
    /// library's timers on custom clocks fire in tasks, so the time the library gets is counted
    /// from when the pool is free. The pool may fill up after a first look found it free (under
    /// ThreadSanitizer other tests' synchronous bodies can hold both of a 2-core pool's threads for
    /// longer than `settleTimeout`), so when the time runs out the pool is probed again, and a pool
    /// that cannot start the new probe at once gets the time again. Gives up after ten minutes.
    private func patiently(_ wait: (Date) -> Bool) -> Bool {
        let asked = Date()
        var probe = Self.probePool()
        var deadline = asked.addingTimeInterval(settleTimeout)
        var probedAgainAt: Date? = nil
        while !wait(deadline) {
            if Date().timeIntervalSince(asked) > 600 { return false }
            if let started = probe.withLock({ $0 }) {
                let allowed = started.addingTimeInterval(settleTimeout)
                if allowed > deadline {
                    deadline = allowed
                    continue
                }
                // The time since the pool last ran a probe is up. A probe the pool started within a
                // second of being asked, with the time up again, means the library had its time.
                if let again = probedAgainAt, started.timeIntervalSince(again) < 1 { return false }
                probe = Self.probePool()
                probedAgainAt = Date()
            }
            deadline = Date().addingTimeInterval(1)
        }
        return true
    }

    /// Starts a task that records when the pool ran it.
    private static func probePool() -> Locked<Date?> {
        let started = Locked<Date?>(nil)
        Task.detached { started.withLock { $0 = Date() } }
        return started
    }

    /// Waits until the library has done everything the model says the step did, then compares.
    private func settle(after index: Int) -> String? {
        let nodes = model.nodes
        let futures = self.futures
        let heard = Dictionary(uniqueKeysWithValues: nodes.keys.map { ($0, expectedCancelHeard($0)) })
        let reached = patiently { deadline in board.wait(until: deadline) { seen in
            nodes.allSatisfy { id, node in
                (node.outcome == nil || futures[id]?.outcome != nil)
                    && (!node.observed || node.outcome == nil || seen.completions[id, default: 0] >= 1)
                    && seen.closureRuns[id, default: 0] >= node.closureRuns
                    && seen.cancelsHeard[id, default: 0] >= heard[id, default: 0]
            }
        } }
        if let mismatch = compare(after: "step \(index) (\(program.steps[index]))", exact: false) { return mismatch }
        if !reached { return "after step \(index): \(lagging() ?? "the library did not catch up with the model")" }
        return nil
    }

    /// What the library has not done yet that the model has.
    private func lagging() -> String? {
        let seen = board.snapshot
        for (id, node) in model.nodes.sorted(by: { $0.key < $1.key }) {
            if node.outcome != nil, futures[id]?.outcome == nil {
                return "n\(id) is still pending; the model says \(node.outcome!)"
            }
            if node.observed, node.outcome != nil, seen.completions[id, default: 0] == 0 {
                return "n\(id) completed (\(node.outcome!)) but its observer has not run"
            }
            if seen.closureRuns[id, default: 0] < node.closureRuns {
                return "n\(id)'s closure ran \(seen.closureRuns[id, default: 0]) times; the model says \(node.closureRuns)"
            }
            if seen.cancelsHeard[id, default: 0] < expectedCancelHeard(id) {
                return "n\(id) was cancelled, but its promise's onCancel handler has not run"
            }
        }
        return nil
    }

    /// Compares outcomes, call counts and progress with the model. Counts may still be below the
    /// model's unless `exact`.
    private func compare(after moment: String, exact: Bool) -> String? {
        let seen = board.snapshot
        for (id, node) in model.nodes.sorted(by: { $0.key < $1.key }) {
            let actual = futures[id]!.outcome.map(ModelOutcome.init)
            if actual != node.outcome, actual != nil || exact || node.outcome == nil {
                return "after \(moment): n\(id) is \(actual.map(String.init(describing:)) ?? "pending"); "
                    + "the model says \(node.outcome.map(String.init(describing:)) ?? "pending")"
            }
            let runs = seen.closureRuns[id, default: 0]
            if runs > node.closureRuns || (exact && runs != node.closureRuns) {
                return "after \(moment): n\(id)'s closure ran \(runs) times; the model says \(node.closureRuns)"
            }
            let completions = seen.completions[id, default: 0]
            let expected = node.observed && node.outcome != nil ? 1 : 0
            if completions > expected || (exact && completions != expected) {
                return "after \(moment): n\(id)'s observer ran \(completions) times; the model says \(expected)"
            }
            let heard = seen.cancelsHeard[id, default: 0]
            if heard > expectedCancelHeard(id) || (exact && heard != expectedCancelHeard(id)) {
                return "after \(moment): n\(id)'s promise heard of cancellation \(heard) times; the model says \(expectedCancelHeard(id))"
            }
            if let failure = checkProgress(id, node, seen.progress[id] ?? [], exact: exact) {
                return "after \(moment): n\(id): \(failure)"
            }
        }
        return nil
    }

    private func checkProgress(_ id: Int, _ node: ReferenceModel.Node, _ reports: [Double], exact: Bool) -> String? {
        let current = futures[id]!.progress
        if case .success = node.outcome, current != 1 { return "succeeded with progress \(current)" }
        if node.kind.isPromise, node.outcome == nil, !node.promiseResolved, !node.adopted, current != node.progress {
            return "progress is \(current); the promise set \(node.progress)"
        }
        if reports.contains(where: { !(0...1).contains($0) }) { return "a progress report out of 0...1: \(reports)" }
        if zip(reports, reports.dropFirst()).contains(where: { $0 == $1 }) {
            return "the same progress was reported twice in a row: \(reports)"
        }
        switch node.kind {
        case .flatMap, .join:
            if zip(reports, reports.dropFirst()).contains(where: { $0 > $1 }) {
                return "combined progress went down: \(reports)"
            }
        default: break
        }
        if exact, node.observed, case .success = node.outcome, reports.last != 1 {
            return "succeeded, but its last progress report is \(reports.last.map { "\($0)" } ?? "missing")"
        }
        return nil
    }

    /// The end: lets every queue run dry, compares exactly, then releases every handle and checks
    /// that every observed future completed and every closure was freed.
    private func finish() -> String? {
        let nodes = model.nodes
        _ = patiently { deadline in board.wait(until: deadline) { seen in
            nodes.allSatisfy { id, node in
                !(node.observed && node.outcome.map { if case .success = $0 { true } else { false } } == true)
                    || seen.progress[id]?.last == 1
            }
        } }
        for queue in [queueA, queueB, queueC] { queue.sync {} }
        if let mismatch = compare(after: "the last step", exact: true) { return mismatch }

        let observed = Set(model.nodes.filter { $0.value.observed }.keys)
        futures = [:]
        promises = [:]
        sources = [:]
        tokens = [:]
        let ended = patiently { deadline in board.wait(until: deadline) { seen in
            observed.allSatisfy { seen.completions[$0, default: 0] >= 1 }
        } }
        if !ended {
            let seen = board.snapshot
            let stuck = observed.filter { seen.completions[$0, default: 0] == 0 }.sorted()
            return "after every handle was released, \(stuck.map { "n\($0)" }) never completed"
        }
        let freed = patiently { deadline in board.wait(until: deadline) { _ in
            probes.withLock { $0.values.allSatisfy { $0 == 0 } }
        } }
        if !freed {
            let live = probes.withLock { $0.filter { $0.value > 0 }.keys.sorted() }
            return "after every handle was released, the closures of \(live.map { "n\($0)" }) are still allocated"
        }
        let twice = board.snapshot.completions.filter { $0.value > 1 }.keys.sorted()
        if !twice.isEmpty { return "observers ran twice: \(twice.map { "n\($0)" })" }
        return nil
    }
}

/// Counts, per node, the closures still allocated: every closure a program hands the library
/// captures one.
final class Probe: Sendable {
    private let id: Int
    private let registry: Locked<[Int: Int]>

    init(id: Int, registry: Locked<[Int: Int]>) {
        self.id = id
        self.registry = registry
        registry.withLock { $0[id, default: 0] += 1 }
    }

    deinit { registry.withLock { $0[id, default: 0] -= 1 } }

    /// Keeps the probe alive as long as the closure that calls this.
    @inline(never)
    func touch() {}
}

// MARK: - Checking seeds

public enum ModelCheck {
    /// Runs `program` on a thread of its own (never on Swift concurrency's, which the library's
    /// timers need) and returns what went wrong, or `nil`.
    public static func run(_ program: Program, settleTimeout: TimeInterval = 60) async -> String? {
        await withCheckedContinuation { continuation in
            let thread = Thread {
                continuation.resume(returning: ModelRun(program, settleTimeout: settleTimeout).run())
            }
            thread.stackSize = 4 << 20
            thread.start()
        }
    }

    /// Checks the program made from `seed`; on a failure, shrinks it and returns a report that
    /// names the generator seed and the smallest failing program found.
    public static func check(seed: UInt64, length: Int = 30) async -> String? {
        let program = Program.random(seed: seed, length: length)
        guard let failure = await run(program) else { return nil }
        var smallest = program
        var smallestFailure = failure
        var improved = true
        while improved {
            improved = false
            for index in stride(from: smallest.steps.count - 1, through: 0, by: -1) where index < smallest.steps.count {
                let candidate = smallest.removing(index)
                guard candidate.isWellFormed, let failure = await run(candidate, settleTimeout: 5) else { continue }
                smallest = candidate
                smallestFailure = failure
                improved = true
            }
        }
        return """
            seed \(seed) (length \(length)) failed: \(failure)
            smallest failing program (\(smallest.steps.count) of \(program.steps.count) steps): \(smallestFailure)
            \(smallest)
            """
    }
}
