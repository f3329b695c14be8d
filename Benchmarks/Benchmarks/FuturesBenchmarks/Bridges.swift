// (i) The bridges, each against doing the same job with the framework alone.

import Benchmark
import Dispatch
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Futures
import FuturesCombine
import FuturesNIO
import FuturesURLSession
import NIOCore
import NIOEmbedded
import NIOHTTP1
import NIOPosix
#if canImport(Combine)
import Combine
/// Combine's own future publisher.
typealias CombineFuture = Combine.Future
#else
import OpenCombine
/// Combine's own future publisher.
typealias CombineFuture = OpenCombine.Future
#endif

/// Requests per iteration of the URLSession benchmarks (a request takes far longer than the other
/// operations here).
let requestsPerIteration = 20

func scenarioI() {
    // i1: a value goes from an EventLoopFuture into a Future and back into an EventLoopFuture, on an
    // EmbeddedEventLoop so that nothing hops; NIO alone does the same with one flatMap.
    Benchmark("i.NIO round trip [conversion] futures", configuration: perThousand) { benchmark in
        let loop = EmbeddedEventLoop()
        measure(benchmark) {
            for index in benchmark.scaledIterations {
                let promise = loop.makePromise(of: Int.self)
                Future(promise.futureResult).eventLoopFuture(on: loop).whenSuccess { Benchmark.blackHole($0) }
                promise.succeed(index)
            }
        }
    }

    Benchmark("i.NIO round trip [conversion] NIO flatMap", configuration: perThousand) { benchmark in
        let loop = EmbeddedEventLoop()
        measure(benchmark) {
            for index in benchmark.scaledIterations {
                let promise = loop.makePromise(of: Int.self)
                promise.futureResult.flatMap { loop.makeSucceededFuture($0) }.whenSuccess { Benchmark.blackHole($0) }
                promise.succeed(index)
            }
        }
    }

    // i2: subscribing to a future's publisher, against Combine's own Future publisher.
    Benchmark("i.publisher of a completed future [subscription] futures", configuration: perThousand) { benchmark in
        measure(benchmark) {
            for index in benchmark.scaledIterations {
                _ = Futures.Future(value: index).publisher.sink(receiveCompletion: { _ in }, receiveValue: { Benchmark.blackHole($0) })
            }
        }
    }

    Benchmark("i.publisher of a completed future [subscription] Combine Future", configuration: perThousand) { benchmark in
        measure(benchmark) {
            for index in benchmark.scaledIterations {
                _ = CombineFuture<Int, any Error> { $0(.success(index)) }
                    .sink(receiveCompletion: { _ in }, receiveValue: { Benchmark.blackHole($0) })
            }
        }
    }

    Benchmark("i.publisher of a pending future [subscription] futures", configuration: perThousand) { benchmark in
        measure(benchmark) {
            for index in benchmark.scaledIterations {
                let promise = Promise<Int>()
                let subscription = promise.future.publisher
                    .sink(receiveCompletion: { _ in }, receiveValue: { Benchmark.blackHole($0) })
                promise.succeed(index)
                Benchmark.blackHole(subscription)
            }
        }
    }

    Benchmark("i.publisher of a pending future [subscription] Combine Future", configuration: perThousand) { benchmark in
        measure(benchmark) {
            for index in benchmark.scaledIterations {
                var fulfil: CombineFuture<Int, any Error>.Promise?
                let subscription = CombineFuture<Int, any Error> { fulfil = $0 }
                    .sink(receiveCompletion: { _ in }, receiveValue: { Benchmark.blackHole($0) })
                fulfil?(.success(index))
                Benchmark.blackHole(subscription)
            }
        }
    }

    // i3: the first value of a publisher, as a future and as Combine's `first()`.
    Benchmark("i.first value of a publisher [subscription] futures", configuration: perThousand) { benchmark in
        measure(benchmark) {
            for index in benchmark.scaledIterations {
                Benchmark.blackHole(Futures.Future([index, index + 1].publisher).outcome)
            }
        }
    }

    Benchmark("i.first value of a publisher [subscription] Combine first()", configuration: perThousand) { benchmark in
        measure(benchmark) {
            for index in benchmark.scaledIterations {
                _ = [index, index + 1].publisher.first().sink { Benchmark.blackHole($0) }
            }
        }
    }

    // i4: GET requests to a local SwiftNIO server, one at a time, through FutureURLSession and through
    // a URLSession with a completion handler.
    let requests: Benchmark.Configuration = .init(metrics: timeMetrics, maxDuration: .seconds(3))
    for (path, label) in [("/small", "14 bytes"), ("/large", "1 MiB")] {
        Benchmark("i.URLSession GET \(label) [1 request] futures", configuration: requests) { benchmark in
            let server = try BenchmarkServer.shared()
            let session = FutureURLSession()
            let request = URLRequest(url: server.url(path))
            measureRoundTrips(benchmark) { done in
                session.data(for: request).whenComplete(on: .immediate) { _ in done.signal() }
            }
        }

        Benchmark("i.URLSession GET \(label) [1 request] URLSession", configuration: requests) { benchmark in
            let server = try BenchmarkServer.shared()
            let session = URLSession(configuration: .default)
            let request = URLRequest(url: server.url(path))
            measureRoundTrips(benchmark) { done in
                session.dataTask(with: request) { _, _, _ in done.signal() }.resume()
            }
        }
    }
}

/// An HTTP server on 127.0.0.1 for the URLSession benchmarks: `/small` answers 14 bytes, `/large`
/// 1 MiB; started on first use, never stopped.
final class BenchmarkServer: Sendable {
    let port: Int
    private let channel: any Channel

    private static let started: Result<BenchmarkServer, any Error> = Result { try BenchmarkServer() }

    static func shared() throws -> BenchmarkServer { try started.get() }

    func url(_ path: String) -> URL { URL(string: "http://127.0.0.1:\(port)\(path)")! }

    private init() throws {
        channel = try ServerBootstrap(group: nioGroup)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(Responder())
                }
            }
            .bind(host: "127.0.0.1", port: 0)
            .wait()
        port = channel.localAddress!.port!
    }
}

private final class Responder: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    static let small = ByteBuffer(string: "hello, futures")
    static let large = ByteBuffer(repeating: 0x2E, count: 1 << 20)

    private var uri = ""

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            uri = head.uri
        case .body:
            break
        case .end:
            let body = uri == "/large" ? Self.large : Self.small
            var headers = HTTPHeaders()
            headers.add(name: "content-length", value: String(body.readableBytes))
            context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .ok, headers: headers))), promise: nil)
            context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil)
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        }
    }
}
