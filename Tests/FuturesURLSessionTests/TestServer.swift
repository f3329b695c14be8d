import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Futures
import NIOCore
import NIOHTTP1
import NIOPosix

/// An HTTP/1.1 server on 127.0.0.1, on a port the system picks, for the URLSession tests.
///
/// Endpoints:
/// - `GET /small`: a short body with its length.
/// - `GET /large`: 1 MiB (``largeBody``), with its length, written in 16 chunks, each after the
///   previous one was flushed.
/// - `GET /halves`: 512 KiB with its length; the second half is written only once ``openGate()``
///   was called, so a client sees the first half while the response is incomplete.
/// - `GET /trickle`: announces 64 MiB and sends 1 KiB every 10 ms until the client goes away, which
///   completes ``clientLeftTrickle``.
/// - `POST /echo`: the request's body back.
/// - `POST /held`: reads nothing of the body until ``openGate()`` was called, so the client can send
///   only what the sockets' buffers hold; then answers with the number of bytes it received.
/// - anything else: 404.
final class TestServer: Sendable {
    static let largeBody = Data((0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0 % 251) })
    static let halvesBody = Data((0..<(1 << 19)).map { UInt8(truncatingIfNeeded: $0 % 241) })
    static let smallBody = Data("hello, futures".utf8)

    let port: Int
    private let group: MultiThreadedEventLoopGroup
    private let channel: any Channel
    private let gate: Promise<Void>
    private let trickleEnded: Promise<Void>

    /// Completes when a client of `/trickle` closed its connection.
    var clientLeftTrickle: Future<Void> { trickleEnded.future }

    /// Lets `/halves` send its second half.
    func openGate() { _ = gate.succeed(()) }

    func url(_ path: String) -> URL { URL(string: "http://127.0.0.1:\(port)\(path)")! }

    /// How long a request may wait for bytes. `URLRequest`'s default, a minute, is too short on a
    /// loaded CI machine running a sanitizer, where a transfer's threads can wait that long.
    static let timeout: TimeInterval = 600

    /// A GET request for `path`, with ``timeout``.
    func request(_ path: String) -> URLRequest { URLRequest(url: url(path), timeoutInterval: Self.timeout) }

    init() throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let gate = Promise<Void>()
        let trickleEnded = Promise<Void>()
        let channel = try ServerBootstrap(group: group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(
                        RequestHandler(gate: gate.future, trickleEnded: trickleEnded)
                    )
                }
            }
            .bind(host: "127.0.0.1", port: 0)
            .wait()
        self.group = group
        self.channel = channel
        self.gate = gate
        self.trickleEnded = trickleEnded
        port = channel.localAddress!.port!
    }

    func shutdown() async throws {
        openGate()
        try await channel.close()
        try await group.shutdownGracefully()
    }

    /// A port on 127.0.0.1 where nothing listens: bound by the system, then closed.
    static func refusedPort() throws -> Int {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        defer { try? group.syncShutdownGracefully() }
        let channel = try ServerBootstrap(group: group).bind(host: "127.0.0.1", port: 0).wait()
        let port = channel.localAddress!.port!
        try channel.close().wait()
        return port
    }
}

private final class RequestHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let gate: Future<Void>
    private let trickleEnded: Promise<Void>
    private var head: HTTPRequestHead?
    private var body = ByteBuffer()
    private var trickle: RepeatedTask?
    private var received = 0

    init(gate: Future<Void>, trickleEnded: Promise<Void>) {
        self.gate = gate
        self.trickleEnded = trickleEnded
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
            body.clear()
            received = 0
            if head.method == .POST, head.uri == "/held" { hold(context: context) }
        case .body(var part):
            received += part.readableBytes
            if head?.uri != "/held" { body.writeBuffer(&part) }
        case .end:
            guard let head else { return }
            respond(to: head, context: context)
        }
    }

    /// Stops reading until the gate opens.
    private func hold(context: ChannelHandlerContext) {
        context.channel.setOption(ChannelOptions.autoRead, value: false).whenComplete { _ in }
        let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
        let loop = context.eventLoop
        gate.whenSuccess(on: .immediate) {
            loop.execute {
                let context = bound.value
                context.channel.setOption(ChannelOptions.autoRead, value: true).whenComplete { _ in }
                context.read()
            }
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        if let trickle {
            trickle.cancel()
            _ = trickleEnded.succeed(())
        }
        context.fireChannelInactive()
    }

    private func respond(to head: HTTPRequestHead, context: ChannelHandlerContext) {
        switch (head.method, head.uri) {
        case (.GET, "/small"):
            writeHead(length: TestServer.smallBody.count, context: context)
            writeBody(TestServer.smallBody, context: context)
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        case (.GET, "/large"):
            writeHead(length: TestServer.largeBody.count, context: context)
            writeChunks(of: TestServer.largeBody, from: 0, size: 1 << 16, context: context)
        case (.GET, "/halves"):
            let half = TestServer.halvesBody.count / 2
            writeHead(length: TestServer.halvesBody.count, context: context)
            writeBody(TestServer.halvesBody.prefix(half), context: context)
            context.flush()
            let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            let loop = context.eventLoop
            gate.whenSuccess(on: .immediate) {
                loop.execute {
                    let (handler, context) = bound.value
                    handler.writeBody(TestServer.halvesBody.suffix(from: half), context: context)
                    context.writeAndFlush(handler.wrapOutboundOut(.end(nil)), promise: nil)
                }
            }
        case (.GET, "/trickle"):
            writeHead(length: 64 << 20, context: context)
            context.flush()
            let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            trickle = context.eventLoop.scheduleRepeatedTask(initialDelay: .zero, delay: .milliseconds(10)) { _ in
                let (handler, context) = bound.value
                handler.writeBody(Data(repeating: 0x2E, count: 1024), context: context)
                context.flush()
            }
        case (.POST, "/held"):
            let count = Data(String(received).utf8)
            writeHead(length: count.count, context: context)
            writeBody(count, context: context)
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        case (.POST, "/echo"):
            let received = Data(body.readableBytesView)
            writeHead(length: received.count, context: context)
            writeBody(received, context: context)
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        default:
            var headers = HTTPHeaders()
            headers.add(name: "content-length", value: "0")
            context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .notFound, headers: headers))), promise: nil)
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        }
    }

    private func writeHead(length: Int, context: ChannelHandlerContext) {
        var headers = HTTPHeaders()
        headers.add(name: "content-length", value: String(length))
        headers.add(name: "content-type", value: "application/octet-stream")
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .ok, headers: headers))), promise: nil)
    }

    private func writeBody(_ data: Data, context: ChannelHandlerContext) {
        context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(bytes: data)))), promise: nil)
    }

    /// Writes `data` in pieces of `size` bytes, each once the previous one has been flushed.
    private func writeChunks(of data: Data, from offset: Int, size: Int, context: ChannelHandlerContext) {
        guard offset < data.count else {
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
            return
        }
        let end = min(offset + size, data.count)
        let written = context.eventLoop.makePromise(of: Void.self)
        context.writeAndFlush(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(bytes: data[offset..<end])))), promise: written)
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        written.futureResult.whenSuccess {
            let (handler, context) = bound.value
            handler.writeChunks(of: data, from: end, size: size, context: context)
        }
    }
}
