import Testing
@testable import Futures

/// Chains of a million links run and are released on a 512 KiB stack, and a recursive
/// asynchronous loop runs in constant memory.
@Suite("Stack safety and memory", .serialized)
struct StackSafetyTests {
    /// A million in a release build, the build users ship. 100,000 in a debug build and under a
    /// sanitizer, which make each link many times slower (a million took minutes per test there,
    /// and these tests run one at a time). A chain that recursed would overflow the 512 KiB stack
    /// within a few thousand links either way, and a debug build's frames are the larger.
    static let links: Int = {
        #if DEBUG
        return 100_000
        #else
        return DepthMatrixTests.sanitized ? 100_000 : 1_000_000
        #endif
    }()

    @Test func immediateMapChain() async {
        await onSmallStackOffThePool {
            let promise = Promise<Int>()
            var future = promise.future
            for _ in 0..<Self.links { future = future.map(on: .immediate) { $0 + 1 } }
            promise.succeed(0)
            #expect(future.outcome?.value == Self.links)
        }
    }

    @Test func immediateMapChainOnACompletedFuture() async {
        await onSmallStackOffThePool {
            var future = Future(value: 0)
            for _ in 0..<Self.links { future = future.map(on: .immediate) { $0 + 1 } }
            #expect(future.outcome?.value == Self.links)
        }
    }

    /// Each adopted future gets a consumer later, so the chain is split at every level: the split
    /// states hold one another through their forwards, and are released in a loop.
    @Test func aChainSplitAtEveryLevelIsReleased() async {
        await onSmallStackOffThePool {
            let top = Promise<Int>()
            var current = top
            var consumers: [Future<Int>] = []
            for _ in 0..<20_000 {
                let next = Promise<Int>()
                current.complete(with: next.future)
                consumers.append(next.future.map(on: .immediate) { $0 })
                current = next
            }
            #expect(top.future.cancel())
            #expect(current.succeed(5))
            #expect(consumers.allSatisfy { $0.outcome?.value == 5 })
            consumers = []
        }
    }

    @Test func immediateFlatMapChain() async {
        await onSmallStackOffThePool {
            let promise = Promise<Int>()
            var future = promise.future
            for _ in 0..<Self.links { future = future.flatMap(on: .immediate) { Future(value: $0 + 1) } }
            promise.succeed(0)
            #expect(future.outcome?.value == Self.links)
        }
    }

    @Test func flatMapChainOfPendingInnerFutures() async {
        await onSmallStackOffThePool {
            let source = Promise<Int>()
            let inners = (0..<Self.links).map { _ in Promise<Int>() }
            var future = source.future
            for inner in inners { future = future.flatMap(on: .immediate) { _ in inner.future } }
            source.succeed(0)
            for (index, inner) in inners.enumerated() { inner.succeed(index) }
            #expect(future.outcome?.value == Self.links - 1)
        }
    }

    @Test(arguments: [true, false])
    func adoptionChain(ascending: Bool) async {
        await onSmallStackOffThePool {
            let promises = (0...Self.links).map { _ in Promise<Int>() }
            if ascending {
                for index in 0..<Self.links { promises[index].complete(with: promises[index + 1].future) }
            } else {
                for index in stride(from: Self.links - 1, through: 0, by: -1) {
                    promises[index].complete(with: promises[index + 1].future)
                }
            }
            #expect(promises[0].future.isPending)
            promises[Self.links].succeed(42)
            #expect(promises[0].future.outcome?.value == 42)
            #expect(promises[Self.links / 2].future.outcome?.value == 42)
        }
    }

    @Test func droppingAPendingMapChain() async {
        await onSmallStackOffThePool {
            weak var weakHead: FutureStorage<Int>?
            do {
                var future = Future<Int>.never.map(on: .immediate) { $0 }
                weakHead = future.storage
                for _ in 0..<Self.links { future = future.map(on: .immediate) { $0 + 1 } }
                #expect(future.isPending)
            }
            #expect(weakHead == nil)
        }
    }

    @Test func droppingAPendingChainBreaksItsPromise() async {
        await onSmallStackOffThePool {
            var promise: Promise<Int>? = Promise<Int>()
            var future = promise!.future
            for _ in 0..<Self.links { future = future.map(on: .immediate) { $0 + 1 } }
            promise = nil
            #expect(isBrokenPromise(future.outcome))
        }
    }

    @Test func droppingAPendingAdoptionChain() async {
        await onSmallStackOffThePool {
            weak var weakFirst: FutureStorage<Int>?
            do {
                let promises = (0...Self.links).map { _ in Promise<Int>() }
                for index in stride(from: Self.links - 1, through: 0, by: -1) {
                    promises[index].complete(with: promises[index + 1].future)
                }
                weakFirst = promises[0].storage
            }
            #expect(weakFirst == nil)
        }
    }

    /// `func loop(n) -> Future { step().flatMap { loop(n - 1) } }`, each step completed later from a
    /// queue of pending promises, must not keep the futures of finished steps alive.
    @Test func recursiveAsynchronousLoopRunsInConstantMemory() async {
        await onSmallStackOffThePool {
            let steps = Self.links
            let sampleEvery = steps / 10
            let loop = RecursiveLoop(sampleEvery: sampleEvery, steps: steps)
            let result = loop.run(steps)
            var completed = 0
            var alive: [Int] = []
            while let next = loop.pendingSteps.popLast() {
                next.succeed(())
                completed += 1
                if completed % sampleEvery == 0 {
                    // Every sampled step at least two steps back must be gone.
                    alive += loop.samples.filter { $0.key > steps - completed + 1 && $0.value.object != nil }.map(\.key)
                }
                #expect(loop.pendingSteps.count <= 1)
            }
            #expect(alive.isEmpty, "futures of finished steps still alive: \(alive.sorted())")
            #expect(result.outcome?.value == steps)
        }
    }
}

final class Weak<Object: AnyObject>: @unchecked Sendable {
    weak var object: Object?
    init(_ object: Object) { self.object = object }
}

/// The loop's state; used from one thread only (the test's), so the unchecked conformance is safe.
final class RecursiveLoop: @unchecked Sendable {
    var pendingSteps: [Promise<Void>] = []
    var samples: [Int: Weak<FutureStorage<Int>>] = [:]
    let sampleEvery: Int
    let steps: Int

    init(sampleEvery: Int, steps: Int) {
        self.sampleEvery = sampleEvery
        self.steps = steps
    }

    func step() -> Future<Void> {
        let promise = Promise<Void>()
        pendingSteps.append(promise)
        return promise.future
    }

    func run(_ remaining: Int) -> Future<Int> {
        if remaining == 0 { return Future(value: steps) }
        let future = step().flatMap(on: .immediate) { self.run(remaining - 1) }
        if remaining % sampleEvery == 0 && remaining != steps {
            samples[remaining] = Weak(future.storage)
        }
        return future
    }
}
