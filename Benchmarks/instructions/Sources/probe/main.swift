// Each scenario runs the engine path it names, single-threaded (every callback `.immediate`), so
// that callgrind counts the same instructions on every run:
//
//     valgrind --tool=callgrind .build/release/probe SCENARIO REPETITIONS
//
// Subtract a run of `probe map 0` (the process's start-up) from each count.
import Dispatch
import Futures

@inline(never) func mapChain(steps: Int) {
    let p = Promise<Int>()
    var f = p.future
    for _ in 0..<steps { f = f.map(on: .immediate) { $0 + 1 } }
    _ = p.succeed(0)
    precondition(f.outcome?.value == steps)
}

@inline(never) func pendingWithCallback(count: Int) {
    var promises: [Promise<Int>] = []
    promises.reserveCapacity(count)
    let box = Box()
    for _ in 0..<count {
        let p = Promise<Int>()
        p.future.whenSuccess(on: .immediate) { box.n &+= $0 }
        promises.append(p)
    }
    for p in promises { _ = p.succeed(1) }
}
final class Box: @unchecked Sendable { var n = 0 }

@inline(never) func all(members: Int) {
    let ps = (0..<members).map { _ in Promise<Int>() }
    // A closure, not a key path: projecting through a `KeyPath` looks up `Result`'s metadata for
    // every element, which is not the join's cost.
    let j = Future.all(ps.map { $0.future })
    for p in ps { _ = p.succeed(1) }
    precondition(j.outcome?.value?.count == members)
}

/// A loop whose levels merge: each level adopts the next, completed later by hand.
/// Single-threaded: every callback is `.immediate` and runs on this thread.
final class Loop: @unchecked Sendable {
    var pending: [Promise<Int>] = []
    var futures: [Future<Int>] = []
    let observed: Bool
    init(observed: Bool) { self.observed = observed }
    func level(_ n: Int) -> Future<Int> {
        let p = Promise<Int>()
        pending.append(p)
        let f = p.future.flatMap(on: .immediate) { v -> Future<Int> in n == 0 ? Future(value: v) : self.level(n - 1) }
        if observed { f.whenFailure(on: .immediate) { _ in } }
        futures.append(f)
        return f
    }
}

@inline(never) func mergingLoop(levels: Int, observed: Bool) {
    let loop = Loop(observed: observed)
    let top = loop.level(levels)
    var i = 0
    while i < loop.pending.count { _ = loop.pending[i].succeed(i); i += 1 }
    precondition(top.outcome != nil)
}

/// The merging loop with a consumer on its outer future: every level's adoption then finds a wait
/// into the adopter's root, and decides whether it may close a cycle.
@inline(never) func consumedLoop(levels: Int) {
    let loop = Loop(observed: false)
    let top = loop.level(levels)
    let consumer = top.map(on: .immediate) { $0 }
    var i = 0
    while i < loop.pending.count { _ = loop.pending[i].succeed(i); i += 1 }
    precondition(consumer.outcome != nil)
}

/// Promises adopting pending futures: merged (`deep: false`), or, with a consumer on each promise,
/// adopting a map of a map of another promise's future (the case that walks for a cycle).
@inline(never) func adoptions(count: Int, deep: Bool) {
    let promises = (0..<count).map { _ in Promise<Int>() }
    let inners = (0..<count).map { _ in Promise<Int>() }
    let consumers = deep ? promises.map { $0.future.map(on: .immediate) { $0 } } : []
    for (promise, inner) in zip(promises, inners) {
        let target = deep ? inner.future.map(on: .immediate) { $0 }.map(on: .immediate) { $0 } : inner.future
        precondition(promise.complete(with: target))
    }
    for inner in inners { _ = inner.succeed(1) }
    precondition(promises.allSatisfy { $0.future.outcome?.value == 1 } && consumers.allSatisfy { $0.outcome != nil })
}

@inline(never) func progressChain(reports: Int) {
    let p = Promise<Int>()
    let q = Promise<Int>()
    let f = p.future.map(on: .immediate) { $0 }.flatMap(on: .immediate) { _ in q.future }.map(on: .immediate) { $0 }
    let box = Box()
    f.whenProgress(on: .immediate) { _ in box.n &+= 1 }
    for r in 1...reports { p.progress = Double(r) / Double(reports + 1) }
    _ = p.succeed(1)
    for r in 1...reports { q.progress = Double(r) / Double(reports + 1) }
    _ = q.succeed(2)
}

/// The benchmarks' scenario h: a promise, then `.immediate` map, flatMap, map, flatMap; 10 reports,
/// then success; with a `whenProgress(on: .immediate)` observer at the end, or none.
@inline(never) func observedChain(observed: Bool) {
    let p = Promise<Int>()
    let f = p.future.map(on: .immediate) { $0 &+ 1 }.flatMap(on: .immediate) { Future(value: $0 &+ 1) }
        .map(on: .immediate) { $0 &+ 1 }.flatMap(on: .immediate) { Future(value: $0 &+ 1) }
    let box = Box()
    if observed { f.whenProgress(on: .immediate) { _ in box.n &+= 1 } }
    for r in 1...10 { p.progress = Double(r) / 11 }
    _ = p.succeed(0)
    precondition(f.outcome?.value == 4)
}

@inline(never) func lateConsumers(levels: Int) {
    // A merged loop, then a consumer on every inner level (a split each), top down.
    let loop = Loop(observed: false)
    let top = loop.level(levels)
    var i = 0
    while i < levels { _ = loop.pending[i].succeed(i); i += 1 }
    var maps: [Future<Int>] = []
    for f in loop.futures { maps.append(f.map(on: .immediate) { $0 }) }
    _ = loop.pending[i].succeed(i)
    precondition(top.outcome != nil && maps.allSatisfy { $0.outcome != nil })
}

/// A map chain registered and run inside a callback's job on a serial queue: with the default
/// executor (`.current` resolves to that queue, and executor affinity runs every step in the job),
/// or `.immediate`, for the difference. The calling thread waits for the job.
@inline(never) func chainInJob(steps: Int, current: Bool) {
    let done = DispatchSemaphore(value: 0)
    Future(value: ()).whenSuccess(on: .queue(probeQueue)) { _ in
        let p = Promise<Int>()
        var f = p.future
        for _ in 0..<steps { f = current ? f.map { $0 + 1 } : f.map(on: .immediate) { $0 + 1 } }
        f.whenComplete(on: .immediate) { _ in done.signal() }
        _ = p.succeed(0)
    }
    done.wait()
}
let probeQueue = DispatchQueue(label: "probe")

let args = CommandLine.arguments
let which = args.count > 1 ? args[1] : "all"
let reps = args.count > 2 ? Int(args[2])! : 1
for _ in 0..<reps {
    switch which {
    case "map": mapChain(steps: 1000)
    case "pending": pendingWithCallback(count: 1000)
    case "all": all(members: 1000)
    case "loop": mergingLoop(levels: 1000, observed: false)
    case "observed": mergingLoop(levels: 1000, observed: true)
    case "progress": progressChain(reports: 10)
    case "chainOff": for _ in 0..<1000 { observedChain(observed: false) }
    case "chainObserved": for _ in 0..<1000 { observedChain(observed: true) }
    case "late": lateConsumers(levels: 1000)
    case "consumed": consumedLoop(levels: 1000)
    case "adopt": adoptions(count: 1000, deep: false)
    case "adoptDeep": adoptions(count: 1000, deep: true)
    case "currentInJob": chainInJob(steps: 1000, current: true)
    case "immediateInJob": chainInJob(steps: 1000, current: false)
    default: fatalError("unknown \(which)")
    }
}
