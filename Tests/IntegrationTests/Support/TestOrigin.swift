import Dispatch
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization

/// A real HTTP/1.1 origin on 127.0.0.1 (an ephemeral port), built on SwiftNIO, for tests.
///
/// It counts accepted TCP connections, requests, and requests in flight (and the most seen at
/// once), so tests can check keep-alive and concurrency. Routes:
///
/// | path | response |
/// |---|---|
/// | `/ok.png` | 200 `image/png`, ``TestOrigin/okBody`` |
/// | `/validators.png?etag=E&last_modified=L` | `/ok.png` with `ETag: E` and `Last-Modified: L` (percent-decoded; never a 304) |
/// | `/fixture/NAME` | 200, the file Tests/Fixtures/images/NAME |
/// | `/slow?ms=N` | `/ok.png` after N ms |
/// | `/paced` | `/ok.png` after ``TestOrigin/pace`` ms, which the test may change mid-run |
/// | `/status/N` | status N, a short text body; `?ms=M` answers after M ms |
/// | `/redirect/N` | a chain of N 302 redirects, then `/ok.png` |
/// | `/loop` | 302 to itself |
/// | `/redirect-to?url=U` | 302 to U (percent-decoded); `&status=N` answers N instead of 302 |
/// | `/endless` | 200, chunked, 16 KiB chunks until the client goes away |
/// | `/endless?png=WxH` | the same, but the body starts with a PNG signature and an IHDR claiming W × H |
/// | `/trickle` | 200, Content-Length 1000, one byte a second |
/// | `/truncated` | 200, Content-Length 1000, 10 bytes, then the connection closes |
/// | `/big?bytes=N` | 200 with Content-Length N (default 100 MB), then nothing |
/// | `/html` | 200 `text/html` |
/// | `/flaky?key=K&fail=N` | 503 for the first N requests with key K, then `/ok.png` |
/// | `/html?type=T` | the same HTML body, declared as Content-Type T (a lying server) |
/// | `/headers` | 200 `text/plain`, the request's header lines, one `name: value` a line, names lower-cased |
/// | `/echo` | 200 with the request body; `x-method` carries the request method |
/// | `/credentials?ttl=S` | container credentials as JSON (`AccessKeyId` `ASIATEST<n>` for the n-th answer), expiring in S seconds (default 3600, or what ``TestOrigin/credentialsLifetime(_:)`` set); 500 while ``TestOrigin/failCredentials(_:)`` is on |
///
/// Any other path is a 404.
final class TestOrigin: Sendable {
    /// The body of `/ok.png`: a PNG signature, IHDR (64 × 32), an IDAT chunk whose data is filler,
    /// and IEND, each with its CRC, 12 KiB. The worker walks the chunks and their CRCs, not the pixels.
    static let okBody: [UInt8] = {
        let iend: [UInt8] = [0, 0, 0, 0, 0x49, 0x45, 0x4E, 0x44, 0xAE, 0x42, 0x60, 0x82]
        let idatLength = 12 * 1024 - 41 - 4 - iend.count
        var bytes = OriginHandler.pngHeader(width: 64, height: 32, idatLength: UInt32(idatLength))
        var state: UInt32 = 2_463_534_242
        while bytes.count < 41 + idatLength {
            state ^= state << 13
            state ^= state >> 17
            state ^= state << 5
            bytes.append(UInt8(truncatingIfNeeded: state))
        }
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes[37...] {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = crc & 1 == 1 ? 0xEDB8_8320 ^ (crc >> 1) : crc >> 1 }
        }
        crc ^= 0xFFFF_FFFF
        bytes += [UInt8(crc >> 24), UInt8((crc >> 16) & 0xFF), UInt8((crc >> 8) & 0xFF), UInt8(crc & 0xFF)]
        return bytes + iend
    }()

    /// What the origin has seen.
    struct Stats: Sendable, Equatable {
        /// TCP connections accepted.
        var connections = 0
        /// Requests received.
        var requests = 0
        /// Requests whose response has not finished.
        var inFlight = 0
        /// The most requests in flight at once.
        var maxInFlight = 0
        /// Requests seen per `/flaky` key.
        var flakyHits: [String: Int] = [:]
        /// The delay of `/paced` responses, in milliseconds.
        var pace = 0
        /// When each `/flaky` request arrived, per key: seconds on the origin's monotonic clock.
        var flakyTimes: [String: [Double]] = [:]
        /// Body bytes of `/endless` responses that the origin wrote to the socket, by request URI.
        var streamedBytes: [String: Int] = [:]
        /// The header lines of every request, `name: value` with the name lower-cased, by request URI
        /// (the last request wins).
        var headers: [String: [String]] = [:]
        /// The `Host` header of every request, in order.
        var hosts: [String] = []
        /// Credentials handed out by `/credentials`.
        var credentialsIssued = 0
        /// `/credentials` answers 500 while this is set.
        var credentialsFailing = false
        /// When set, `/credentials` answers with this lifetime instead of the query's `ttl`.
        var credentialsTTL: Double?
    }

    /// The port on 127.0.0.1.
    let port: Int
    private let group: MultiThreadedEventLoopGroup
    private let channel: any Channel
    private let counters: OriginCounters

    private init(port: Int, group: MultiThreadedEventLoopGroup, channel: any Channel, counters: OriginCounters) {
        self.port = port
        self.group = group
        self.channel = channel
        self.counters = counters
    }

    /// Starts an origin on 127.0.0.1 with an ephemeral port.
    static func start(threads: Int = 1) async throws -> TestOrigin {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: threads)
        let counters = OriginCounters()
        let channel = try await ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 1024)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                counters.update { $0.connections += 1 }
                return channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                    try channel.pipeline.syncOperations.addHandler(OriginHandler(counters: counters))
                }
            }
            .bind(host: "127.0.0.1", port: 0)
            .get()
        return TestOrigin(port: channel.localAddress?.port ?? 0, group: group, channel: channel, counters: counters)
    }

    /// `http://127.0.0.1:PORT` followed by `path`.
    func url(_ path: String) -> String {
        "http://127.0.0.1:\(port)\(path)"
    }

    /// A snapshot of the counters.
    var stats: Stats {
        counters.update { $0 }
    }

    /// The delay of `/paced` responses from now on, in milliseconds.
    func setPace(milliseconds: Int) {
        counters.update { $0.pace = milliseconds }
    }

    /// Sets every counter back to zero (requests in flight stay counted).
    func resetStats() {
        counters.update { stats in
            let inFlight = stats.inFlight
            let pace = stats.pace
            stats = Stats()
            stats.pace = pace
            stats.inFlight = inFlight
            stats.maxInFlight = inFlight
        }
    }

    /// Makes `/credentials` answer 500 (true) or credentials again (false).
    func failCredentials(_ failing: Bool) {
        counters.update { $0.credentialsFailing = failing }
    }

    /// Makes `/credentials` hand out credentials that live `seconds` (negative: expired already),
    /// whatever the query says; nil goes back to the query's `ttl`.
    func credentialsLifetime(_ seconds: Double?) {
        counters.update { $0.credentialsTTL = seconds }
    }

    /// Closes the listener and stops the event loops (which closes every connection).
    func shutdown() async throws {
        try? await channel.close().get()
        try await group.shutdownGracefully()
    }
}

/// The origin's counters, shared by every connection.
private final class OriginCounters: Sendable {
    private let stats = Mutex(TestOrigin.Stats())

    func update<R>(_ body: (inout TestOrigin.Stats) -> R) -> R {
        stats.withLock { body(&$0) }
    }
}

/// One connection's request handling.
private final class OriginHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let counters: OriginCounters
    private var head: HTTPRequestHead?
    private var requestBody: [UInt8] = []
    private var responding = false
    private var active = true

    init(counters: OriginCounters) {
        self.counters = counters
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
            requestBody = []
        case .body(let buffer):
            requestBody.append(contentsOf: buffer.readableBytesView)
        case .end:
            guard let head else { return }
            self.head = nil
            responding = true
            counters.update {
                $0.requests += 1
                $0.inFlight += 1
                $0.maxInFlight = max($0.maxInFlight, $0.inFlight)
                $0.headers[head.uri] = head.headers.map { "\($0.name.lowercased()): \($0.value)" }
                $0.hosts.append(head.headers["host"].first ?? "")
            }
            route(context: context, head: head)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        active = false
        finishedResponse()
        context.fireChannelInactive()
    }

    private func finishedResponse() {
        guard responding else { return }
        responding = false
        counters.update { $0.inFlight -= 1 }
    }

    // MARK: Routes

    private func route(context: ChannelHandlerContext, head: HTTPRequestHead) {
        let (path, query) = Self.split(head.uri)
        let parts = path.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
        switch parts.first ?? "" {
        case "ok.png":
            respond(context, .ok, contentType: "image/png", body: TestOrigin.okBody)
        case "validators.png":
            // `/ok.png` with the `etag` and `last_modified` of the query (percent-decoded) as its
            // ETag and Last-Modified; it never answers 304.
            let headers = [("ETag", query["etag"]), ("Last-Modified", query["last_modified"])]
                .compactMap { name, value in value.map { (name, $0) } }
            respond(context, .ok, contentType: "image/png", body: TestOrigin.okBody, extraHeaders: headers)
        case "fixture":
            // `/fixture/NAME`: Tests/Fixtures/images/NAME, a real image (the decode-mode tests).
            let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .deletingLastPathComponent().appendingPathComponent("Fixtures/images")
            let name = parts.count > 1 && !parts[1].contains("..") ? parts[1] : ""
            if let data = FileManager.default.contents(atPath: root.appendingPathComponent(name).path), !name.isEmpty {
                respond(context, .ok, contentType: "application/octet-stream", body: [UInt8](data))
            } else {
                respond(context, .notFound, contentType: "text/plain", body: Array("no such fixture\n".utf8))
            }
        case "padded.png":
            // `/padded.png?bytes=N`: the image followed by zero bytes, N bytes in all.
            let size = max(Int(query["bytes"] ?? "") ?? 0, TestOrigin.okBody.count)
            respond(
                context, .ok, contentType: "image/png",
                body: TestOrigin.okBody + [UInt8](repeating: 0, count: size - TestOrigin.okBody.count))
        case "slow":
            let ms = Int64(query["ms"] ?? "") ?? 100
            context.eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(ms)) {
                guard self.active else { return }
                self.respond(context, .ok, contentType: "image/png", body: TestOrigin.okBody)
            }
        case "paced":
            let ms = counters.update { $0.pace }
            context.eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(Int64(ms))) {
                guard self.active else { return }
                self.respond(context, .ok, contentType: "image/png", body: TestOrigin.okBody)
            }
        case "status":
            let code = parts.count > 1 ? Int(parts[1]) ?? 500 : 500
            // `?ms=N`: after N ms, so that jobs for it overlap (the shared-fetch tests).
            let delay = Int64(query["ms"] ?? "") ?? 0
            context.eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(delay)) {
                guard self.active else { return }
                self.respond(
                    context, HTTPResponseStatus(statusCode: code), contentType: "text/plain",
                    body: Array("status \(code)\n".utf8))
            }
        case "redirect":
            let remaining = parts.count > 1 ? Int(parts[1]) ?? 1 : 1
            redirect(context, to: remaining > 1 ? "/redirect/\(remaining - 1)" : "/ok.png")
        case "loop":
            redirect(context, to: "/loop")
        case "redirect-to":
            let status = Int(query["status"] ?? "").map { HTTPResponseStatus(statusCode: $0) } ?? .found
            redirect(context, to: query["url"] ?? "/ok.png", status: status)
        case "endless":
            var headers = HTTPHeaders()
            headers.add(name: "Content-Type", value: "image/png")
            context.write(
                wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: .ok, headers: headers))),
                promise: nil)
            let filler = [UInt8](repeating: 0x42, count: 16 * 1024)
            if let size = query["png"], let (width, height) = Self.dimensions(size) {
                let header = Self.pngHeader(width: width, height: height)
                context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(bytes: header)))), promise: nil)
                counters.update { $0.streamedBytes[head.uri, default: 0] += header.count }
            }
            streamForever(context, uri: head.uri, chunk: ByteBuffer(bytes: filler))
        case "trickle":
            var headers = HTTPHeaders()
            headers.add(name: "Content-Type", value: "image/png")
            headers.add(name: "Content-Length", value: "1000")
            context.writeAndFlush(
                wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: .ok, headers: headers))),
                promise: nil)
            trickle(context, remaining: 1000)
        case "truncated":
            var headers = HTTPHeaders()
            headers.add(name: "Content-Type", value: "image/png")
            headers.add(name: "Content-Length", value: "1000")
            context.write(
                wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: .ok, headers: headers))),
                promise: nil)
            context.writeAndFlush(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(bytes: TestOrigin.okBody.prefix(10))))))
                .assumeIsolated().whenComplete { _ in context.close(promise: nil) }
        case "big":
            var headers = HTTPHeaders()
            headers.add(name: "Content-Type", value: "image/png")
            headers.add(name: "Content-Length", value: query["bytes"] ?? "100000000")
            context.writeAndFlush(
                wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: .ok, headers: headers))),
                promise: nil)
        case "flaky":
            // `/flaky?key=K&fail=N`: 503 for the first N requests with key K, then the image.
            let key = query["key"] ?? ""
            let failures = Int(query["fail"] ?? "") ?? 2
            let hits = counters.update { stats -> Int in
                stats.flakyHits[key, default: 0] += 1
                stats.flakyTimes[key, default: []].append(Double(DispatchTime.now().uptimeNanoseconds) / 1e9)
                return stats.flakyHits[key] ?? 0
            }
            if hits <= failures {
                respond(context, .serviceUnavailable, contentType: "text/plain", body: Array("try later\n".utf8))
            } else {
                respond(context, .ok, contentType: "image/png", body: TestOrigin.okBody)
            }
        case "html":
            respond(
                context, .ok, contentType: query["type"] ?? "text/html; charset=utf-8",
                body: Array("<!doctype html><title>not an image</title>\n".utf8))
        case "headers":
            let lines = head.headers.map { "\($0.name.lowercased()): \($0.value)\n" }.joined()
            respond(context, .ok, contentType: "text/plain", body: Array(lines.utf8))
        case "credentials":
            let answer = counters.update { stats -> (issued: Int, ttl: Double?)? in
                if stats.credentialsFailing { return nil }
                stats.credentialsIssued += 1
                return (stats.credentialsIssued, stats.credentialsTTL)
            }
            guard let (issued, forcedTTL) = answer else {
                respond(context, .internalServerError, contentType: "text/plain", body: Array("down\n".utf8))
                return
            }
            let ttl = forcedTTL ?? Double(query["ttl"] ?? "") ?? 3600
            let formatter = ISO8601DateFormatter()
            let expiration = formatter.string(from: Date().addingTimeInterval(ttl))
            let json =
                #"{"AccessKeyId":"ASIATEST\#(issued)","SecretAccessKey":"secret\#(issued)","Token":"token\#(issued)","Expiration":"\#(expiration)"}"#
            respond(context, .ok, contentType: "application/json", body: Array(json.utf8))
        case "echo":
            respond(
                context, .ok, contentType: "application/octet-stream", body: requestBody,
                extraHeaders: [("x-method", head.method.rawValue)])
        default:
            respond(context, .notFound, contentType: "text/plain", body: Array("not found\n".utf8))
        }
    }

    private func respond(
        _ context: ChannelHandlerContext, _ status: HTTPResponseStatus, contentType: String, body: [UInt8],
        extraHeaders: [(String, String)] = []
    ) {
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: contentType)
        headers.add(name: "Content-Length", value: String(body.count))
        for (name, value) in extraHeaders { headers.add(name: name, value: value) }
        context.write(
            wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: status, headers: headers))),
            promise: nil)
        if !body.isEmpty {
            context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(bytes: body)))), promise: nil)
        }
        finishedResponse()
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
    }

    private func redirect(_ context: ChannelHandlerContext, to location: String, status: HTTPResponseStatus = .found) {
        var headers = HTTPHeaders()
        headers.add(name: "Location", value: location)
        headers.add(name: "Content-Type", value: "text/html")
        let body = Array("<a href=\"\">moved</a>\n".utf8)
        headers.add(name: "Content-Length", value: String(body.count))
        context.write(
            wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: status, headers: headers))),
            promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(bytes: body)))), promise: nil)
        finishedResponse()
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
    }

    private func streamForever(_ context: ChannelHandlerContext, uri: String, chunk: ByteBuffer) {
        guard active else { return }
        context.writeAndFlush(wrapOutboundOut(.body(.byteBuffer(chunk)))).assumeIsolated().whenComplete { result in
            guard case .success = result else { return }
            self.counters.update { $0.streamedBytes[uri, default: 0] += chunk.readableBytes }
            self.streamForever(context, uri: uri, chunk: chunk)
        }
    }

    /// `WxH` → (W, H).
    private static func dimensions(_ text: String) -> (UInt32, UInt32)? {
        let parts = text.split(separator: "x")
        guard parts.count == 2, let width = UInt32(parts[0]), let height = UInt32(parts[1]) else { return nil }
        return (width, height)
    }

    /// A PNG signature, an IHDR chunk (8-bit RGBA) claiming `width` × `height` with its CRC (the
    /// sniffer checks it), and the header of an IDAT chunk of `idatLength` bytes: 41 bytes.
    fileprivate static func pngHeader(width: UInt32, height: UInt32, idatLength: UInt32 = 0x7FFF_FFFF) -> [UInt8] {
        func be32(_ value: UInt32) -> [UInt8] {
            [UInt8(value >> 24), UInt8((value >> 16) & 0xFF), UInt8((value >> 8) & 0xFF), UInt8(value & 0xFF)]
        }
        let ihdr: [UInt8] = [0x49, 0x48, 0x44, 0x52] + be32(width) + be32(height) + [8, 6, 0, 0, 0]
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in ihdr {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = crc & 1 == 1 ? 0xEDB8_8320 ^ (crc >> 1) : crc >> 1 }
        }
        return [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + be32(13) + ihdr + be32(crc ^ 0xFFFF_FFFF)
            + be32(idatLength) + [0x49, 0x44, 0x41, 0x54]
    }

    private func trickle(_ context: ChannelHandlerContext, remaining: Int) {
        guard active, remaining > 0 else { return }
        context.eventLoop.assumeIsolated().scheduleTask(in: .seconds(1)) {
            guard self.active else { return }
            context.writeAndFlush(self.wrapOutboundOut(.body(.byteBuffer(ByteBuffer(bytes: [0x42])))), promise: nil)
            if remaining == 1 {
                self.finishedResponse()
                context.writeAndFlush(self.wrapOutboundOut(.end(nil)), promise: nil)
            } else {
                self.trickle(context, remaining: remaining - 1)
            }
        }
    }

    // MARK: URI parsing

    private static func split(_ uri: String) -> (path: String, query: [String: String]) {
        guard let mark = uri.firstIndex(of: "?") else { return (uri, [:]) }
        var query: [String: String] = [:]
        for pair in uri[uri.index(after: mark)...].split(separator: "&") {
            let kv = pair.split(separator: "=", maxSplits: 1)
            query[percentDecoded(kv[0])] = kv.count > 1 ? percentDecoded(kv[1]) : ""
        }
        return (String(uri[..<mark]), query)
    }

    private static func percentDecoded(_ text: Substring) -> String {
        var bytes: [UInt8] = []
        var iterator = Array(text.utf8).makeIterator()
        while let byte = iterator.next() {
            if byte == UInt8(ascii: "%"), let high = iterator.next(), let low = iterator.next(),
                let value = UInt8(String(decoding: [high, low], as: UTF8.self), radix: 16)
            {
                bytes.append(value)
            } else {
                bytes.append(byte == UInt8(ascii: "+") ? UInt8(ascii: " ") : byte)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
