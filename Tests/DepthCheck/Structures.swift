// The structures of the stack-safety matrix, and how a case runs (see main.swift).
import CHeapStatistics
import Dispatch
import Foundation
import Futures

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

struct Boom: Error {}

/// How a case ends its structure.
enum Ending: String, CaseIterable {
    /// Every producer succeeds, innermost first.
    case succeed
    /// The innermost producer fails; the others succeed.
    case failRoot = "fail-root"
    /// Every producer fails.
    case failAll = "fail-all"
    /// The outermost future is cancelled (then the producers complete, too late).
    case cancelOuter = "cancel-outer"
    /// The innermost producer cancels its own future; the others succeed.
    case cancelInner = "cancel-inner"
    /// A timeout on the outermost future fires.
    case timeout
    /// Every reference is dropped while the structure is pending.
    case drop
}

/// What an outcome must be.
enum Kind: String {
    case success, failure, cancelled, timedOut
    /// Any outcome (the rules leave it open, or the ending does not ask).
    case settled

    func matches<V>(_ outcome: Outcome<V>?) -> Bool {
        guard let outcome else { return false }
        switch (self, outcome) {
        case (.settled, _), (.success, .success), (.cancelled, .cancelled): return true
        case (.failure, .failure(let error)): return (error as? FutureError) != .timedOut
        case (.timedOut, .failure(let error)): return (error as? FutureError) == .timedOut
        default: return false
        }
    }
}

/// A structure, built and ready to be ended.
final class Built: @unchecked Sendable {
    // Safety: touched by the case's thread only, and by the ending's callbacks after it handed off.
    var outer: Future<Int>?
    /// The innermost producer (absent for token structures rooted in a source).
    var root: Promise<Int>?
    /// The other producers (a join's second member at each level), innermost first.
    var others: [Promise<Int>] = []
    /// The innermost cancellation source of a token structure.
    var rootSource: CancellationSource?
    /// The other sources of a token structure, innermost first.
    var otherSources: [CancellationSource] = []
    /// Everything else the structure needs alive (sources, queues, caches).
    var keep: [Any] = []
    /// Set when the innermost producer hears its cancellation.
    let rootHeardCancel = Counter()
    /// A check of its own after the ending (for instance, how many operations started).
    var extraCheck: ((Ending) -> String?)?

    init() {}
}

final class Counter: @unchecked Sendable {
    // Safety: every access holds `lock`.
    private let lock = NSLock()
    private var count = 0
    func add() { lock.withLock { count += 1 } }
    var value: Int { lock.withLock { count } }
}

/// One kind of structure: how to build it at a depth, and what each ending must give.
struct Structure {
    let name: String
    /// "chain" (100,000 levels) or "join" (20,000).
    let kind: String
    let endings: [Ending]
    let build: (Int) -> Built
    /// The outermost future's outcome, and whether the innermost producer hears its cancellation
    /// (`nil`: not asked), for each ending.
    let expect: (Ending) -> (outer: Kind, rootCancelled: Bool?)
}

/// A root promise whose cancellation is counted.
func rootPromise(_ built: Built) -> Promise<Int> {
    let promise = Promise<Int>()
    let heard = built.rootHeardCancel
    promise.onCancel { heard.add() }
    built.root = promise
    return promise
}

/// A chain of `depth` steps on the root promise's future.
func chain(_ step: @escaping (Future<Int>, Int) -> Future<Int>) -> (Int) -> Built {
    { n in
        let built = Built()
        var future = rootPromise(built).future
        for level in 0..<n { future = step(future, level) }
        built.outer = future
        return built
    }
}

/// A nest of `depth` joins: each level joins the level below with a new producer's future.
func nest(_ join: @escaping (Future<Int>, Future<Int>) -> Future<Int>) -> (Int) -> Built {
    { n in
        let built = Built()
        var future = rootPromise(built).future
        for _ in 0..<n {
            let other = Promise<Int>()
            built.others.append(other)
            future = join(future, other.future)
        }
        built.outer = future
        return built
    }
}

let allEndings: [Ending] = [.succeed, .failRoot, .failAll, .cancelOuter, .cancelInner, .timeout, .drop]
let chainEndings: [Ending] = [.succeed, .failRoot, .cancelOuter, .cancelInner, .timeout, .drop]

/// The usual expectations of a chain that passes values and errors through and consumes its source.
func passThrough(_ ending: Ending) -> (outer: Kind, rootCancelled: Bool?) {
    switch ending {
    case .succeed: (.success, false)
    case .failRoot, .failAll: (.failure, false)
    case .cancelOuter: (.cancelled, true)
    case .cancelInner: (.cancelled, true)
    case .timeout: (.timedOut, true)
    case .drop: (.settled, nil)
    }
}

func sum(_ values: [Int]) -> Int { values.reduce(0, &+) }

/// The expectations of a join that waits for every member and succeeds whatever they end in.
func settlesEveryMember(_ ending: Ending) -> (outer: Kind, rootCancelled: Bool?) {
    switch ending {
    case .failRoot, .failAll, .cancelInner: (.success, ending == .cancelInner)
    default: passThrough(ending)
    }
}


/// Every structure the matrix checks.
func makeStructures() -> [Structure] { [
    Structure(name: "map", kind: "chain", endings: chainEndings,
              build: chain { f, _ in f.map(on: .immediate) { $0 &+ 1 } }, expect: passThrough),
    Structure(name: "flatMap", kind: "chain", endings: chainEndings,
              build: chain { f, _ in f.flatMap(on: .immediate) { Future(value: $0 &+ 1) } }, expect: passThrough),
    Structure(name: "mapError", kind: "chain", endings: chainEndings,
              build: chain { f, _ in f.mapError(on: .immediate) { $0 } }, expect: passThrough),
    Structure(name: "recover", kind: "chain", endings: chainEndings,
              build: chain { f, _ in f.recover(on: .immediate) { _ in 0 } },
              expect: { ending in
                  ending == .failRoot ? (.success, false) : passThrough(ending)
              }),
    Structure(name: "flatMapError", kind: "chain", endings: chainEndings,
              build: chain { f, _ in f.flatMapError(on: .immediate) { Future(error: $0) } }, expect: passThrough),
    Structure(name: "always", kind: "chain", endings: chainEndings,
              build: chain { f, _ in f.always(on: .immediate) { _ in } }, expect: passThrough),
    Structure(name: "mapOutcome", kind: "chain", endings: chainEndings,
              build: chain { f, _ in
                  f.mapOutcome(on: .immediate) { outcome -> Int in
                      switch outcome {
                      case .success(let value): return value
                      case .failure(let error): throw error
                      case .cancelled: throw CancellationError()
                      }
                  }
              }, expect: passThrough),
    Structure(name: "flatMapOutcome", kind: "chain", endings: chainEndings,
              build: chain { f, _ in f.flatMapOutcome(on: .immediate) { Future(outcome: $0) } }, expect: passThrough),
    Structure(name: "flatten", kind: "chain", endings: chainEndings,
              build: chain { f, _ in Future<Future<Int>>(value: f).flatten() }, expect: passThrough),
    Structure(name: "observe", kind: "chain", endings: chainEndings,
              build: chain { f, _ in f.observe() },
              expect: { ending in
                  // A branch's cancellation never reaches its source.
                  switch ending {
                  case .cancelOuter, .timeout: (passThrough(ending).outer, false)
                  default: passThrough(ending)
                  }
              }),
    Structure(name: "cancellable", kind: "chain", endings: chainEndings,
              build: { n in
                  let built = Built()
                  // A live token, never cancelled, released with the structure.
                  let source = CancellationSource()
                  built.keep.append(source)
                  var future = rootPromise(built).future
                  for _ in 0..<n { future = future.cancellable(by: source.token) }
                  built.outer = future
                  return built
              }, expect: passThrough),
    Structure(name: "timeout", kind: "chain", endings: chainEndings,
              build: chain { f, _ in f.timeout(after: .seconds(3600)) }, expect: passThrough),
    Structure(name: "delayed", kind: "chain", endings: chainEndings,
              build: chain { f, _ in f.delayed(by: .zero) }, expect: passThrough),
    Structure(name: "deferred", kind: "chain", endings: chainEndings,
              build: chain { f, _ in Future.deferred { f } }, expect: passThrough),
    // One deferred future observed `depth` times without being started (what `Future.withSpan`
    // does to a deferred future, once per span): each observer waits in the future's callbacks, so
    // starting it, or freeing it unstarted, must not run a nest of `depth` closures.
    Structure(name: "observedDeferred", kind: "chain", endings: chainEndings,
              build: { n in
                  let built = Built()
                  let root = rootPromise(built).future
                  let deferred = Future.deferred { root }
                  for _ in 0..<n { deferred.whenCompleteWithoutStarting { _ in } }
                  built.outer = deferred
                  return built
              }, expect: passThrough),
    Structure(name: "retry", kind: "chain", endings: chainEndings,
              build: chain { f, _ in Future.retry(attempts: 1) { f } }, expect: passThrough),
    Structure(name: "queue", kind: "chain", endings: chainEndings,
              build: { n in
                  let built = Built()
                  let queue = FutureQueue(maxConcurrent: Int.max)
                  built.keep.append(queue)
                  var future = rootPromise(built).future
                  for _ in 0..<n { let inner = future; future = queue.add { inner } }
                  built.outer = future
                  return built
              }, expect: passThrough),
    Structure(name: "cache", kind: "chain", endings: chainEndings,
              build: { n in
                  let built = Built()
                  let cache = FutureCache<Int, Int>()
                  built.keep.append(cache)
                  var future = rootPromise(built).future
                  for key in 0..<n { let inner = future; future = cache.value(for: key) { inner } }
                  built.outer = future
                  return built
              }, expect: passThrough),
    Structure(name: "operation", kind: "join", endings: chainEndings,
              build: { n in
                  let built = Built()
                  let queue = OperationQueue()
                  queue.maxConcurrentOperationCount = OperationQueue.defaultMaxConcurrentOperationCount
                  built.keep.append(queue)
                  var future = rootPromise(built).future
                  for _ in 0..<n { let inner = future; future = queue.addFuture { inner } }
                  built.outer = future
                  return built
              }, expect: { ending in
                  // Cancelled (or timed out) before the queue ran them, the operations never
                  // consumed the root: whether it hears a cancellation depends on the queue's timing.
                  switch ending {
                  case .cancelOuter, .timeout: (passThrough(ending).outer, nil)
                  default: passThrough(ending)
                  }
              }),
    Structure(name: "serially", kind: "chain", endings: chainEndings,
              build: { n in
                  let built = Built()
                  let root = rootPromise(built).future
                  built.outer = Future.serially(0..<n) { index in index == 0 ? root : Future(value: index) }.map(on: .immediate) { $0.count }
                  return built
              }, expect: passThrough),
    Structure(name: "concurrently", kind: "chain", endings: chainEndings,
              build: { n in
                  let built = Built()
                  let root = rootPromise(built).future
                  let started = Counter()
                  let others = (0..<2).map { _ in Promise<Int>() }
                  built.others = others
                  built.outer = Future.concurrently(0..<n, limit: 3) { index in
                      started.add()
                      switch index {
                      case 0: return root
                      case 1, 2: return others[index - 1].future
                      default: return Future(value: index)
                      }
                  }.map(on: .immediate) { $0.count }
                  built.extraCheck = { ending in
                      // Cancelled, or failed fast, while the first three were pending: nothing more starts.
                      let ended: Set<Ending> = [.cancelOuter, .timeout, .failRoot, .cancelInner]
                      if ended.contains(ending), started.value != 3 { return "\(started.value) operations started, not 3" }
                      return nil
                  }
                  return built
              }, expect: { ending in
                  switch ending {
                  case .cancelInner: (.failure, true)  // a member cancelled from outside fails the join
                  default: passThrough(ending)
                  }
              }),
    // Joins, nested: each level joins the one below with a new producer's future.
    Structure(name: "all-failFast", kind: "join", endings: allEndings,
              build: nest { a, b in Future.all([a, b], policy: .failFast).map(on: .immediate, sum) },
              expect: { ending in
                  ending == .cancelInner ? (.failure, true) : passThrough(ending)
              }),
    // The same, with its progress followed from the outermost future: each join, followed for the
    // first time, observes its members, and the member below is a join that does the same.
    Structure(name: "all-progress", kind: "join", endings: allEndings,
              build: { n in
                  let built = nest { a, b in Future.all([a, b], policy: .failFast).map(on: .immediate, sum) }(n)
                  let seen = Counter()
                  built.outer!.whenProgress(on: .immediate) { _ in seen.add() }
                  built.root!.progress = 0.5
                  built.extraCheck = { ending in
                      ending == .succeed && seen.value == 0 ? "the observer never heard the final progress" : nil
                  }
                  return built
              },
              expect: { ending in
                  ending == .cancelInner ? (.failure, true) : passThrough(ending)
              }),
    Structure(name: "all-collectErrors", kind: "join", endings: allEndings,
              build: nest { a, b in Future.all([a, b], policy: .collectErrors).map(on: .immediate, sum) },
              expect: { ending in
                  ending == .cancelInner ? (.failure, true) : passThrough(ending)
              }),
    Structure(name: "all-ignoreErrors", kind: "join", endings: allEndings,
              build: nest { a, b in Future.all([a, b], policy: .ignoreErrors).map(on: .immediate, sum) },
              expect: settlesEveryMember),
    Structure(name: "allSettled", kind: "join", endings: allEndings,
              build: nest { a, b in Future.allSettled([a, b]).map(on: .immediate) { $0.count } },
              expect: settlesEveryMember),
    Structure(name: "allOrNil", kind: "join", endings: allEndings,
              build: nest { a, b in Future.allOrNil([a, b]).map(on: .immediate) { $0.count } },
              expect: settlesEveryMember),
    Structure(name: "zip", kind: "join", endings: allEndings,
              build: nest { a, b in Future.zip(a, b).map(on: .immediate) { $0 &+ $1 } },
              expect: { ending in
                  ending == .cancelInner ? (.failure, true) : passThrough(ending)
              }),
    // A race nested directly in a race, its progress followed: the leader's reports pass each level.
    Structure(name: "race-progress", kind: "join", endings: allEndings,
              build: { n in
                  let built = nest { a, b in Future.race([a, b]) }(n)
                  let seen = Counter()
                  built.outer!.whenProgress(on: .immediate) { _ in seen.add() }
                  built.root!.progress = 0.5
                  built.extraCheck = { _ in seen.value == 0 ? "the observer never heard the root's report" : nil }
                  return built
              },
              expect: { ending in
                  switch ending {
                  case .cancelInner: (.success, true)
                  default: passThrough(ending)
                  }
              }),
    Structure(name: "race", kind: "join", endings: allEndings,
              build: nest { a, b in Future.race([a, b]) },
              expect: { ending in
                  switch ending {
                  // The innermost member completes first, and so wins every level.
                  case .cancelInner: (.success, true)  // a member cancelled from outside is ignored
                  default: passThrough(ending)
                  }
              }),
    Structure(name: "any", kind: "join", endings: allEndings,
              build: nest { a, b in Future.any([a, b]) },
              expect: { ending in
                  switch ending {
                  case .failRoot, .cancelInner: (.success, ending == .cancelInner)
                  default: passThrough(ending)
                  }
              }),
    Structure(name: "raceOperations", kind: "join", endings: allEndings,
              build: { n in
                  let built = Built()
                  var future = rootPromise(built).future
                  // The winners' tokens live until this fires, or is released with the structure.
                  let until = CancellationSource()
                  built.keep.append(until)
                  for _ in 0..<n {
                      let other = Promise<Int>()
                      built.others.append(other)
                      let inner = future
                      future = Future.race([{ _ in inner }, { _ in other.future }], until: until.token)
                  }
                  built.outer = future
                  return built
              },
              expect: { ending in
                  switch ending {
                  case .failRoot, .cancelInner: (.success, ending == .cancelInner)
                  default: passThrough(ending)
                  }
              }),
    Structure(name: "orderedByCompletion", kind: "join", endings: allEndings,
              build: nest { a, b in [a, b].orderedByCompletion()[1] },
              expect: { ending in
                  switch ending {
                  // The last to complete at each level is that level's other producer.
                  case .failRoot, .cancelInner: (.success, ending == .cancelInner)
                  // A slot does not consume the members.
                  case .cancelOuter, .timeout: (passThrough(ending).outer, false)
                  default: passThrough(ending)
                  }
              }),
    // Token structures: the outermost future is a promise cancelled by the last token.
    Structure(name: "either", kind: "join", endings: [.cancelInner, .cancelOuter, .drop],
              build: tokenChain { token, next in CancellationToken.either(token, next) }, expect: tokenExpectation),
    Structure(name: "both", kind: "join", endings: [.cancelInner, .cancelOuter, .drop],
              build: tokenChain { token, next in CancellationToken.both(token, next) }, expect: tokenExpectation),
    Structure(name: "linkedSource", kind: "join", endings: [.cancelInner, .cancelOuter, .drop],
              build: tokenChain { token, _ in CancellationSource(linkedTo: token).keptToken() }, expect: tokenExpectation),
    Structure(name: "completionToken", kind: "join", endings: [.succeed, .cancelOuter, .cancelInner, .drop],
              build: { n in
                  let built = Built()
                  var future = rootPromise(built).future
                  for _ in 0..<n {
                      let promise = Promise<Int>(cancelledBy: future.completionToken)
                      built.keep.append(promise)
                      future = promise.future
                  }
                  built.outer = future
                  return built
              },
              expect: { ending in
                  switch ending {
                  case .succeed, .cancelInner: (.cancelled, ending == .cancelInner)
                  case .cancelOuter: (.cancelled, false)  // a token is not a consumer
                  default: (.settled, nil)
                  }
              }),
] }

/// Keeps linked sources alive: a released source's token can never fire.
nonisolated(unsafe) var linkedSources: [CancellationSource] = []
extension CancellationSource {
    func keptToken() -> CancellationToken {
        linkedSources.append(self)
        return token
    }
}

func tokenChain(_ combine: @escaping (CancellationToken, CancellationToken) -> CancellationToken) -> (Int) -> Built {
    { n in
        let built = Built()
        let rootSource = CancellationSource()
        built.rootSource = rootSource
        var token = rootSource.token
        var sources: [CancellationSource] = []
        for _ in 0..<n {
            let next = CancellationSource()
            sources.append(next)
            token = combine(token, next.token)
        }
        built.keep.append(sources)
        built.otherSources = sources
        let promise = Promise<Int>(cancelledBy: token)
        built.outer = promise.future
        built.keep.append(promise)
        return built
    }
}

func tokenExpectation(_ ending: Ending) -> (outer: Kind, rootCancelled: Bool?) {
    switch ending {
    case .cancelInner, .cancelOuter: (.cancelled, nil)
    default: (.settled, nil)
    }
}

// MARK: - Running a case

/// Ends `built` as `ending` says; returns a failure message, or `nil`.
func end(_ built: Built, _ ending: Ending, _ structure: Structure) -> String? {
    let expected = structure.expect(ending)
    guard let outer = built.outer else { return "nothing was built" }
    let done = DispatchSemaphore(value: 0)
    var watched = outer
    switch ending {
    case .drop:
        return nil
    case .timeout:
        watched = outer.timeout(after: .milliseconds(1))
    default:
        break
    }
    watched.whenComplete(on: .immediate) { _ in done.signal() }
    switch ending {
    case .succeed:
        built.root?.succeed(1)
        for other in built.others { other.succeed(1) }
    case .failRoot:
        built.root?.fail(Boom())
        for other in built.others { other.succeed(1) }
    case .failAll:
        built.root?.fail(Boom())
        for other in built.others { other.fail(Boom()) }
    case .cancelOuter:
        if !outer.cancel() { return "cancelling the outermost future changed nothing" }
    case .cancelInner:
        if let root = built.root { root.cancel() }
        built.rootSource?.cancel()
        for other in built.otherSources { other.cancel() }
        for other in built.others { other.succeed(1) }
    case .timeout, .drop:
        break
    }
    if done.wait(timeout: .now() + 120) == .timedOut { return "the outermost future did not complete in 120 s" }
    if ending == .timeout {
        if !Kind.timedOut.matches(watched.outcome) { return "the timeout ended \(String(describing: watched.outcome))" }
        if expected.rootCancelled == true, outer.outcome?.isCancelled != true {
            return "the timed-out future ended \(String(describing: outer.outcome)), not cancelled"
        }
    } else if !expected.outer.matches(outer.outcome) {
        return "the outermost future ended \(String(describing: outer.outcome)), expected \(expected.outer)"
    }
    if let rootCancelled = expected.rootCancelled {
        let heard = built.rootHeardCancel.value
        if heard != (rootCancelled ? 1 : 0) { return "the innermost producer heard \(heard) cancellations" }
    }
    if let message = built.extraCheck?(ending) { return message }
    // Complete what is left, too late to matter.
    built.root?.succeed(1)
    for other in built.others { other.succeed(1) }
    return nil
}

/// Runs `body` on a new thread with a 512 KiB stack and waits for it.
func onSmallStack(_ body: @escaping () -> Void) {
    final class Box { let body: () -> Void; init(_ body: @escaping () -> Void) { self.body = body } }
    var attributes = pthread_attr_t()
    pthread_attr_init(&attributes)
    pthread_attr_setstacksize(&attributes, 512 * 1024)
    let argument = Unmanaged.passRetained(Box(body)).toOpaque()
    #if canImport(Darwin)
    var thread: pthread_t?
    #else
    var thread = pthread_t()
    #endif
    let error = pthread_create(&thread, &attributes, { argument in
        #if canImport(Darwin)
        Unmanaged<Box>.fromOpaque(argument).takeRetainedValue().body()
        #else
        Unmanaged<Box>.fromOpaque(argument!).takeRetainedValue().body()
        #endif
        return nil
    }, argument)
    precondition(error == 0, "pthread_create failed: \(error)")
    #if canImport(Darwin)
    pthread_join(thread!, nil)
    #else
    pthread_join(thread, nil)
    #endif
    pthread_attr_destroy(&attributes)
}

/// Runs one case at `depth`: returns a failure message, or `nil`.
func run(_ structure: Structure, _ ending: Ending, depth: Int) -> String? {
    var failure: String?
    onSmallStack {
        var built: Built? = structure.build(depth)
        failure = end(built!, ending, structure)
        built = nil
        linkedSources = []
    }
    return failure
}

/// Waits (up to 30 s) for the heap to come back to `baseline` plus `slack`; returns the bytes kept.
func heapKept(since baseline: Int, slack: Int) -> Int {
    var kept = Int(heap_statistics_in_use()) - baseline
    for _ in 0..<3000 where kept > slack {
        usleep(10_000)  // work handed to other threads (timers, queues) may still hold the structure
        kept = Int(heap_statistics_in_use()) - baseline
    }
    return kept
}

/// Processor time the process has used (every thread, user and system), in microseconds: unlike
/// the wall clock, it does not count the time other processes held the cores.
func cpuMicroseconds() -> Int {
    var usage = rusage()
    #if canImport(Glibc)
    getrusage(RUSAGE_SELF.rawValue, &usage)
    #else
    getrusage(RUSAGE_SELF, &usage)
    #endif
    let user = Int(usage.ru_utime.tv_sec) * 1_000_000 + Int(usage.ru_utime.tv_usec)
    let system = Int(usage.ru_stime.tv_sec) * 1_000_000 + Int(usage.ru_stime.tv_usec)
    return user + system
}

func peakKiB() -> Int {
    var usage = rusage()
    #if canImport(Glibc)
    getrusage(RUSAGE_SELF.rawValue, &usage)
    #else
    getrusage(RUSAGE_SELF, &usage)
    #endif
    return Int(usage.ru_maxrss)
}

