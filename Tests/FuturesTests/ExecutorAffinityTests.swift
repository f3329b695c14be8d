import Dispatch
import Foundation
import Testing
import FuturesTestSupport
@testable import Futures

/// A callback for a built-in executor, made ready by a job running on that executor, runs in that
/// job after the running callback returns: never inside the registering call, never on another
/// executor.
@Suite("Executor affinity")
struct ExecutorAffinityTests {
    /// A chain on a serial queue runs in the job of its first step: before a job that was
    /// enqueued on the queue during that step.
    @Test func aChainOnAQueueRunsInTheJobOfItsFirstStep() async {
        let queue = MarkedQueue("affinity")
        let order = Recorder<String>()
        let otherJobRan = Promise<Void>()
        let promise = Promise<Int>()
        let end = promise.future
            .map(on: .queue(queue.queue)) { value -> Int in
                queue.queue.async {
                    order.append("a job enqueued during the first step")
                    otherJobRan.succeed(())
                }
                order.append(queue.isCurrent ? "map 1 on the queue" : "map 1 elsewhere")
                return value + 1
            }
            .flatMap(on: .queue(queue.queue)) { value -> Future<Int> in
                order.append("flatMap")
                return Future(value: value + 1)
            }
            .map(on: .queue(queue.queue)) { value -> Int in
                order.append(queue.isCurrent ? "map 2 on the queue" : "map 2 elsewhere")
                return value + 1
            }
        promise.succeed(0)
        #expect(await end.result.value == 3)
        _ = await otherJobRan.future.result
        #expect(order.all == ["map 1 on the queue", "flatMap", "map 2 on the queue", "a job enqueued during the first step"])
    }

    /// A callback for the queue registered on a completed future inside a job on it, from the job's
    /// own code or from the drain loop after a step, is handed over: it never runs inside the
    /// registering call, and never overtakes an earlier callback of that future waiting in the queue.
    @Test(arguments: [false, true])
    func aCallbackRegisteredOnACompletedFutureInsideAJobIsHandedOver(afterAStep: Bool) async {
        let queue = MarkedQueue("affinity")
        let order = Recorder<String>()
        let done = Promise<Void>()
        let register: @Sendable (Int) -> Void = { _ in
            _ = Future(value: 1).map(on: .queue(queue.queue)) { _ in
                order.append("map")
                done.succeed(())
            }
            order.append("registered")
        }
        if afterAStep {
            Future(value: 0).map(on: .queue(queue.queue)) { $0 }.whenSuccess(on: .immediate, register)
        } else {
            Future(value: 0).whenSuccess(on: .queue(queue.queue), register)
        }
        _ = await done.future.result
        #expect(order.all == ["registered", "map"])
    }

    /// The order of one future's callbacks on one serial queue holds: one registered while pending
    /// (handed to the queue when the future completes elsewhere) runs before one registered later,
    /// after the completion, inside a job on that queue.
    @Test func aFuturesCallbacksKeepTheirOrderOnOneQueue() async {
        let queue = DispatchQueue(label: "affinity-order")
        let order = Recorder<String>()
        let future = Promise<Int>()
        let started = DispatchSemaphore(value: 0)
        let gate = DispatchSemaphore(value: 0)
        let done = Promise<Void>()
        Future(value: 0).map(on: .queue(queue)) { value -> Int in
            started.signal()
            gate.wait()  // until `future` has completed and handed its first callback to the queue
            return value
        }.whenSuccess(on: .immediate) { _ in
            future.future.whenSuccess(on: .queue(queue)) { _ in
                order.append("registered after completion")
                done.succeed(())
            }
        }
        started.wait()
        future.future.whenSuccess(on: .queue(queue)) { _ in order.append("registered while pending") }
        future.succeed(1)
        gate.signal()
        _ = await done.future.result
        #expect(order.all == ["registered while pending", "registered after completion"])
    }

    /// A job's own code (a callback, or `Future(on:)`'s work) completing a promise does not run the
    /// promise's callbacks for that executor inside that call: it may hold a lock, or be inside
    /// `sync` on another queue, that those callbacks need.
    @Test func aJobsOwnCodeNeverRunsCallbacksForItsExecutorInsideItsCalls() {
        let queue = DispatchQueue(label: "affinity-a")
        let other = DispatchQueue(label: "affinity-b")
        let lock = NSLock()
        let promise = Promise<Int>()
        let ran = DispatchSemaphore(value: 0)
        promise.future.whenSuccess(on: .queue(queue)) { _ in
            other.sync {}  // inside `other.sync`, this deadlocks
            lock.lock()    // under the caller's lock, this deadlocks
            lock.unlock()
            ran.signal()
        }
        Future(value: 0).whenSuccess(on: .queue(queue)) { _ in
            other.sync {
                lock.lock()
                promise.succeed(1)
                lock.unlock()
            }
        }
        #expect(ran.wait(timeout: .now() + 60) == .success, "a callback ran inside the job's own call")
    }

    /// User code that the completion of a step reaches directly (a final `.immediate` progress
    /// handler) completing a promise under a lock: the promise's callback for the step's queue,
    /// which takes that lock, runs after that code, not inside it.
    @Test func codeReachedByAStepsCompletionNeverRunsCallbacksInsideItsCalls() {
        let queue = DispatchQueue(label: "affinity-progress")
        let lock = NSLock()
        let order = Recorder<String>()
        let other = Promise<Int>()
        let ran = DispatchSemaphore(value: 0)
        other.future.whenSuccess(on: .queue(queue)) { _ in
            lock.lock()  // inside the handler's call, under its lock, this deadlocks
            lock.unlock()
            order.append("callback")
            ran.signal()
        }
        let source = Promise<Int>()
        let step = source.future.flatMap(on: .queue(queue)) { Future(value: $0) }
        step.whenProgress(on: .immediate) { value in
            guard value == 1 else { return }
            lock.lock()
            other.succeed(1)
            lock.unlock()
            order.append("handler returned")
        }
        source.succeed(0)
        #expect(ran.wait(timeout: .now() + 60) == .success, "a callback ran inside the handler's call")
        #expect(order.all == ["handler returned", "callback"])
    }

    /// A registration on a completed future inside a drain loop comes before one made later from
    /// another thread: both on one serial queue, they keep that order.
    @Test func registrationsOnACompletedFutureKeepTheirOrderAcrossThreads() {
        let queue = DispatchQueue(label: "affinity-late")
        let future = Future(value: 1)
        let order = Recorder<String>()
        let group = DispatchGroup()
        group.enter()
        group.enter()
        let trigger = Promise<Void>()
        trigger.future.whenSuccess(on: .immediate) { _ in  // a drain loop on this thread
            future.whenSuccess(on: .queue(queue)) { _ in
                order.append("first")
                group.leave()
            }
            let registered = DispatchSemaphore(value: 0)
            DispatchQueue.global().async {
                future.whenSuccess(on: .queue(queue)) { _ in
                    order.append("second")
                    group.leave()
                }
                registered.signal()
            }
            registered.wait()
        }
        trigger.succeed(())
        group.wait()
        #expect(order.all == ["first", "second"])
    }

    /// A registration inside a job that starts a deferred future does not run the callback inside
    /// the registering call either.
    @Test func startingADeferredFutureInsideAJobDoesNotRunTheCallbackInTheCall() async {
        let queue = MarkedQueue("affinity")
        let order = Recorder<String>()
        let done = Promise<Void>()
        Future(value: 0).map(on: .queue(queue.queue)) { $0 }.whenSuccess(on: .immediate) { _ in
            Future<Int>.deferred { Future(value: 1) }.whenSuccess(on: .queue(queue.queue)) { _ in
                order.append("callback")
                done.succeed(())
            }
            order.append("registered")
        }
        _ = await done.future.result
        #expect(order.all == ["registered", "callback"])
    }

    /// `.queue(DispatchQueue.main)` and `.main` are one executor: a future's callbacks for both
    /// keep their order.
    @Test func theMainQueueIsOneExecutorUnderBothNames() async {
        let order = Recorder<String>()
        let first = Promise<Void>()
        let second = Promise<Void>()
        let future = Future(value: 0).map(on: .main) { $0 }  // completes in a job on the main queue
        future.whenSuccess(on: .queue(DispatchQueue.main)) { _ in
            order.append("queue(main)")
            first.succeed(())
        }
        future.whenSuccess(on: .main) { _ in
            order.append("main")
            second.succeed(())
        }
        _ = await Future.all([first.future, second.future]).result
        #expect(order.all == ["queue(main)", "main"])
    }

    /// Work started by a call (`Future(on:)`) always goes to its executor, even from a job on it.
    @Test func futureOnAQueueStartedInsideAJobOnItIsHandedOver() async {
        let queue = MarkedQueue("affinity")
        let order = Recorder<String>()
        let done = Promise<Void>()
        Future(value: 0).whenSuccess(on: .queue(queue.queue)) { _ in
            let promise = Promise<Int>()
            promise.future.whenSuccess(on: .immediate) { _ in
                _ = Future<Void>(on: .queue(queue.queue)) {
                    order.append("work")
                    done.succeed(())
                }
                order.append("created")
            }
            promise.succeed(0)
        }
        _ = await done.future.result
        #expect(order.all == ["created", "work"])
    }

    /// The Executors article's example: three steps on one queue, the last two in the first one's job.
    @Test func theArticlesChainRunsOnItsQueue() async throws {
        struct Document { var words: [String] }
        struct Index { var summary: String }
        let download: @Sendable () -> Future<String> = { Future<String> { "swift futures" } }
        let parse: @Sendable (String) -> Document = { data in Document(words: data.split(separator: " ").map(String.init)) }
        let index: @Sendable (Document) -> Index = { document in Index(summary: document.words.joined(separator: ", ")) }
        let queue = DispatchQueue(label: "parsing")
        let summary = download()                          // completes on some other thread
            .map(on: .queue(queue)) { data in parse(data) }          // one hop onto `queue`…
            .map(on: .queue(queue)) { document in index(document) }  // …then, in the same job
            .map(on: .queue(queue)) { index in index.summary }       // (and this one too)
        #expect(try await summary.value == "swift, futures")
    }

    /// Another queue's callbacks, and a custom executor's, are still handed over: one job each.
    @Test func callbacksForOtherExecutorsAreHandedOver() {
        let executor = ManualExecutor()
        let promise = Promise<Int>()
        let end = promise.future.map(on: executor) { $0 + 1 }.map(on: executor) { $0 + 1 }
        Future(value: 0).whenSuccess(on: executor) { _ in promise.succeed(0) }
        #expect(executor.runAll() == 3, "a custom executor has no affinity: one job per step")
        #expect(end.outcome?.value == 2)
    }
}
