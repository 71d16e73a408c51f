import Dispatch
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The operations endpoint on `http.port`: `GET /metrics` (Prometheus text), `GET /healthz`
/// (200 while the worker's queues answer) and `GET /readyz` (200 only while connected and
/// consuming). Built on SwiftNIO's HTTP/1 server; one event-loop thread.
///
/// It listens on every address by default, so its clients are bounded: at most
/// `maxConnections` at once (they share the process's descriptors with the fetches), each closed
/// when a whole request has not come within `requestDeadline` (idle or trickling), and a client
/// that sends requests without reading the answers is closed rather than have them pile up in
/// memory. A connection beyond the limit closes the one that has waited longest for a request
/// (it is refused only when every one is being answered): refused instead, one client holding
/// every connection idle would lock out the kubelet's probes and Prometheus.
package final class HealthServer: Sendable {
    /// What the endpoint reports; every closure must be cheap and thread-safe.
    package struct Probes: Sendable {
        /// Readiness: connected, consuming, not blocked, not draining.
        package var isReady: @Sendable () -> Bool
        /// Liveness: calls back with true when the worker's queues ran a no-op in time.
        package var checkHealth: @Sendable (@escaping @Sendable (Bool) -> Void) -> Void
        /// The Prometheus text exposition.
        package var metrics: @Sendable () -> [UInt8]
        /// `/origins`: the busiest origins as JSON, at most `limit` of them.
        package var origins: @Sendable (_ limit: Int) -> [UInt8]

        package init(
            isReady: @escaping @Sendable () -> Bool,
            checkHealth: @escaping @Sendable (@escaping @Sendable (Bool) -> Void) -> Void,
            metrics: @escaping @Sendable () -> [UInt8],
            origins: @escaping @Sendable (_ limit: Int) -> [UInt8] = { _ in Array("[]\n".utf8) }
        ) {
            self.isReady = isReady
            self.checkHealth = checkHealth
            self.metrics = metrics
            self.origins = origins
        }
    }

    private let group: MultiThreadedEventLoopGroup
    private let channel: any Channel

    /// The bound port (useful with port 0).
    package var port: Int { channel.localAddress?.port ?? 0 }

    /// Binds and starts serving.
    package init(
        host: String, port: Int, probes: Probes, logger: Logger,
        maxConnections: Int = 64, requestDeadline: TimeAmount = .seconds(30)
    ) throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        self.group = group
        // The open connections, on the group's one event loop, which serves them all.
        let open = NIOLoopBoundBox.makeBoxSendingValue(ConnectionTable(), eventLoop: group.next())
        do {
            self.channel = try ServerBootstrap(group: group)
                .serverChannelOption(.backlog, value: 64)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                // A client that half-closes after its requests (`printf … | nc -N`) still gets its
                // answers: the handler closes once they are written.
                .childChannelOption(.allowRemoteHalfClosure, value: true)
                .childChannelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                        try channel.pipeline.syncOperations.addHandler(
                            EndpointHandler(
                                probes: probes, open: open, maxConnections: maxConnections,
                                requestDeadline: requestDeadline))
                    }
                }
                .bind(host: host, port: port)
                .wait()
        } catch {
            try? group.syncShutdownGracefully()
            throw Self.listenProblem(host: host, port: port, error: error)
        }
        logger.info("operations endpoint listening", metadata: ["address": "\(host):\(self.port)"])
    }

    /// Why the endpoint cannot listen, said as the operator fixes it rather than as NIO's `bind`.
    /// An address that is not this machine's (or a name that resolves to none), or a port it may
    /// not use, is a bad value (exit 78); a port in use is the moment's trouble, another
    /// process's (exit 1).
    static func listenProblem(host: String, port: Int, error: any Error) -> any Error {
        let address = host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        // A name the resolver says has no address (NIO looks it up before it binds). A resolver
        // that cannot answer now (EAI_AGAIN, EAI_SYSTEM) is the moment's trouble, as below.
        if let unknown = error as? SocketAddressError.UnknownHost,
            unknown.errorCode == Int(EAI_NONAME) || unknown.errorCode == Self.eaiNoData
        {
            return ConfigurationError(
                key: "http.host", problem: "\(host) does not resolve to an address of this machine")
        }
        switch (error as? IOError)?.errnoCode {
        case EADDRINUSE:
            return StartupError("http.port: \(address) is in use by another process")
        case EACCES:
            return ConfigurationError(key: "http.port", problem: "\(address) needs privileges (ports below 1024)")
        case EADDRNOTAVAIL:
            return ConfigurationError(key: "http.host", problem: "\(address) is not an address of this machine")
        default:
            return StartupError("http.port: \(address) cannot be listened on: \(error)")
        }
    }

    /// glibc's `EAI_NODATA` (a name with no address), which its headers show only to GNU code.
    #if os(Linux)
    private static let eaiNoData = -5
    #else
    private static let eaiNoData = Int(EAI_NODATA)
    #endif

    /// Stops serving.
    package func shutdown() {
        try? channel.close().wait()
        try? group.syncShutdownGracefully()
    }
}

/// The endpoint's open connections, on its one event loop: how many, and which of them wait for
/// a request, in the order they began to wait.
private struct ConnectionTable {
    var open = 0
    private var nextTicket: UInt64 = 0
    private var awaiting: [ObjectIdentifier: (ticket: UInt64, channel: any Channel)] = [:]

    mutating func awaitsRequest(_ id: ObjectIdentifier, _ channel: any Channel) {
        awaiting[id] = (nextTicket, channel)
        nextTicket += 1
    }

    mutating func answering(_ id: ObjectIdentifier) {
        awaiting[id] = nil
    }

    /// The connection that has waited longest for a request, taken out of the table (its
    /// `channelInactive` gives its place back once it is closed); nil when none waits.
    mutating func takeLongestIdle() -> (any Channel)? {
        guard let oldest = awaiting.min(by: { $0.value.ticket < $1.value.ticket }) else { return nil }
        awaiting[oldest.key] = nil
        return oldest.value.channel
    }
}

/// Answers one connection's requests.
private final class EndpointHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let probes: HealthServer.Probes
    private var head: HTTPRequestHead?
    /// The server's open connections (its event loop is this one's).
    private let open: NIOLoopBoundBox<ConnectionTable>
    private let maxConnections: Int
    private let requestDeadline: TimeAmount
    /// Closes the connection unless a whole request comes first; armed while one is awaited.
    private var deadline: Scheduled<Void>?
    private var counted = false
    /// A whole request came and its answer's end is not written yet.
    private var answering = false
    /// The client closed its side: the connection ends once the answer in hand is written.
    private var inputClosed = false

    init(
        probes: HealthServer.Probes, open: NIOLoopBoundBox<ConnectionTable>, maxConnections: Int,
        requestDeadline: TimeAmount
    ) {
        self.probes = probes
        self.open = open
        self.maxConnections = maxConnections
        self.requestDeadline = requestDeadline
    }

    func channelActive(context: ChannelHandlerContext) {
        if open.value.open >= maxConnections {
            guard let longestIdle = open.value.takeLongestIdle() else {
                context.close(promise: nil)
                return
            }
            longestIdle.close(promise: nil)
        }
        open.value.open += 1
        counted = true
        awaitRequest(context)
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        deadline?.cancel()
        deadline = nil
        if counted {
            open.value.answering(ObjectIdentifier(self))
            open.value.open -= 1
            counted = false
        }
        context.fireChannelInactive()
    }

    /// Arms the deadline for the next whole request.
    private func awaitRequest(_ context: ChannelHandlerContext) {
        deadline?.cancel()
        let channel = context.channel
        deadline = context.eventLoop.scheduleTask(in: requestDeadline) { channel.close(promise: nil) }
        open.value.awaitsRequest(ObjectIdentifier(self), channel)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
        case .body:
            break
        case .end:
            guard let head else { return }
            self.head = nil
            deadline?.cancel()
            deadline = nil
            open.value.answering(ObjectIdentifier(self))
            // Answers still waiting to go out: the client sends without reading them, and each
            // further answer would wait in memory too.
            guard context.channel.isWritable else {
                context.close(promise: nil)
                return
            }
            answering = true
            // On a turn of the loop of its own: NIO's pipeline handler hands over the next request
            // held behind an answer while that answer's end is written, so answering here would
            // nest one chain of frames per pipelined request (thousands overflowed the stack).
            let bound = NIOLoopBound((self, context, head), eventLoop: context.eventLoop)
            context.eventLoop.execute {
                let (handler, context, head) = bound.value
                handler.route(context: context, head: head)
            }
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        // NIO's pipeline handler passes this on only after the requests it held were handed over.
        if case .inputClosed? = event as? ChannelEvent {
            inputClosed = true
            if !answering { context.close(promise: nil) }
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    private func route(context: ChannelHandlerContext, head: HTTPRequestHead) {
        guard head.method == .GET || head.method == .HEAD else {
            return respond(context, head, .methodNotAllowed, "text/plain", Array("method not allowed\n".utf8))
        }
        let path = head.uri.split(separator: "?", maxSplits: 1).first.map(String.init) ?? head.uri
        switch path {
        case "/metrics":
            respond(context, head, .ok, "text/plain; version=0.0.4; charset=utf-8", probes.metrics())
        case "/origins":
            // `?limit=N`, 1…1000, default 20.
            let query = head.uri.split(separator: "?", maxSplits: 1).dropFirst().first ?? ""
            let limit =
                query.split(separator: "&").compactMap { pair -> Int? in
                    let parts = pair.split(separator: "=", maxSplits: 1)
                    return parts.count == 2 && parts[0] == "limit" ? Int(parts[1]) : nil
                }.first.map { min(max($0, 1), 1000) } ?? 20
            respond(context, head, .ok, "application/json", probes.origins(limit))
        case "/readyz":
            let ready = probes.isReady()
            respond(
                context, head, ready ? .ok : .serviceUnavailable, "text/plain",
                Array((ready ? "ready\n" : "not ready\n").utf8))
        case "/healthz":
            let loop = context.eventLoop
            let promise = loop.makePromise(of: Bool.self)
            let timeout = loop.scheduleTask(in: .seconds(2)) { promise.succeed(false) }
            probes.checkHealth { healthy in
                loop.execute {
                    timeout.cancel()
                    promise.succeed(healthy)
                }
            }
            let bound = NIOLoopBound((self, context, head), eventLoop: loop)
            promise.futureResult.whenSuccess { healthy in
                let (handler, context, head) = bound.value
                handler.respond(
                    context, head, healthy ? .ok : .serviceUnavailable, "text/plain",
                    Array((healthy ? "ok\n" : "unresponsive\n").utf8))
            }
        default:
            respond(context, head, .notFound, "text/plain", Array("not found\n".utf8))
        }
    }

    private func respond(
        _ context: ChannelHandlerContext, _ request: HTTPRequestHead, _ status: HTTPResponseStatus,
        _ contentType: String, _ body: [UInt8]
    ) {
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: contentType)
        headers.add(name: "Content-Length", value: String(body.count))
        let keepAlive = request.isKeepAlive
        if !keepAlive { headers.add(name: "Connection", value: "close") }
        context.write(
            wrapOutboundOut(.head(HTTPResponseHead(version: request.version, status: status, headers: headers))),
            promise: nil)
        if request.method != .HEAD {
            context.write(
                wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: body)))), promise: nil)
        }
        // The connection waits for its next request from here, and a client that went meanwhile
        // (a probe that timed out) is not listed as idle again. Before the end is written: that
        // write can hand over a request already held, which must find the deadline cancelled.
        if keepAlive, context.channel.isActive { awaitRequest(context) }
        // Cleared before the end is written: that write can hand over the next request.
        answering = false
        let done = context.writeAndFlush(wrapOutboundOut(.end(nil)))
        if !keepAlive || (inputClosed && !answering) {
            let channel = context.channel
            done.whenComplete { _ in channel.close(promise: nil) }
        }
    }
}
