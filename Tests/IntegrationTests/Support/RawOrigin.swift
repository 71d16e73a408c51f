import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// An HTTP/1.1 origin (Python, started by the test) that answers each path with bytes the test
/// wrote, as they are: status lines, headers and bodies no well-behaved server library would
/// send. It reads one request a connection, answers and closes; an unknown path is a 404.
/// `{port}` in a response is replaced by the origin's port.
final class RawOrigin: Sendable {
    let port: Int
    private let server: PythonServer
    private let log: RequestLog

    /// The paths requested, filled from the server's output.
    private final class RequestLog: Sendable {
        let paths = Mutex<[String]>([])
    }

    init(responses: [String: String]) throws {
        let port = try TestBroker.freePort()
        self.port = port
        let table = responses.mapValues { $0.replacingOccurrences(of: "{port}", with: "\(port)") }
        let log = RequestLog()
        self.log = log
        server = try PythonServer(
            script: Self.script, files: ["responses.json": try JSONSerialization.data(withJSONObject: table)],
            arguments: { ["\(port)", $0.appendingPathComponent("responses.json").path] },
            output: { text in
                let paths = text.split(separator: "\n").filter { $0.hasPrefix("request ") }.map {
                    String($0.dropFirst(8))
                }
                log.paths.withLock { $0 += paths }
            })
    }

    private static let script = """
        import json, socket, sys, threading
        responses = json.load(open(sys.argv[2]))
        listener = socket.create_server(("127.0.0.1", int(sys.argv[1])))
        print("ready", flush=True)
        def serve(connection):
            try:
                request = b""
                while b"\\r\\n\\r\\n" not in request:
                    data = connection.recv(65536)
                    if not data:
                        return
                    request += data
                path = request.split(b" ")[1].decode("latin-1")
                print("request " + path, flush=True)
                answer = responses.get(path, "HTTP/1.1 404 Not Found\\r\\nContent-Length: 0\\r\\n\\r\\n")
                connection.sendall(answer.encode("latin-1"))
            except Exception:
                pass
            finally:
                connection.close()
        while True:
            connection, _ = listener.accept()
            threading.Thread(target=serve, args=(connection,), daemon=True).start()
        """

    /// The paths requested so far, in order. The server prints each path before it answers, but
    /// its output reaches the log later than the answer reaches a client: a request of its own
    /// goes last, and once its path is in the log, so are all before it.
    var requests: [String] {
        Self.request(port: port, path: Self.barrier)
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline, !log.paths.withLock({ $0.contains(Self.barrier) }) { usleep(10_000) }
        return log.paths.withLock { paths in
            paths.removeAll { $0 == Self.barrier }
            return paths
        }
    }

    private static let barrier = "/.barrier"

    /// Sends `GET path` and reads the answer to its end (the server closes after it).
    private static func request(port: Int, path: String) {
        let fd = HealthServerClientsTests.connect(port)
        defer { close(fd) }
        let text = Array("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8)
        guard send(fd, text, text.count, 0) == text.count else { return }
        var buffer = [UInt8](repeating: 0, count: 1024)
        while recv(fd, &buffer, buffer.count, 0) > 0 {}
    }

    func url(_ path: String) -> String { "http://127.0.0.1:\(port)\(path)" }

    func stop() { server.stop() }
}
