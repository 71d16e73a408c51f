import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization

/// A minimal OTLP/HTTP trace receiver on 127.0.0.1 (an ephemeral port): it answers every
/// `POST /v1/traces` with 200 `{}` and decodes the `ExportTraceServiceRequest` into ``Span``
/// values. JSON it reads itself; protobuf goes through scripts/otlp-decode.py, opentelemetry-proto's
/// own decoder, so the worker's hand-written encoder is checked by code it shares nothing with. A
/// request with another path or content type, or a body that does not decode, is answered 415
/// and counted.
final class OTLPReceiver: Sendable {
    /// One received span, with the fields the tests check.
    struct Span: Sendable {
        var traceID: String
        var spanID: String
        var parentSpanID: String?
        var traceState: String?
        var name: String
        var kind: Int
        var start: UInt64
        var end: UInt64
        var attributes: [String: String]
        var statusCode: Int?
        var serviceName: String?
    }

    let port: Int
    private let group: MultiThreadedEventLoopGroup
    private let channel: any Channel
    private let state: State

    final class State: Sendable {
        let spans = Mutex<[Span]>([])
        let rejected = Mutex(0)
        /// Content types of the requests taken, in order.
        let contentTypes = Mutex<[String]>([])
        /// The Python of scripts/python-clients.sh, with opentelemetry-proto.
        let python: String

        init(python: String) { self.python = python }

        /// opentelemetry-proto's reading of a protobuf request, as OTLP/JSON; nil when it fails.
        func decodeProtobuf(_ body: [UInt8]) -> [Span]? {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: python)
            process.arguments = [MessageSchemaTests.root + "/scripts/otlp-decode.py"]
            let input = Pipe(), output = Pipe()
            process.standardInput = input
            process.standardOutput = output
            guard (try? process.run()) != nil else { return nil }
            input.fileHandleForWriting.write(Data(body))
            try? input.fileHandleForWriting.close()
            let json = output.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            guard process.terminationStatus == 0 else { return nil }
            return OTLPReceiver.decode(Array(json))
        }
    }

    static func start() async throws -> OTLPReceiver {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let state = State(python: try MessageSchemaTests.python())
        let channel = try await ServerBootstrap(group: group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                    try channel.pipeline.syncOperations.addHandler(ReceiverHandler(state: state))
                }
            }
            .bind(host: "127.0.0.1", port: 0)
            .get()
        return OTLPReceiver(port: channel.localAddress?.port ?? 0, group: group, channel: channel, state: state)
    }

    private init(port: Int, group: MultiThreadedEventLoopGroup, channel: any Channel, state: State) {
        self.port = port
        self.group = group
        self.channel = channel
        self.state = state
    }

    /// `OTEL_EXPORTER_OTLP_ENDPOINT` for a worker that should export here.
    var endpoint: String { "http://127.0.0.1:\(port)" }
    var spans: [Span] { state.spans.withLock { $0 } }
    var rejected: Int { state.rejected.withLock { $0 } }
    var contentTypes: [String] { state.contentTypes.withLock { $0 } }

    func shutdown() async throws {
        try? await channel.close().get()
        try await group.shutdownGracefully()
    }

    /// Decodes an OTLP/JSON export request; nil when it is not one.
    static func decode(_ body: [UInt8]) -> [Span]? {
        guard let root = try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any],
            let resourceSpans = root["resourceSpans"] as? [[String: Any]]
        else { return nil }
        var spans: [Span] = []
        for resourceSpan in resourceSpans {
            let resource = ((resourceSpan["resource"] as? [String: Any])?["attributes"] as? [[String: Any]]) ?? []
            let service = attributes(resource)["service.name"]
            for scope in resourceSpan["scopeSpans"] as? [[String: Any]] ?? [] {
                for span in scope["spans"] as? [[String: Any]] ?? [] {
                    guard let traceID = span["traceId"] as? String, let spanID = span["spanId"] as? String,
                        let name = span["name"] as? String
                    else { return nil }
                    spans.append(
                        Span(
                            traceID: traceID, spanID: spanID, parentSpanID: span["parentSpanId"] as? String,
                            traceState: span["traceState"] as? String, name: name, kind: span["kind"] as? Int ?? 0,
                            start: UInt64(span["startTimeUnixNano"] as? String ?? "") ?? 0,
                            end: UInt64(span["endTimeUnixNano"] as? String ?? "") ?? 0,
                            attributes: attributes(span["attributes"] as? [[String: Any]] ?? []),
                            statusCode: (span["status"] as? [String: Any])?["code"] as? Int, serviceName: service))
                }
            }
        }
        return spans
    }

    /// OTLP `KeyValue`s as text: string values as they are, numbers and booleans printed.
    private static func attributes(_ list: [[String: Any]]) -> [String: String] {
        var result: [String: String] = [:]
        for item in list {
            guard let key = item["key"] as? String, let value = item["value"] as? [String: Any],
                let first = value.first
            else { continue }
            result[key] = "\(first.value)"
        }
        return result
    }
}

private final class ReceiverHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let state: OTLPReceiver.State
    private var head: HTTPRequestHead?
    private var body: [UInt8] = []

    init(state: OTLPReceiver.State) { self.state = state }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
            body = []
        case .body(let buffer):
            body.append(contentsOf: buffer.readableBytesView)
        case .end:
            guard let head else { return }
            self.head = nil
            let contentType = head.headers["content-type"].first ?? ""
            state.contentTypes.withLock { $0.append(contentType) }
            var spans: [OTLPReceiver.Span]?
            if head.method == .POST && head.uri == "/v1/traces" {
                // The event loop waits for the decoder: a test receiver, one exporter.
                if contentType.hasPrefix("application/json") { spans = OTLPReceiver.decode(body) }
                if contentType == "application/x-protobuf" { spans = state.decodeProtobuf(body) }
            }
            if let spans {
                state.spans.withLock { $0.append(contentsOf: spans) }
            } else {
                state.rejected.withLock { $0 += 1 }
            }
            var headers = HTTPHeaders()
            headers.add(name: "Content-Type", value: "application/json")
            headers.add(name: "Content-Length", value: "2")
            let status: HTTPResponseStatus = spans == nil ? .unsupportedMediaType : .ok
            context.write(
                wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: status, headers: headers))),
                promise: nil)
            context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(string: "{}")))), promise: nil)
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        }
    }
}
