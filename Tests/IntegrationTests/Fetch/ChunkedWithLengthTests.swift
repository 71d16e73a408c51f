import Dispatch
import Foundation
import ImageFetchWorker
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A response that sends both `Transfer-Encoding: chunked` and a `Content-Length` that lies:
/// libcurl reads the body by its chunks, as RFC 9112 (6.3) says, so the engine must judge the
/// body by them too. It took the length: a body shorter than it was `truncated`, and one longer
/// counted as complete, in the body flow control's backlog, while the rest still came.
@Suite("FetchEngine: chunked with a Content-Length")
struct ChunkedWithLengthTests {
    @Test func theChunksNotTheLengthSayWhenTheBodyIsComplete() async throws {
        let server = try ChunkedWithLengthServer()
        defer { server.stop() }
        let queue = DispatchQueue(label: "test.chunked-with-length")
        let engine = try FetchEngine(
            configuration: FetchEngineTests.configuration(), addressPolicy: nil, completionQueue: queue,
            maxWaitingBodies: 4)
        defer { engine.shutdown() }

        // Content-Length 10, then 1,000 bytes, a pause, and 2,000 more: not complete at 10.
        let short = Task { await FetchEngineTests.fetch(engine, server.url("/short")) }
        #expect(await FetchEngineTests.eventually { server.firstChunksSent >= 1 })
        try await Task.sleep(nanoseconds: 200_000_000)
        #expect(engine.waitingBodies == 0, "a body still arriving counted as complete")
        let shortResponse = await short.value
        #expect(shortResponse.error == nil)
        let shortResponseWhole = shortResponse.body == ChunkedWithLengthServer.body
        #expect(shortResponseWhole, "\(shortResponse.body.count) bytes")

        // Content-Length 100,000 over the same 3,000 bytes in chunks: complete, not truncated.
        let long = await FetchEngineTests.fetch(engine, server.url("/long"))
        #expect(long.error == nil)
        let longWhole = long.body == ChunkedWithLengthServer.body
        #expect(longWhole, "\(long.body.count) bytes")
        #expect(engine.waitingBodies == 0)
    }
}

/// An HTTP/1.1 server (Python, started by the test) that answers `/short` and `/long` with
/// ``body`` in chunks and a `Content-Length` of 10 or 100,000; `/short` pauses 1 s after its
/// first chunk.
final class ChunkedWithLengthServer: Sendable {
    static let body: [UInt8] =
        Array(repeating: UInt8(ascii: "a"), count: 1000) + Array(repeating: UInt8(ascii: "b"), count: 2000)

    let port: Int
    private let server: PythonServer
    private let counter: FirstChunks

    /// Responses whose first chunk went out, counted from the server's output.
    private final class FirstChunks: Sendable {
        let count = Mutex(0)
    }

    init() throws {
        let port = try TestBroker.freePort()
        self.port = port
        let counter = FirstChunks()
        self.counter = counter
        server = try PythonServer(
            script: Self.script, arguments: { _ in ["\(port)"] },
            output: { text in counter.count.withLock { $0 += text.components(separatedBy: "first").count - 1 } })
    }

    private static let script = """
        import socket, sys, threading, time
        listener = socket.create_server(("127.0.0.1", int(sys.argv[1])))
        print("ready", flush=True)
        def chunk(data):
            return b"%x\\r\\n" % len(data) + data + b"\\r\\n"
        def serve(connection):
            try:
                request = connection.recv(65536)
                path = request.split(b" ")[1]
                length = b"10" if path == b"/short" else b"100000"
                connection.sendall(b"HTTP/1.1 200 OK\\r\\nContent-Type: application/octet-stream\\r\\n"
                    + b"Transfer-Encoding: chunked\\r\\nContent-Length: " + length
                    + b"\\r\\nConnection: close\\r\\n\\r\\n" + chunk(b"a" * 1000))
                print("first", flush=True)
                if path == b"/short":
                    time.sleep(1)
                connection.sendall(chunk(b"b" * 2000) + b"0\\r\\n\\r\\n")
                connection.recv(1)
            except Exception:
                pass
            connection.close()
        while True:
            connection, _ = listener.accept()
            threading.Thread(target=serve, args=(connection,), daemon=True).start()
        """

    /// Responses whose first chunk went out.
    var firstChunksSent: Int { counter.count.withLock { $0 } }

    func url(_ path: String) -> String { "http://127.0.0.1:\(port)\(path)" }

    func stop() { server.stop() }
}
