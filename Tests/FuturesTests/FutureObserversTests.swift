import Dispatch
import Testing
import FuturesTestSupport
@testable import Futures

@Suite("Observers")
struct FutureObserversTests {
    @Test func eachObserverSeesOnlyItsOutcome() {
        let recorder = Recorder<String>()
        func observe(_ future: Future<Int>) {
            future.whenSuccess(on: .immediate) { recorder.append("success \($0)") }
            future.whenFailure(on: .immediate) { _ in recorder.append("failure") }
            future.whenCancelled(on: .immediate) { recorder.append("cancelled") }
            future.whenComplete(on: .immediate) { recorder.append("complete \($0.isSuccess)") }
        }
        observe(Future(value: 1))
        observe(Future(error: TestError()))
        observe(.cancelled)
        #expect(recorder.all == [
            "success 1", "complete true",
            "failure", "complete false",
            "cancelled", "complete false",
        ])
    }

    @Test func callbacksRunExactlyOnceInRegistrationOrderOnASerialExecutor() {
        let executor = ManualExecutor()
        let promise = Promise<Int>()
        let recorder = Recorder<Int>()
        for index in 0..<50 { promise.future.whenComplete(on: executor) { _ in recorder.append(index) } }
        promise.succeed(0)
        for index in 50..<100 { promise.future.whenComplete(on: executor) { _ in recorder.append(index) } }
        executor.runAll()
        #expect(recorder.all == Array(0..<100))
    }

    @Test func callbacksRegisteredByARunningCallbackRunAfterTheBatchInOrder() {
        // The drain owns the future's callback list while it runs; registrations made meanwhile
        // (here from inside the batch, also on `.immediate`) wait for the batch, then run in order.
        let promise = Promise<Int>()
        let future = promise.future
        let recorder = Recorder<String>()
        future.whenSuccess(on: .immediate) { _ in
            recorder.append("a")
            future.whenSuccess(on: .immediate) { _ in
                recorder.append("late 1")
                future.whenSuccess(on: .immediate) { _ in recorder.append("later") }
            }
            future.whenSuccess(on: .immediate) { _ in recorder.append("late 2") }
        }
        future.whenSuccess(on: .immediate) { _ in recorder.append("b") }
        promise.succeed(1)
        #expect(recorder.all == ["a", "b", "late 1", "late 2", "later"])
        future.whenSuccess(on: .immediate) { _ in recorder.append("after the drain") }
        #expect(recorder.all.last == "after the drain")
    }

    @Test func aCallbackRegisteredOnACompletedFutureFromItsOwnCallbackRunsAfterIt() {
        // Off a drain loop, a registration on a completed future runs at once; one made from inside
        // that callback waits until it returns (no recursion, order kept).
        let future = Future(value: 1)
        let recorder = Recorder<String>()
        future.whenSuccess(on: .immediate) { _ in
            recorder.append("a")
            future.whenSuccess(on: .immediate) { _ in recorder.append("c") }
            recorder.append("b")
        }
        #expect(recorder.all == ["a", "b", "c"])
    }

    @Test func registrationsRacingADrainEachRunExactlyOnceAndInOrderPerThread() async {
        // Threads register on a completed future while other threads' drains of it run; every
        // callback runs exactly once, and each thread's callbacks in its registration order.
        let threads = 4
        let perThread = 500
        for _ in 0..<20 {
            let promise = Promise<Int>()
            let future = promise.future
            let recorder = Recorder<Int>()
            await withCheckedContinuation { (finished: CheckedContinuation<Void, Never>) in
                let group = DispatchGroup()
                for thread in 0..<threads {
                    group.enter()
                    DispatchQueue.global().async {
                        for index in 0..<perThread {
                            if thread == 0 && index == perThread / 2 { promise.succeed(0) }
                            future.whenSuccess(on: .immediate) { _ in recorder.append(thread * perThread + index) }
                        }
                        group.leave()
                    }
                }
                group.notify(queue: .global()) { finished.resume() }
            }
            let seen = recorder.all
            #expect(seen.count == threads * perThread)
            #expect(Set(seen).count == threads * perThread)
            for thread in 0..<threads {
                let mine = seen.filter { $0 / perThread == thread }
                #expect(mine == mine.sorted())
            }
        }
    }

    @Test func callbacksOnASerialQueueRunInRegistrationOrder() async {
        let queue = DispatchQueue(label: "order")
        let promise = Promise<Int>()
        let recorder = Recorder<Int>()
        await confirmation(expectedCount: 200) { done in
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                for index in 0..<100 { promise.future.whenSuccess(on: .queue(queue)) { _ in recorder.append(index); done() } }
                DispatchQueue.global().async { promise.succeed(1) }
                for index in 100..<200 { promise.future.whenSuccess(on: .queue(queue)) { _ in recorder.append(index); done() } }
                promise.future.whenComplete(on: .queue(queue)) { _ in continuation.resume() }
            }
        }
        #expect(recorder.all == Array(0..<200))
    }

    @Test func callbacksNeverRunInsideTheRegisteringCall() async {
        // Registered (with the default executor) from inside a callback running on a serial queue:
        // `.current` is that queue, so the callback can only run after the registering job ends.
        let queue = MarkedQueue("no-zalgo")
        let done = Future<Void> { promise in
            Future(value: 0).whenSuccess(on: .queue(queue.queue)) { _ in
                let registering = Counter()
                Future(value: 1).whenSuccess { _ in
                    if registering.value == 1 && queue.isCurrent {
                        promise.succeed(())
                    } else {
                        promise.fail(TestError())
                    }
                }
                registering.increment()
            }
        }
        await #expect(throws: Never.self) { try await done.value }
    }

    @Test func immediateRunsInlineWhenComplete() {
        let ran = Counter()
        Future(value: 1).whenSuccess(on: .immediate) { _ in ran.increment() }
        #expect(ran.value == 1)
    }

    @Test func immediateRunsOnTheCompletingThreadBeforeCompleteReturns() {
        let promise = Promise<Int>()
        let recorder = Recorder<String>()
        promise.future.whenSuccess(on: .immediate) { _ in recorder.append("callback") }
        promise.succeed(1)
        recorder.append("after succeed")
        #expect(recorder.all == ["callback", "after succeed"])
    }

    @Test func callbacksRegisteredFromManyThreadsWhileCompletingRunExactlyOnce() {
        for _ in 0..<50 {
            let promise = Promise<Int>()
            let runs = Counter()
            DispatchQueue.concurrentPerform(iterations: 4) { index in
                if index == 0 {
                    promise.succeed(1)
                } else {
                    for _ in 0..<100 { promise.future.whenSuccess(on: .immediate) { _ in runs.increment() } }
                }
            }
            #expect(runs.value == 300)
        }
    }

    @Test func immediateTreesRunEveryCallbackExactlyOnce() {
        // A wide and deep tree of `.immediate` futures queues many completions in the drain loop.
        let promise = Promise<Int>()
        let runs = Counter()
        var level = [promise.future]
        for _ in 0..<4 {
            level = level.flatMap { parent in (0..<5).map { _ in parent.map(on: .immediate) { $0 + 1 } } }
        }
        for future in level { future.whenSuccess(on: .immediate) { _ in runs.increment() } }
        promise.succeed(0)
        #expect(runs.value == 625)
        #expect(level.allSatisfy { $0.outcome?.value == 4 })
    }

    @Test func observerCapturesAreReleasedOnceRun() {
        weak var weakProbe: Probe?
        let promise = Promise<Int>()
        do {
            let probe = Probe()
            weakProbe = probe
            promise.future.whenComplete(on: .immediate) { _ in _ = probe }
        }
        #expect(weakProbe != nil)
        promise.succeed(1)
        #expect(weakProbe == nil)
    }

    @Test func successObserverIsReleasedUnrunOnFailure() {
        weak var weakProbe: Probe?
        let promise = Promise<Int>()
        let runs = Counter()
        do {
            let probe = Probe()
            weakProbe = probe
            promise.future.whenSuccess(on: .immediate) { _ in _ = probe; runs.increment() }
        }
        promise.fail(TestError())
        #expect(weakProbe == nil)
        #expect(runs.value == 0)
    }
}
