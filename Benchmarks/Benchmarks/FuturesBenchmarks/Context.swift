import Benchmark
import Dispatch
import Futures

// MARK: (n) context carriers: the b `.immediate` and e rows with a carrier installed

// Each benchmark runs in a process of its own, so a row that installs a carrier (once per process:
// `FutureContext.bootstrap` may run once) leaves the b and e rows, where none is installed, as they
// were.

/// A task-local value, the kind of thing a carrier follows (a request's context, a trace's).
enum BenchmarkContext {
    @TaskLocal static var value: Int?
}

/// Carries ``BenchmarkContext/value``: captures it when it is set, restores it with `withValue`.
struct TaskLocalCarrier: FutureContextCarrier {
    let value: Int

    static func capture() -> TaskLocalCarrier? { BenchmarkContext.value.map(TaskLocalCarrier.init) }

    func restore<R>(_ body: () throws -> R) rethrows -> R {
        try BenchmarkContext.$value.withValue(value, operation: body)
    }

    static func withoutValue<R>(_ body: () throws -> R) rethrows -> R {
        try BenchmarkContext.$value.withValue(nil, operation: body)
    }
}

/// Always captures, restores nothing: the library's own cost of carrying a value.
struct TrivialCarrier: FutureContextCarrier {
    static func capture() -> TrivialCarrier? { TrivialCarrier() }

    func restore<R>(_ body: () throws -> R) rethrows -> R { try body() }

    static func withoutValue<R>(_ body: () throws -> R) rethrows -> R { try body() }
}

let taskLocalCarrierInstalled: Void = FutureContext.bootstrap(TaskLocalCarrier.self)
let trivialCarrierInstalled: Void = FutureContext.bootstrap(TrivialCarrier.self)

/// The b `.immediate` row's body.
func immediateChain(_ benchmark: Benchmark) {
    measure(benchmark) {
        let promise = Promise<Int>()
        var future = promise.future
        for _ in benchmark.scaledIterations {
            future = future.map(on: .immediate) { $0 &+ 1 }
        }
        promise.succeed(0)
        Benchmark.blackHole(future.outcome)
    }
}

/// The e row "pending+1 callback, non-capturing, .immediate"'s body.
func pendingWithOneCallback(_ benchmark: Benchmark) {
    var pending: [Promise<Int>] = []
    pending.reserveCapacity(benchmark.scaledIterations.count)
    measure(benchmark) {
        for _ in benchmark.scaledIterations {
            let promise = Promise<Int>()
            promise.future.whenSuccess(on: .immediate) { Benchmark.blackHole($0) }
            pending.append(promise)
        }
    }
    for promise in pending { promise.succeed(1) }
}

func scenarioN() {
    Benchmark("n.map chain .immediate [step] futures, carrier installed, nothing to carry", configuration: perThousand) { benchmark in
        _ = taskLocalCarrierInstalled
        immediateChain(benchmark)
    }

    Benchmark("n.map chain .immediate [step] futures, trivial carrier", configuration: perThousand) { benchmark in
        _ = trivialCarrierInstalled
        immediateChain(benchmark)
    }

    Benchmark("n.map chain .immediate [step] futures, task-local carrier", configuration: perThousand) { benchmark in
        _ = taskLocalCarrierInstalled
        BenchmarkContext.$value.withValue(1) { immediateChain(benchmark) }
    }

    let configuration = Benchmark.Configuration(metrics: memoryMetrics, scalingFactor: .kilo)

    Benchmark(
        "n.pending+1 callback, non-capturing [future] futures .immediate, carrier installed, nothing to carry",
        configuration: configuration
    ) { benchmark in
        _ = taskLocalCarrierInstalled
        pendingWithOneCallback(benchmark)
    }

    Benchmark("n.pending+1 callback, non-capturing [future] futures .immediate, trivial carrier", configuration: configuration) {
        benchmark in
        _ = trivialCarrierInstalled
        pendingWithOneCallback(benchmark)
    }

    Benchmark("n.pending+1 callback, non-capturing [future] futures .immediate, task-local carrier", configuration: configuration) {
        benchmark in
        _ = taskLocalCarrierInstalled
        BenchmarkContext.$value.withValue(1) { pendingWithOneCallback(benchmark) }
    }
}
