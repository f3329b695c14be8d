#if canImport(Combine)
import Combine
#elseif FuturesCombine
import OpenCombine
#endif
import Futures
#if canImport(Combine) || FuturesCombine
import FuturesCombine
#endif
#if FuturesNIO
import FuturesNIO
import NIOCore
import NIOEmbedded
#endif

/// Allocation scenarios of the bridges, each beside the framework doing the same job alone (those
/// of the bridges that the package's traits build).
var bridgeAllocationScenarios: [String: (Int) -> Void] {
    var scenarios: [String: (Int) -> Void] = [:]
    #if FuturesNIO
    scenarios.merge(nioAllocationScenarios) { first, _ in first }
    #endif
    #if canImport(Combine) || FuturesCombine
    scenarios.merge(combineAllocationScenarios) { first, _ in first }
    #endif
    return scenarios
}

#if FuturesNIO
var nioAllocationScenarios: [String: (Int) -> Void] { [
    // An EventLoopFuture into a Future and back, on an EmbeddedEventLoop (nothing hops).
    "nio-round-trip": { units in
        let loop = EmbeddedEventLoop()
        for index in 0..<units {
            let promise = loop.makePromise(of: Int.self)
            Future(promise.futureResult).eventLoopFuture(on: loop).whenSuccess { precondition($0 == index) }
            promise.succeed(index)
        }
    },
    "nio-flatmap": { units in
        let loop = EmbeddedEventLoop()
        for index in 0..<units {
            let promise = loop.makePromise(of: Int.self)
            promise.futureResult.flatMap { loop.makeSucceededFuture($0) }.whenSuccess { precondition($0 == index) }
            promise.succeed(index)
        }
    },
] }
#endif

#if canImport(Combine) || FuturesCombine
var combineAllocationScenarios: [String: (Int) -> Void] { [
    // A subscription to a completed future's publisher, and to Combine's own Future publisher.
    "combine-publisher": { units in
        for index in 0..<units {
            _ = Futures.Future(value: index).publisher
                .sink(receiveCompletion: { _ in }, receiveValue: { precondition($0 == index) })
        }
    },
    "combine-future": { units in
        for index in 0..<units {
            _ = CombineFuture<Int, any Error> { $0(.success(index)) }
                .sink(receiveCompletion: { _ in }, receiveValue: { precondition($0 == index) })
        }
    },
    // The first value of a publisher, as a future and with Combine's `first()`.
    "combine-first-value": { units in
        for index in 0..<units {
            precondition(Futures.Future([index, index + 1].publisher).outcome?.value == index)
        }
    },
    "combine-first": { units in
        for index in 0..<units {
            _ = [index, index + 1].publisher.first().sink { precondition($0 == index) }
        }
    },
] }

#if canImport(Combine)
typealias CombineFuture = Combine.Future
#else
typealias CombineFuture = OpenCombine.Future
#endif
#endif
