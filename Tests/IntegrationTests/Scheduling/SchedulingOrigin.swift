import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization

/// An HTTP/1.1 origin for the scheduling tests, on a loopback address of its own (127.0.0.2,
/// 127.0.0.3, …) so that each is a distinct origin to the worker. Every path answers
/// ``TestOrigin/okBody`` (a PNG) after ``Behaviour/delay``, unless the behaviour refuses it:
/// - with a ``Behaviour/capacity``, a request that arrives while that many are being served gets
///   429 at once, with ``Behaviour/retryAfter`` if set;
/// - the first ``Behaviour/unavailableFirst`` requests get 503 with ``Behaviour/retryAfter``;
/// - the next ``Behaviour/tooManyFirst`` requests get 429 with ``Behaviour/retryAfter``.
///
/// It logs each request's arrival time and answer, by its own clock, so that tests can time the
/// worker's behaviour where it matters: at the origin.
final class SchedulingOrigin: Sendable {
    struct Behaviour: Sendable {
        var delay: Duration = .zero
        var capacity: Int?
        var retryAfter: String?
        var unavailableFirst = 0
        var tooManyFirst = 0
    }

    struct Request: Sendable {
        /// Seconds since the origin started.
        var arrival: Double
        var status: Int
    }

    struct Log: Sendable {
        var requests: [Request] = []
        var serving = 0
        var maxServing = 0
        var served: Int { requests.count { $0.status == 200 } }
        var refused: Int { requests.count { $0.status != 200 } }
    }

    let host: String
    let port: Int
    private let group: MultiThreadedEventLoopGroup
    private let channel: any Channel
    private let state: OriginState

    private init(host: String, port: Int, group: MultiThreadedEventLoopGroup, channel: any Channel, state: OriginState)
    {
        self.host = host
        self.port = port
        self.group = group
        self.channel = channel
        self.state = state
    }

    static func start(host: String, _ behaviour: Behaviour) async throws -> SchedulingOrigin {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let state = OriginState(behaviour: behaviour)
        let channel = try await ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 1024)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                    try channel.pipeline.syncOperations.addHandler(SchedulingHandler(state: state))
                }
            }
            .bind(host: host, port: 0)
            .get()
        return SchedulingOrigin(
            host: host, port: channel.localAddress?.port ?? 0, group: group, channel: channel, state: state)
    }

    func url(_ path: String) -> String { "http://\(host):\(port)\(path)" }

    /// The URL of `path` under another host name, which the worker maps to this origin with
    /// `fetch.resolve` (``resolve(_:)``): a distinct origin to the worker, served here.
    func url(_ path: String, name: String) -> String { "http://\(name):\(port)\(path)" }

    /// `fetch.resolve` entries that map `names` to this origin.
    func resolve(_ names: [String]) -> String { names.map { "\($0):\(port):\(host)" }.joined(separator: ",") }

    var log: Log { state.log.withLock { $0 } }

    func shutdown() async throws {
        try? await channel.close().get()
        try await group.shutdownGracefully()
    }
}

private final class OriginState: Sendable {
    let behaviour: SchedulingOrigin.Behaviour
    let log = Mutex(SchedulingOrigin.Log())
    let started = DispatchTime.now().uptimeNanoseconds

    init(behaviour: SchedulingOrigin.Behaviour) { self.behaviour = behaviour }

    /// Decides the answer as the request arrives: 200 (after the delay), 429 or 503.
    func arrive() -> Int {
        let now = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
        return log.withLock { log in
            var status = 200
            if log.requests.count < behaviour.unavailableFirst {
                status = 503
            } else if log.requests.count < behaviour.unavailableFirst + behaviour.tooManyFirst {
                status = 429
            } else if let capacity = behaviour.capacity, log.serving >= capacity {
                status = 429
            }
            log.requests.append(.init(arrival: now, status: status))
            if status == 200 {
                log.serving += 1
                log.maxServing = max(log.maxServing, log.serving)
            }
            return status
        }
    }

    func served() { log.withLock { $0.serving -= 1 } }
}

private final class SchedulingHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let state: OriginState
    private var keepAlive = true
    private var version = HTTPVersion.http1_1

    init(state: OriginState) { self.state = state }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            keepAlive = head.isKeepAlive
            version = head.version
        case .body:
            break
        case .end:
            let status = state.arrive()
            if status != 200 {
                respond(context, status: status, body: Array("busy\n".utf8))
            } else if state.behaviour.delay == .zero {
                respond(context, status: 200, body: TestOrigin.okBody)
                state.served()
            } else {
                let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
                context.eventLoop.scheduleTask(
                    in: .nanoseconds(
                        Int64(
                            state.behaviour.delay.components.seconds * 1_000_000_000
                                + state.behaviour.delay.components.attoseconds / 1_000_000_000))
                ) {
                    let (handler, context) = bound.value
                    handler.respond(context, status: 200, body: TestOrigin.okBody)
                    handler.state.served()
                }
            }
        }
    }

    private func respond(_ context: ChannelHandlerContext, status: Int, body: [UInt8]) {
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: status == 200 ? "image/png" : "text/plain")
        headers.add(name: "Content-Length", value: String(body.count))
        if status != 200, let retryAfter = state.behaviour.retryAfter {
            headers.add(name: "Retry-After", value: retryAfter)
        }
        if !keepAlive { headers.add(name: "Connection", value: "close") }
        let head = HTTPResponseHead(version: version, status: HTTPResponseStatus(statusCode: status), headers: headers)
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: body)))), promise: nil)
        let done = context.writeAndFlush(wrapOutboundOut(.end(nil)))
        if !keepAlive {
            let channel = context.channel
            done.whenComplete { _ in channel.close(promise: nil) }
        }
    }
}
