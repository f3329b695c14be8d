// The product is built with the package trait FuturesTracing: `swift test --traits FuturesTracing`.
#if FuturesTracing
import Dispatch
import Foundation
import Futures
import FuturesTestHelpers
import FuturesTestSupport
import FuturesTracing
import InMemoryTracing
import Testing
import Tracing

/// The test process's tracer: `InstrumentationSystem.bootstrap` may run once per process, and tests
/// run in parallel, so every test reads this one and tells its spans apart by the trace of a root
/// span of its own (``traced(_:)``). Reading it also installs the context carriers.
let tracer: InMemoryTracer = {
    _ = contextCarriersInstalled
    let tracer = InMemoryTracer()
    InstrumentationSystem.bootstrap(tracer)
    return tracer
}()

/// A root span of the test's own, around `body` (ended when `body` returns), and then the spans of
/// its trace that have finished so far.
struct Trace {
    let root: InMemorySpanContext

    /// The finished spans of this trace, by name.
    func finished(_ name: String) -> FinishedInMemorySpan? {
        tracer.finishedSpans.first { $0.traceID == root.traceID && $0.operationName == name }
    }

    /// The names of the finished spans of this trace (the root's included), in the order they ended.
    var finishedNames: [String] {
        tracer.finishedSpans.filter { $0.traceID == root.traceID }.map(\.operationName)
    }

    /// Whether the span named `name` of this trace has started and not ended.
    func isActive(_ name: String) -> Bool {
        tracer.activeSpans.contains { $0.traceID == root.traceID && $0.operationName == name }
    }
}

/// Runs `body` inside a new root span (which ends when `body` returns) and returns its trace.
func traced<R>(_ body: (Trace) throws -> R) rethrows -> (Trace, R) {
    _ = tracer
    return try withSpan("root") { span in
        let trace = Trace(root: span.context.inMemorySpanContext!)
        return (trace, try body(trace))
    }
}

/// The value of `future`, once every callback registered on it before this call has run: a span's
/// end among them. (An `await` of the future can return first: once the future is complete it
/// returns at once, while the thread that completed it may still be running its callbacks.)
/// Callbacks run in the order they were registered, so one registered here runs after them.
func valueAfterItsCallbacks<Value: Sendable>(_ future: Future<Value>) async throws -> Value {
    let outcome = await withCheckedContinuation { continuation in
        future.whenComplete(on: .immediate) { continuation.resume(returning: $0) }
    }
    return try outcome.get()
}

/// The span context current here, if any.
var currentSpan: InMemorySpanContext? { ServiceContext.current?.inMemorySpanContext }

struct Boom: Error {}

@Suite struct FutureWithSpanTests {
    @Test func theSpanEndsWhenTheFutureCompletesAndIsAChildOfTheCurrentSpan() throws {
        let promise = Promise<Int>()
        let (trace, future) = traced { _ in
            Future.withSpan("load user") { _ in promise.future }
        }
        #expect(trace.isActive("load user"), "the future is pending: its span goes on")
        promise.succeed(7)
        #expect(future.outcome?.value == 7)
        let span = try #require(trace.finished("load user"))
        #expect(span.parentSpanID == trace.root.spanID)
        #expect(span.errors.isEmpty)
        #expect(span.attributes["future.cancelled"] == nil)
    }

    @Test func theSpansContextIsCurrentInsideTheClosure() {
        let seen = Recorder<InMemorySpanContext?>()
        let (trace, _) = traced { _ in
            Future.withSpan("load") { span in
                seen.append(currentSpan)
                #expect(currentSpan == span.context.inMemorySpanContext)
                return Future(value: 1)
            }
        }
        #expect(seen.all.first??.parentSpanID == trace.root.spanID)
        #expect(trace.finished("load")?.spanID == seen.all.first??.spanID)
    }

    @Test func aFailureIsRecordedOnTheSpan() throws {
        let promise = Promise<Int>()
        let (trace, _) = traced { _ in Future.withSpan("fails") { _ in promise.future } }
        promise.fail(Boom())
        let span = try #require(trace.finished("fails"))
        #expect(span.errors.count == 1)
        #expect(span.errors.first?.error is Boom)
    }

    @Test func anErrorThrownByTheClosureFailsTheFutureAndIsRecorded() throws {
        let (trace, future) = traced { _ in Future<Int>.withSpan("throws") { _ in throw Boom() } }
        #expect(future.outcome?.error is Boom)
        let span = try #require(trace.finished("throws"))
        #expect(span.errors.first?.error is Boom)
    }

    @Test func aCancellationMarksTheSpan() throws {
        let promise = Promise<Int>()
        let (trace, future) = traced { _ in Future.withSpan("cancelled") { _ in promise.future } }
        #expect(future.cancel())
        #expect(promise.isCancelled, "the span observes: the future it returns is the closure's")
        let span = try #require(trace.finished("cancelled"))
        #expect(span.attributes["future.cancelled"]?.toSpanAttribute() == .bool(true))
        #expect(span.errors.isEmpty)
    }

    /// A future that can never complete drops its callback at once: the span ends then, marked
    /// abandoned, instead of staying open for ever.
    @Test func aSpanAroundANeverCompletingFutureEndsMarkedAbandoned() throws {
        let (trace, future) = traced { _ in Future<Int>.withSpan("never") { _ in .never } }
        #expect(future.isPending)
        let span = try #require(trace.finished("never"))
        #expect(span.attributes["future.abandoned"]?.toSpanAttribute() == .bool(true))
        #expect(!trace.isActive("never"))
    }

    /// One rooted in `never` keeps its callback while it lives, and ends the span when it is freed.
    @Test func aSpanAroundAFutureRootedInNeverEndsWhenTheFutureIsFreed() throws {
        let (trace, _) = traced { trace in
            let mapped = Future.withSpan("rooted in never") { _ in Future<Int>.never.map(on: .immediate) { $0 } }
            #expect(trace.isActive("rooted in never"))
            return mapped.isPending
        }
        let span = try #require(trace.finished("rooted in never"))
        #expect(span.attributes["future.abandoned"]?.toSpanAttribute() == .bool(true))
    }

    @Test func aSpanDoesNotStartADeferredFutureAndEndsWhenAConsumerHasRunIt() throws {
        let starts = Locked(0)
        let (trace, future) = traced { _ in
            Future<Int>.withSpan("deferred") { _ in
                Future.deferred {
                    starts.set(starts.get() + 1)
                    return Future(value: 1)
                }
            }
        }
        #expect(starts.get() == 0, "the span is not a consumer: the work waits for one")
        #expect(trace.isActive("deferred"))
        #expect(future.map(on: .immediate) { $0 + 1 }.outcome?.value == 2)
        #expect(starts.get() == 1)
        let span = try #require(trace.finished("deferred"))
        #expect(span.attributes["future.abandoned"] == nil)
    }

    @Test func aSpanAroundADeferredFutureNobodyStartedEndsMarkedAbandonedWhenItIsFreed() throws {
        let starts = Locked(0)
        let (trace, _) = traced { trace in
            let future = Future<Int>.withSpan("never started") { _ in
                Future.deferred {
                    starts.set(starts.get() + 1)
                    return Future(value: 1)
                }
            }
            #expect(trace.isActive("never started"))
            return future.isPending
        }
        #expect(starts.get() == 0)
        let span = try #require(trace.finished("never started"))
        #expect(span.attributes["future.abandoned"]?.toSpanAttribute() == .bool(true))
    }

    @Test func aSpanAroundADeferredFutureCancelledBeforeItStartsIsMarkedCancelled() throws {
        let starts = Locked(0)
        let (trace, future) = traced { _ in
            Future<Int>.withSpan("cancelled unstarted") { _ in
                Future.deferred {
                    starts.set(starts.get() + 1)
                    return Future(value: 1)
                }
            }
        }
        #expect(future.cancel())
        #expect(starts.get() == 0)
        let span = try #require(trace.finished("cancelled unstarted"))
        #expect(span.attributes["future.cancelled"]?.toSpanAttribute() == .bool(true))
        #expect(span.attributes["future.abandoned"] == nil)
    }

    @Test func aCallbackRegisteredOutsideAnySpanIsNotAChildOfTheSpanThatCompletesItsFuture() throws {
        let executor = ManualExecutor()
        let promise = Promise<Int>()
        let seen = Locked<[InMemorySpanContext?]>([])
        ServiceContext.withValue(nil) {
            promise.future.whenSuccess(on: executor) { _ in seen.set(seen.get() + [currentSpan]) }
            promise.future.whenSuccess(on: .immediate) { _ in seen.set(seen.get() + [currentSpan]) }
        }
        let (trace, _) = traced { _ in
            Future<Int>.withSpan("completer") { _ in
                promise.succeed(1)
                return Future(value: 1)
            }
        }
        _ = traced { _ in Future<Int>.withSpan("runner") { _ in Future(value: executor.runAll()) } }
        #expect(trace.finished("completer") != nil)
        #expect(seen.get().count == 2)
        #expect(seen.get().allSatisfy { $0 == nil }, "\(seen.get())")
    }

    @Test func cancellingATracedChainEndsEverySpanInItMarkedCancelled() throws {
        let promise = Promise<Int>()
        let (trace, chain) = traced { _ in
            Future.withSpan("outer") { _ in
                Future.withSpan("inner") { _ in promise.future }.map(on: .immediate) { $0 + 1 }
            }
        }
        #expect(chain.cancel())
        #expect(promise.isCancelled, "the last consumer withdrew")
        for name in ["inner", "outer"] {
            let span = try #require(trace.finished(name))
            #expect(span.attributes["future.cancelled"]?.toSpanAttribute() == .bool(true))
        }
        #expect(trace.finished("inner")?.parentSpanID == trace.finished("outer")?.spanID)
    }

    @Test func spansStartedInCallbacksOnOtherExecutorsAreChildrenOfTheSpanWhereTheyWereRegistered() throws {
        let first = ManualExecutor()
        let second = ManualExecutor()
        let promise = Promise<Int>()
        let (trace, future) = traced { _ in
            Future.withSpan("parent") { _ in
                promise.future.flatMap(on: first) { value in
                    Future.withSpan("child") { _ in
                        Future(value: value).flatMap(on: second) { value in
                            Future.withSpan("grandchild") { _ in Future(value: value * 2) }
                        }
                    }
                }
            }
        }
        // Completed and run where no span is current.
        promise.succeed(21)
        _ = first.runAll()
        _ = second.runAll()
        #expect(future.outcome?.value == 42)
        let parent = try #require(trace.finished("parent"))
        let child = try #require(trace.finished("child"))
        let grandchild = try #require(trace.finished("grandchild"))
        #expect(parent.parentSpanID == trace.root.spanID)
        #expect(child.parentSpanID == parent.spanID)
        #expect(grandchild.parentSpanID == child.spanID)
    }

    @Test func aSpanStartedInACallbackOnAGlobalQueueIsAChildOfTheRegisteringSpan() async throws {
        let promise = Promise<Int>()
        let (trace, future) = traced { _ in
            Future.withSpan("parent") { _ in
                promise.future.flatMap(on: .global()) { value in
                    Future.withSpan("on a global queue") { _ in Future(value: value) }
                }
            }
        }
        DispatchQueue(label: "completer").async { promise.succeed(1) }
        #expect(try await valueAfterItsCallbacks(future) == 1)
        let parent = try #require(trace.finished("parent"))
        #expect(trace.finished("on a global queue")?.parentSpanID == parent.spanID)
    }

    @Test func aJoinOfTracedFuturesNestsItsMembersSpansUnderTheSpanAroundIt() throws {
        let first = Promise<Int>()
        let second = Promise<Int>()
        let executor = ManualExecutor()
        let seenOnTheJoin = Recorder<InMemorySpanContext?>()
        let (trace, join) = traced { _ in
            Future.withSpan("both") { _ in
                let all = Future.all([
                    Future.withSpan("first") { _ in first.future },
                    Future.withSpan("second") { _ in second.future },
                ])
                all.whenComplete(on: executor) { _ in seenOnTheJoin.append(currentSpan) }
                return all
            }
        }
        second.succeed(2)
        #expect(trace.finished("second") != nil)
        #expect(trace.isActive("both"), "the join waits for its first member")
        first.succeed(1)
        _ = executor.runAll()
        #expect(join.outcome?.value == [1, 2])
        let both = try #require(trace.finished("both"))
        #expect(trace.finished("first")?.parentSpanID == both.spanID)
        #expect(trace.finished("second")?.parentSpanID == both.spanID)
        #expect(seenOnTheJoin.all.map { $0?.spanID } == [both.spanID])
    }

    @Test func theSpanAroundAFutureIsCurrentInEveryKindOfCallbackRegisteredInIt() async throws {
        let executor = ManualExecutor()
        let clock = ManualClock()
        let succeeding = Promise<Int>()
        let failing = Promise<Int>()
        let seen = Recorder<String>()
        @Sendable func note(_ kind: String) { seen.append("\(kind) \(currentSpan?.spanID ?? "none")") }
        var spanID: String?
        var timedOut: Future<Int>!
        var asyncWork: Future<String?>!
        let (trace, _) = traced { _ in
            Future.withSpan("callbacks") { span in
                spanID = span.context.inMemorySpanContext?.spanID
                _ = succeeding.future.map(on: executor) { _ in note("map") }
                _ = succeeding.future.flatMap(on: executor) { value in
                    note("flatMap")
                    return Future(value: value)
                }
                succeeding.future.whenComplete(on: executor) { _ in note("whenComplete") }
                succeeding.future.whenSuccess(on: executor) { _ in note("whenSuccess") }
                succeeding.future.whenProgress(on: executor) { _ in note("whenProgress") }
                failing.future.whenFailure(on: executor) { _ in note("whenFailure") }
                Future.all([succeeding.future]).whenSuccess(on: executor) { _ in note("join") }
                timedOut = Future<Int>.never.timeout(after: .seconds(1), clock: clock)
                timedOut.whenFailure(on: executor) { _ in note("timeout") }
                asyncWork = Future { () async -> String? in
                    await Task.yield()
                    return currentSpan?.spanID
                }
                return succeeding.future
            }
        }
        // Completed, and the callbacks run, where no span is current.
        succeeding.progress = 0.5
        succeeding.succeed(1)
        failing.fail(Boom())
        clock.advance(by: .seconds(1))
        _ = await timedOut.result
        let fromTheTask = try await asyncWork.value
        _ = executor.runAll()
        let id = try #require(spanID)
        #expect(trace.finished("callbacks")?.spanID == id)
        #expect(fromTheTask == id)
        #expect(
            Set(seen.all) == Set(
                ["map", "flatMap", "whenComplete", "whenSuccess", "whenProgress", "whenFailure", "join", "timeout"]
                    .map { "\($0) \(id)" }))
    }
}

@Suite struct FuturesTracingBootstrapTests {
    @Test func bootstrapCarriesTheServiceContextIntoCallbacks() async {
        await #expect(processExitsWith: .success) {
            FuturesTracing.bootstrap()
            var context = ServiceContext.topLevel
            context[RequestKey.self] = "request 1"
            let promise = Promise<Int>()
            let done = DispatchSemaphore(value: 0)
            let seen = Locked<String?>(nil)
            ServiceContext.withValue(context) {
                promise.future.whenSuccess(on: .global()) { _ in
                    seen.set(ServiceContext.current?[RequestKey.self])
                    done.signal()
                }
            }
            promise.succeed(1)
            done.wait()
            if seen.get() != "request 1" { exit(1) }
        }
    }

    @Test func aSecondBootstrapTraps() async {
        await #expect(processExitsWith: .failure) {
            FuturesTracing.bootstrap()
            FuturesTracing.bootstrap()
        }
    }
}

enum RequestKey: ServiceContextKey {
    typealias Value = String
}

/// A value several threads read and write.
final class Locked<Value: Sendable>: @unchecked Sendable {
    // Safety: `value` is only touched while holding `lock`.
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) { self.value = value }

    func get() -> Value { lock.withLock { value } }
    func set(_ newValue: Value) { lock.withLock { value = newValue } }
}
#endif
