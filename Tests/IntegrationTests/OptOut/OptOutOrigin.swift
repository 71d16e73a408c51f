import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization

/// An HTTP/1.1 origin on 127.0.0.1 for the opt-out tests. It logs every request's path, and
/// answers:
///
/// | path | response |
/// |---|---|
/// | `/robots.txt` | ``Behaviour/robots``: a body (200), or a status; after ``Behaviour/robotsDelay``; or redirects |
/// | `/hop/N` | 302 to `/hop/N-1`, and `/hop/1` to `/robots-final.txt`, which answers ``Behaviour/robots`` |
/// | `/noai/…` | ``TestOrigin/okBody`` with `X-Robots-Tag: noai` |
/// | `/scoped/…` | ``TestOrigin/okBody`` with `X-Robots-Tag: otherbot: noai, noml` |
/// | `/tdm/…` | ``TestOrigin/okBody`` with `tdm-reservation: 1` |
/// | `/noai-endless` | `X-Robots-Tag: noai`, then a chunked body of 16 KiB chunks until the client goes away |
/// | anything else | ``TestOrigin/okBody`` |
final class OptOutOrigin: Sendable {
    struct Behaviour: Sendable {
        /// `.success(text)`: 200 with `text`; `.failure(status)`: that status.
        var robots: RobotsAnswer = .status(404)
        var robotsDelay: Duration = .zero
        /// When not 0, `/robots.txt` answers 302 through this many hops (`/hop/N` … `/hop/1`)
        /// before `/robots-final.txt` gives ``robots``.
        var robotsRedirects = 0
    }

    enum RobotsAnswer: Sendable {
        case body(String)
        case status(Int)
    }

    struct Log: Sendable {
        var paths: [String] = []
        var streamedBytes = 0
        func count(_ path: String) -> Int { paths.count { $0 == path } }
    }

    let port: Int
    private let group: MultiThreadedEventLoopGroup
    private let channel: any Channel
    private let state: OptOutOriginState

    private init(port: Int, group: MultiThreadedEventLoopGroup, channel: any Channel, state: OptOutOriginState) {
        self.port = port
        self.group = group
        self.channel = channel
        self.state = state
    }

    static func start(_ behaviour: Behaviour = Behaviour()) async throws -> OptOutOrigin {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let state = OptOutOriginState(behaviour: behaviour)
        let channel = try await ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 1024)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                    try channel.pipeline.syncOperations.addHandler(OptOutHandler(state: state))
                }
            }
            .bind(host: "127.0.0.1", port: 0)
            .get()
        return OptOutOrigin(port: channel.localAddress?.port ?? 0, group: group, channel: channel, state: state)
    }

    func url(_ path: String) -> String { "http://127.0.0.1:\(port)\(path)" }

    var log: Log { state.log.withLock { $0 } }

    func shutdown() async throws {
        try? await channel.close().get()
        try await group.shutdownGracefully()
    }
}

private final class OptOutOriginState: Sendable {
    let behaviour: OptOutOrigin.Behaviour
    let log = Mutex(OptOutOrigin.Log())
    init(behaviour: OptOutOrigin.Behaviour) { self.behaviour = behaviour }
}

private final class OptOutHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let state: OptOutOriginState
    private var active = true

    init(state: OptOutOriginState) { self.state = state }

    func channelInactive(context: ChannelHandlerContext) {
        active = false
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .head(let head) = unwrapInboundIn(data) else { return }
        let path = String(head.uri.prefix { $0 != "?" })
        state.log.withLock { $0.paths.append(path) }
        if path == "/robots.txt", state.behaviour.robotsRedirects > 0 {
            return redirect(context, to: "/hop/\(state.behaviour.robotsRedirects)")
        }
        if path.hasPrefix("/hop/") {
            let hop = Int(path.dropFirst(5)) ?? 1
            return redirect(context, to: hop > 1 ? "/hop/\(hop - 1)" : "/robots-final.txt")
        }
        if path == "/robots.txt" || path == "/robots-final.txt" {
            let delay = state.behaviour.robotsDelay
            let answer = state.behaviour.robots
            let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            context.eventLoop.scheduleTask(
                in: .nanoseconds(
                    Int64(
                        delay.components.seconds * 1_000_000_000
                            + delay.components.attoseconds / 1_000_000_000))
            ) {
                let (handler, context) = bound.value
                switch answer {
                case .body(let text): handler.respond(context, status: 200, type: "text/plain", body: Array(text.utf8))
                case .status(let status):
                    handler.respond(context, status: status, type: "text/plain", body: Array("no\n".utf8))
                }
            }
            return
        }
        if path == "/noai-endless" {
            var headers = HTTPHeaders()
            headers.add(name: "Content-Type", value: "image/png")
            headers.add(name: "X-Robots-Tag", value: "noai")
            context.write(
                wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .ok, headers: headers))), promise: nil
            )
            stream(context, chunk: ByteBuffer(bytes: [UInt8](repeating: 0x42, count: 16 * 1024)))
            return
        }
        var extra: [(String, String)] = []
        if path.hasPrefix("/noai/") { extra.append(("X-Robots-Tag", "noai")) }
        if path.hasPrefix("/scoped/") { extra.append(("X-Robots-Tag", "otherbot: noai, noml")) }
        if path.hasPrefix("/tdm/") { extra.append(("tdm-reservation", "1")) }
        respond(context, status: 200, type: "image/png", body: TestOrigin.okBody, extra: extra)
    }

    private func redirect(_ context: ChannelHandlerContext, to location: String) {
        var headers = HTTPHeaders()
        headers.add(name: "Location", value: location)
        headers.add(name: "Content-Length", value: "0")
        context.write(
            wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .found, headers: headers))), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
    }

    private func stream(_ context: ChannelHandlerContext, chunk: ByteBuffer) {
        guard active else { return }
        context.writeAndFlush(wrapOutboundOut(.body(.byteBuffer(chunk)))).assumeIsolated().whenComplete { result in
            guard case .success = result else { return }
            self.state.log.withLock { $0.streamedBytes += chunk.readableBytes }
            self.stream(context, chunk: chunk)
        }
    }

    private func respond(
        _ context: ChannelHandlerContext, status: Int, type: String, body: [UInt8],
        extra: [(String, String)] = []
    ) {
        guard active else { return }
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: type)
        headers.add(name: "Content-Length", value: String(body.count))
        for (name, value) in extra { headers.add(name: name, value: value) }
        let head = HTTPResponseHead(version: .http1_1, status: HTTPResponseStatus(statusCode: status), headers: headers)
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: body)))), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
    }
}
