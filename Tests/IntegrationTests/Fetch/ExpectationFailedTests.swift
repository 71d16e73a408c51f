import Foundation
import ImageFetchWorker
import Synchronization
import Testing

/// An upload of over 1 MiB with SigV4 keeps libcurl's `Expect: 100-continue`. A store (or a proxy)
/// that answers `417` makes libcurl send the upload again, without it, on the same transfer: the
/// second answer is the result, headers and all.
@Suite("FetchEngine: a 417 to an upload's Expect")
struct ExpectationFailedTests {
    /// Answers 417 to a request that expects a 100, and 200 with an ETag to one that does not.
    private static let script = """
        import socket, sys, threading
        listener = socket.create_server(("127.0.0.1", int(sys.argv[1])))
        print("ready", flush=True)
        def serve(connection):
            try:
                data = b""
                while True:
                    while b"\\r\\n\\r\\n" not in data:
                        more = connection.recv(65536)
                        if not more:
                            return
                        data += more
                    head, data = data.split(b"\\r\\n\\r\\n", 1)
                    lines = head.decode("latin-1").lower().split("\\r\\n")
                    print("request " + lines[0], flush=True)
                    if "expect: 100-continue" in lines:
                        print("expect", flush=True)
                        connection.sendall(b"HTTP/1.1 417 Expectation Failed\\r\\nContent-Type: text/html\\r\\n"
                            + b"Content-Length: 0\\r\\n\\r\\n")
                        continue
                    length = int([l for l in lines if l.startswith("content-length:")][0].split(":")[1])
                    while len(data) < length:
                        more = connection.recv(65536)
                        if not more:
                            return
                        data += more
                    data = data[length:]
                    connection.sendall(b"HTTP/1.1 200 OK\\r\\nETag: \\"second\\"\\r\\nContent-Length: 0\\r\\n\\r\\n")
            finally:
                connection.close()
        while True:
            connection, _ = listener.accept()
            threading.Thread(target=serve, args=(connection,), daemon=True).start()
        """

    @Test(.timeLimit(.minutes(1)))
    func theAnswerToTheUploadSentAgainIsTheResult() async throws {
        let port = try TestBroker.freePort()
        let printed = Mutex("")
        let server = try PythonServer(
            script: Self.script, arguments: { _ in ["\(port)"] },
            output: { text in printed.withLock { $0 += text } })
        defer { server.stop() }
        let engine = try FetchEngine(configuration: FetchEngineTests.configuration(), addressPolicy: nil)
        defer { engine.shutdown() }
        var request = FetchRequest(url: "http://127.0.0.1:\(port)/bucket/key")
        request.method = .put
        request.uploadBody = [UInt8](repeating: 7, count: 1_100_000)
        request.awsSigV4 = "aws:amz:us-east-1:s3"
        request.userPassword = "key:secret"
        request.checkAddresses = false
        let response = await FetchEngineTests.fetch(engine, request)
        #expect(response.error == nil, "\(String(describing: response.error))")
        #expect(response.httpStatus == 200)
        #expect(response.etag == "\"second\"")
        // The first request did expect a 100: else the test would prove nothing.
        #expect(await eventually(timeout: 5) { printed.withLock { $0.contains("expect") } })
    }
}
