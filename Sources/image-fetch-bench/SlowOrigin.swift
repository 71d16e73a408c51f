import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization

/// An HTTP/1.1 origin on a loopback address that answers every GET after a fixed delay with one
/// body (the 12 KB PNG), with keep-alive. nginx-light cannot sleep, so the 100 ms origin lives
/// here, on one event-loop thread of its own. With a capacity, a request that arrives while that
/// many are being answered gets 429 at once, with `Retry-After` if one is given (the origin of the
/// `capacity` scenario).
final class SlowOrigin: Sendable {
    let port: Int
    private let group: MultiThreadedEventLoopGroup
    private let channel: any Channel
    private let counters: Counters

    /// Requests seen and the most in flight at once (to check the worker really ran at its
    /// concurrency).
    final class Counters: Sendable {
        private let state = Mutex((requests: 0, inFlight: 0, maxInFlight: 0, connections: 0, refused: 0))
        private let capacity: Int
        init(capacity: Int = .max) { self.capacity = capacity }
        /// False when the origin is at its capacity: the request is refused.
        func begin() -> Bool {
            state.withLock {
                $0.requests += 1
                guard $0.inFlight < capacity else {
                    $0.refused += 1
                    return false
                }
                $0.inFlight += 1
                $0.maxInFlight = max($0.maxInFlight, $0.inFlight)
                return true
            }
        }
        func end() { state.withLock { $0.inFlight -= 1 } }
        func connected() { state.withLock { $0.connections += 1 } }
        var snapshot: (requests: Int, inFlight: Int, maxInFlight: Int, connections: Int, refused: Int) {
            state.withLock { $0 }
        }
    }

    private init(port: Int, group: MultiThreadedEventLoopGroup, channel: any Channel, counters: Counters) {
        self.port = port
        self.group = group
        self.channel = channel
        self.counters = counters
    }

    static func start(
        host: String = "127.0.0.1", port: Int = 0, delayMilliseconds: Int64, body: [UInt8], contentType: String,
        capacity: Int = .max, retryAfter: String? = nil
    ) throws -> SlowOrigin {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let counters = Counters(capacity: capacity)
        let payload = ByteBuffer(bytes: body)
        let channel = try ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 4096)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                counters.connected()
                return channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                    try channel.pipeline.syncOperations.addHandler(
                        DelayedHandler(
                            delay: .milliseconds(delayMilliseconds), payload: payload,
                            contentType: contentType, retryAfter: retryAfter, counters: counters))
                }
            }
            .bind(host: host, port: port)
            .wait()
        return SlowOrigin(port: channel.localAddress?.port ?? 0, group: group, channel: channel, counters: counters)
    }

    var stats: (requests: Int, inFlight: Int, maxInFlight: Int, connections: Int, refused: Int) { counters.snapshot }

    func shutdown() {
        try? channel.close().wait()
        try? group.syncShutdownGracefully()
    }
}

private final class DelayedHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let delay: TimeAmount
    private let payload: ByteBuffer
    private let headers: HTTPHeaders
    private let refusal: HTTPHeaders
    private let counters: SlowOrigin.Counters
    private var active = true
    private var keepAlive = true

    init(
        delay: TimeAmount, payload: ByteBuffer, contentType: String, retryAfter: String?, counters: SlowOrigin.Counters
    ) {
        self.delay = delay
        self.payload = payload
        self.counters = counters
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: contentType)
        headers.add(name: "Content-Length", value: String(payload.readableBytes))
        self.headers = headers
        var refusal = HTTPHeaders()
        refusal.add(name: "Content-Length", value: "0")
        if let retryAfter { refusal.add(name: "Retry-After", value: retryAfter) }
        self.refusal = refusal
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            keepAlive = head.isKeepAlive
        case .body:
            break
        case .end:
            guard counters.begin() else {
                context.write(
                    wrapOutboundOut(
                        .head(
                            HTTPResponseHead(
                                version: .http1_1, status: .tooManyRequests,
                                headers: refusal))), promise: nil)
                context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
                return
            }
            let keepAlive = self.keepAlive
            context.eventLoop.assumeIsolated().scheduleTask(in: delay) {
                self.counters.end()
                guard self.active else { return }
                var headers = self.headers
                if !keepAlive { headers.add(name: "Connection", value: "close") }
                context.write(
                    self.wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .ok, headers: headers))),
                    promise: nil)
                context.write(self.wrapOutboundOut(.body(.byteBuffer(self.payload))), promise: nil)
                let done = context.writeAndFlush(self.wrapOutboundOut(.end(nil)))
                if !keepAlive { done.assumeIsolated().whenComplete { _ in context.close(promise: nil) } }
            }
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        active = false
        context.fireChannelInactive()
    }
}
