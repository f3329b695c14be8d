#if canImport(Combine)
import Combine
#else
import OpenCombine
#endif
import Futures
import FuturesCombine
import FuturesNIO
import NIOCore
import NIOEmbedded

/// Allocation scenarios of the bridges, each beside the framework doing the same job alone.
var bridgeAllocationScenarios: [String: (Int) -> Void] { [
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
