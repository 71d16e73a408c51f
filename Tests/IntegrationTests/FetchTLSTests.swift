import Dispatch
import Foundation
import ImageFetchWorker
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The fetch engine against real HTTPS origins (nginx, ``TLSOrigin``): the CA store, session
/// resumption, HTTP/2 multiplexing, certificate failures, broken HTTP/2 framing, and which
/// connections a transfer may reuse.
@Suite("FetchEngine over TLS", .serialized)
struct FetchTLSTests {
    static func engine(
        _ origin: TLSOrigin, caFile: String? = nil,
        addressPolicy: (@Sendable (UnsafePointer<sockaddr>) -> String?)? = nil,
        resolve: [String]? = nil
    ) throws -> FetchEngine {
        let configuration = FetchEngineTests.configuration {
            $0.tls.caFile = caFile ?? origin.caFile
            $0.resolve = resolve ?? origin.resolve
        }
        return try FetchEngine(configuration: configuration, addressPolicy: addressPolicy, maxConnections: 64)
    }

    /// Runs `count` fetches at once and returns their responses.
    static func fetchAll(_ engine: FetchEngine, _ urls: [String]) async -> [FetchResponse] {
        await withTaskGroup(of: FetchResponse.self) { group in
            for url in urls { group.addTask { await FetchEngineTests.fetch(engine, url) } }
            var responses: [FetchResponse] = []
            for await response in group { responses.append(response) }
            return responses
        }
    }

    @Test("the CA bundle is read once across many new TLS connections")
    func caStoreLoadedOnce() async throws {
        let names = (1...5).map { "ca\($0).test" }
        let origin = try TLSOrigin.start(names: names, options: .init(http2: false, keepaliveSeconds: 0))
        defer { origin.shutdown() }
        let opens = try FileOpenWatch(path: origin.caFile)
        _ = FileManager.default.contents(atPath: origin.caFile)
        #expect(opens.count() == 1, "the watch sees an open")
        let engine = try Self.engine(origin)
        defer { engine.shutdown() }
        for index in 0..<24 {
            let response = await FetchEngineTests.fetch(engine, origin.url(names[index % names.count], "/n/\(index)"))
            #expect(response.failure == nil && response.httpStatus == 200, "\(String(describing: response.failure))")
        }
        #expect(await FetchEngineTests.eventually { origin.accessLog().count == 24 })
        let log = origin.accessLog()
        #expect(Set(log.map(\.connection)).count == 24, "the server closes every connection after one request")
        let counts = engine.tlsCounts
        #expect(counts.handshakes == 24)
        let caOpens = opens.count() - 1
        #expect(caOpens <= 1, "the CA bundle was opened \(caOpens) times for 24 connections")
        #expect(counts.caStoreLoads == 1)
    }

    @Test("a TLS session is resumed after its connection closed, by any pooled handle")
    func sessionResumedAcrossHandles() async throws {
        let origin = try TLSOrigin.start(names: ["resume.test"], options: .init(http2: false))
        defer { origin.shutdown() }
        let engine = try Self.engine(origin)
        defer { engine.shutdown() }
        // One fetch whose connection then closes (cleanly, so its session stays resumable).
        var closing = FetchRequest(url: origin.url("resume.test", "/n/first"))
        closing.headers = ["Connection: close"]
        #expect(await FetchEngineTests.fetch(engine, closing).failure == nil)
        // Three that overlap, each on a new connection: the first gets the pooled handle of the
        // first fetch, the others new handles, which have the session only through the engine's
        // share. They start 100 ms apart, so no two handshakes run at the same moment.
        let responses = await withTaskGroup(of: FetchResponse.self) { group in
            for index in 0..<3 {
                let url = origin.url("resume.test", "/sleep.png?n=\(index)")
                group.addTask { await FetchEngineTests.fetch(engine, url) }
                try? await Task.sleep(for: .milliseconds(100))
            }
            var responses: [FetchResponse] = []
            for await response in group { responses.append(response) }
            return responses
        }
        #expect(responses.allSatisfy { $0.failure == nil })
        // nginx logs a request after its response went out: wait for the lines.
        #expect(await FetchEngineTests.eventually { origin.accessLog().count == 4 })
        let log = origin.accessLog()
        #expect(Set(log.map(\.connection)).count == 4)
        #expect(log.first?.sessionReused == false)
        // Without the share only the first fetch's handle resumes.
        let resumed = log.dropFirst().map(\.sessionReused)
        #expect(resumed == [true, true, true])
        #expect(engine.tlsCounts.handshakes == 4)
        #expect(engine.tlsCounts.resumedSessions == 3)
    }

    /// libcurl 7.88's shared session cache keeps the 8 sessions used last: the engine keeps its
    /// own, so a reconnection resumes after connections to a dozen other origins too.
    @Test("a TLS session is resumed after connections to more origins than libcurl's cache holds")
    func sessionResumedAfterManyOrigins() async throws {
        let others = (1...12).map { "other\($0).test" }
        let origin = try TLSOrigin.start(names: ["first.test"] + others, options: .init(http2: false))
        defer { origin.shutdown() }
        let engine = try Self.engine(origin)
        defer { engine.shutdown() }
        // Each connection closes after its one request (cleanly, so its session stays resumable).
        func fetchAndClose(_ name: String, _ path: String) async {
            var request = FetchRequest(url: origin.url(name, path))
            request.headers = ["Connection: close"]
            let response = await FetchEngineTests.fetch(engine, request)
            #expect(response.failure == nil, "\(name): \(String(describing: response.failure))")
        }
        await fetchAndClose("first.test", "/n/first")
        for name in others { await fetchAndClose(name, "/n/other") }
        await fetchAndClose("first.test", "/n/again")
        #expect(await FetchEngineTests.eventually { origin.accessLog().count == 14 })
        let log = origin.accessLog()
        #expect(Set(log.map(\.connection)).count == 14)
        #expect(log.filter { $0.sessionReused }.count == 1, "only the last connection had a session to resume")
        #expect(log.last?.sessionReused == true, "the first origin's session was resumed")
        #expect(engine.tlsCounts.resumedSessions == 1)
    }

    @Test("HTTP/2 transfers to one origin started together share one connection")
    func http2Multiplexes() async throws {
        let origin = try TLSOrigin.start(names: ["h2.test"])
        defer { origin.shutdown() }
        let engine = try Self.engine(origin)
        defer { engine.shutdown() }
        let urls = (0..<12).map { origin.url("h2.test", "/sleep.png?n=\($0)") }
        let responses = await Self.fetchAll(engine, urls)
        #expect(responses.allSatisfy { $0.failure == nil && $0.httpVersion == .http2 })
        #expect(responses.map(\.connectionsOpened).reduce(0, +) == 1)
        #expect(await FetchEngineTests.eventually { origin.accessLog().count == 12 })
        let log = origin.accessLog()
        #expect(log.allSatisfy { $0.serverProtocol == "HTTP/2.0" })
        #expect(Set(log.map(\.connection)).count == 1, "connections: \(Set(log.map(\.connection)))")
        // Later transfers reuse it.
        let again = await FetchEngineTests.fetch(engine, origin.url("h2.test"))
        #expect(again.connectionsOpened == 0 && again.httpVersion == .http2)
        #expect(Set(origin.accessLog().map(\.connection)).count == 1)
    }

    @Test("an HTTP/1.1-only origin gets keep-alive connections")
    func http1KeepAlive() async throws {
        let origin = try TLSOrigin.start(names: ["h1.test"], options: .init(http2: false))
        defer { origin.shutdown() }
        let engine = try Self.engine(origin)
        defer { engine.shutdown() }
        for index in 0..<5 {
            let response = await FetchEngineTests.fetch(engine, origin.url("h1.test", "/n/\(index)"))
            #expect(response.failure == nil && response.httpVersion == .http11)
        }
        #expect(await FetchEngineTests.eventually { origin.accessLog().count == 5 })
        let log = origin.accessLog()
        #expect(log.allSatisfy { $0.serverProtocol == "HTTP/1.1" })
        #expect(Set(log.map(\.connection)).count == 1)
        #expect(log.map(\.connectionRequests) == [1, 2, 3, 4, 5])
    }

    @Test("a certificate that does not verify is tls_failure, not retryable, after one handshake attempt")
    func certificateFailure() async throws {
        let origin = try TLSOrigin.start(names: ["bad.test"])
        defer { origin.shutdown() }
        let engine = try Self.engine(origin, caFile: origin.otherCAFile)
        defer { engine.shutdown() }
        let response = await FetchEngineTests.fetch(engine, origin.url("bad.test"))
        #expect(response.failure == .tls)
        #expect(response.error?.code == .tlsFailure && response.error?.retryable == false)
        #expect(origin.accessLog().isEmpty)
        #expect(engine.tlsCounts.handshakes == 0)
        // nginx writes its error log after the client has its answer: wait for the line, then
        // make sure no second attempt follows.
        let failedHandshakes = { origin.errorLog().components(separatedBy: "SSL_do_handshake() failed").count - 1 }
        #expect(await FetchEngineTests.eventually { failedHandshakes() >= 1 })
        try await Task.sleep(nanoseconds: 200_000_000)
        let attempts = failedHandshakes()
        #expect(attempts == 1, "handshakes the origin saw fail: \(attempts)")
    }

    @Test("a handshake the origin resets is connect_failed and retryable, one it refuses stays tls_failure")
    func handshakeResetIsAConnectionFailure() async throws {
        let origin = try TLSOrigin.start(names: ["reset.test"])
        defer { origin.shutdown() }
        // On the first port: read the ClientHello, then close with SO_LINGER 0, so the client
        // meets ECONNRESET, as behind an overloaded load balancer. On the second: answer it with
        // a handshake_failure alert and close cleanly, a refusal with no socket error.
        let resetPort = try TestBroker.freePort()
        let alertPort = try TestBroker.freePort()
        let server = try PythonServer(
            script: """
                import socket, struct, sys, threading
                def serve(listener, alert):
                    while True:
                        connection, _ = listener.accept()
                        connection.recv(4096)
                        if alert:
                            connection.sendall(bytes([0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x28]))
                            connection.shutdown(socket.SHUT_WR)
                            connection.recv(4096)
                        else:
                            connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                        connection.close()
                # Both listen before "ready" is printed.
                resets = socket.create_server(("127.0.0.1", int(sys.argv[1])))
                alerts = socket.create_server(("127.0.0.1", int(sys.argv[2])))
                threading.Thread(target=serve, args=(resets, False), daemon=True).start()
                threading.Thread(target=serve, args=(alerts, True), daemon=True).start()
                print("ready", flush=True)
                threading.Event().wait()
                """,
            arguments: { _ in ["\(resetPort)", "\(alertPort)"] }, output: { _ in })
        defer { server.stop() }
        let engine = try Self.engine(
            origin,
            resolve: origin.resolve + ["reset.test:\(resetPort):127.0.0.1", "reset.test:\(alertPort):127.0.0.1"])
        defer { engine.shutdown() }
        let response = await FetchEngineTests.fetch(engine, "https://reset.test:\(resetPort)/ok.png")
        #expect(response.failure == .connectFailed(.cutInHandshake), "\(String(describing: response.failure))")
        #expect(response.error?.code == .connectFailed && response.error?.retryable == true)
        // The same pooled handle next, whose last socket error (libcurl never clears it) is the
        // reset: the refusal must not pass for another cut handshake.
        let refused = await FetchEngineTests.fetch(engine, "https://reset.test:\(alertPort)/ok.png")
        #expect(refused.failure == .tls, "\(String(describing: refused.failure))")
        #expect(refused.error?.code == .tlsFailure && refused.error?.retryable == false)
        let good = await FetchEngineTests.fetch(engine, origin.url("reset.test"))
        #expect(good.failure == nil)
    }

    @Test("an origin that breaks HTTP/2 framing gives connect_failed, and the engine goes on")
    func brokenHTTP2Framing() async throws {
        let origin = try TLSOrigin.start(names: ["garbage.test"])
        defer { origin.shutdown() }
        let server = try GarbageH2Server(certificate: origin.serverCertificate, key: origin.serverKey)
        defer { server.stop() }
        let engine = try Self.engine(origin, resolve: origin.resolve + ["garbage.test:\(server.port):127.0.0.1"])
        defer { engine.shutdown() }
        let response = await FetchEngineTests.fetch(engine, "https://garbage.test:\(server.port)/ok.png")
        // libcurl 7.88 (nghttp2) gives up on the connection's first bytes, which are no SETTINGS
        // frame, as an empty reply (CURLE_GOT_NOTHING; the curl tool says "(52) Empty reply from
        // server"). Framing errors later in a stream come as CURLE_HTTP2(_STREAM): `.http2Framing`.
        #expect(response.failure == .connectFailed(.closedEarly), "\(String(describing: response.failure))")
        #expect(response.error?.code == .connectFailed && response.error?.retryable == true)
        #expect(response.httpStatus == nil && response.body.isEmpty)
        // The engine goes on: the real origin still answers over HTTP/2.
        let good = await FetchEngineTests.fetch(engine, origin.url("garbage.test"))
        #expect(good.failure == nil && good.httpVersion == .http2)
    }

    @Test("a connection is reused only for the host name it was opened and vetted for")
    func connectionsAreNotSharedAcrossNames() async throws {
        let origin = try TLSOrigin.start(names: ["one.test", "two.test"])
        defer { origin.shutdown() }
        let vetted = Mutex(0)
        // Both names on the same address and port: only the name tells the origins apart.
        let address = origin.address(of: "one.test")
        let engine = try Self.engine(
            origin,
            addressPolicy: { _ in
                vetted.withLock { $0 += 1 }
                return nil
            },
            resolve: ["one.test:\(origin.port):\(address)", "two.test:\(origin.port):\(address)"])
        defer { engine.shutdown() }
        for name in ["one.test", "two.test", "one.test", "two.test"] {
            let response = await FetchEngineTests.fetch(engine, origin.url(name))
            #expect(response.failure == nil)
        }
        #expect(await FetchEngineTests.eventually { origin.accessLog().count == 4 })
        let log = origin.accessLog()
        let byHost = Dictionary(grouping: log, by: \.host).mapValues { Set($0.map(\.connection)) }
        #expect(byHost["one.test"]?.count == 1 && byHost["two.test"]?.count == 1)
        #expect(byHost["one.test"]?.isDisjoint(with: byHost["two.test"] ?? []) == true)
        #expect(vetted.withLock { $0 } == 2, "one vetted connect per origin")
    }
}

/// Counts the opens of one file with inotify, whoever opens it.
final class FileOpenWatch: @unchecked Sendable {  // count() reads the descriptor; one caller at a time
    private let fd: Int32

    init(path: String) throws {
        fd = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        // Closes too: the kernel merges identical events that were not read yet, so a run of
        // opens alone would read as one; open and close alternate and are never merged.
        let mask = UInt32(IN_OPEN) | UInt32(IN_CLOSE_NOWRITE)
        guard fd >= 0, inotify_add_watch(fd, path, mask) >= 0 else { throw POSIXError(.EINVAL) }
    }

    deinit { close(fd) }

    private var seen = 0

    /// Opens seen so far.
    func count() -> Int {
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let read = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            guard read > 0 else { break }
            var offset = 0
            while offset < read {
                let (mask, length) = buffer.withUnsafeBytes {
                    (
                        $0.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self),
                        $0.loadUnaligned(fromByteOffset: offset + 12, as: UInt32.self)
                    )
                }
                if mask & UInt32(IN_OPEN) != 0 { seen += 1 }
                offset += 16 + Int(length)
            }
        }
        return seen
    }
}

/// A TLS server that offers only h2 by ALPN, then answers the client's preface with bytes that
/// are no HTTP/2 frames (an HTTP/1.1 response). Python's ssl module, started by the test.
final class GarbageH2Server: @unchecked Sendable {  // set up once; stop() from the test only
    let port: Int
    private let process: Process
    private let script: URL

    init(certificate: String, key: String) throws {
        port = try TestBroker.freePort()
        script = FileManager.default.temporaryDirectory.appendingPathComponent("ifw-garbage-h2-\(UUID().uuidString).py")
        try """
        import socket, ssl, sys
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(sys.argv[2], sys.argv[3])
        context.set_alpn_protocols(["h2"])
        listener = socket.create_server(("127.0.0.1", int(sys.argv[1])))
        print("ready", flush=True)
        while True:
            raw, _ = listener.accept()
            try:
                connection = context.wrap_socket(raw, server_side=True)
                connection.recv(4096)
                connection.sendall(b"HTTP/1.1 200 OK\\r\\nContent-Length: 5\\r\\n\\r\\nhello" * 4)
                connection.recv(4096)
                connection.close()
            except Exception:
                raw.close()
        """.write(to: script, atomically: true, encoding: .utf8)
        process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = [script.path, "\(port)", certificate, key]
        let ready = Pipe()
        process.standardOutput = ready
        try process.run()
        _ = ready.fileHandleForReading.readData(ofLength: 6)
    }

    func stop() {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        try? FileManager.default.removeItem(at: script)
    }
}
