import Dispatch
import Testing
import FuturesTestSupport
@testable import Futures

/// A callback for a built-in executor, made ready by a job running on that executor, runs in that
/// job after the running callback returns: never inside the registering call, never on another
/// executor.
@Suite("Executor affinity")
struct ExecutorAffinityTests {
    /// A chain on a serial queue, completed by a job on it, runs in that job: before a job that was
    /// enqueued on the queue first.
    @Test func aChainOnAQueueRunsInTheJobThatCompletesIt() async {
        let queue = MarkedQueue("affinity")
        let order = Recorder<String>()
        let promise = Promise<Int>()
        let end = promise.future
            .map(on: .queue(queue.queue)) { value -> Int in
                order.append(queue.isCurrent ? "map 1 on the queue" : "map 1 elsewhere")
                return value + 1
            }
            .flatMap(on: .queue(queue.queue)) { value -> Future<Int> in
                order.append("flatMap")
                return Future(value: value + 1)
            }
            .map(on: .queue(queue.queue)) { value -> Int in
                order.append("map 2")
                return value + 1
            }
        let otherJobRan = Promise<Void>()
        Future(value: 0).whenSuccess(on: .queue(queue.queue)) { _ in
            queue.queue.async {
                order.append("a job enqueued before the completion")
                otherJobRan.succeed(())
            }
            promise.succeed(0)
        }
        #expect(await end.result.value == 3)
        _ = await otherJobRan.future.result
        #expect(order.all == ["map 1 on the queue", "flatMap", "map 2", "a job enqueued before the completion"])
    }

    /// Registered inside a job on the queue, on a completed future: the callback does not run
    /// inside the registering call.
    @Test func aCallbackRegisteredOnACompletedFutureInsideAJobStillWaitsForTheCall() async {
        let queue = MarkedQueue("affinity")
        let order = Recorder<String>()
        let done = Promise<Void>()
        Future(value: 0).whenSuccess(on: .queue(queue.queue)) { _ in
            _ = Future(value: 1).map(on: .queue(queue.queue)) { _ in
                order.append("map")
                done.succeed(())
            }
            order.append("registered")
        }
        _ = await done.future.result
        #expect(order.all == ["registered", "map"])
    }

    /// Inside a drain loop on the queue (an `.immediate` callback in a job on it), a callback for
    /// the queue registered on a completed future runs after the running callback returns, in the
    /// same job.
    @Test func insideADrainLoopTheCallbackRunsAfterTheRunningOneInTheSameJob() async {
        let queue = MarkedQueue("affinity")
        let order = Recorder<String>()
        let done = Promise<Void>()
        Future(value: 0).whenSuccess(on: .queue(queue.queue)) { _ in
            let promise = Promise<Int>()
            promise.future.whenSuccess(on: .immediate) { _ in
                _ = Future(value: 1).map(on: .queue(queue.queue)) { _ in order.append("map") }
                order.append("registered")
            }
            promise.succeed(0)
            order.append("succeed returned")
            done.succeed(())
        }
        _ = await done.future.result
        #expect(order.all == ["registered", "map", "succeed returned"])
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
