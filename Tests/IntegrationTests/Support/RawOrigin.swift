import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// An HTTP/1.1 origin (Python, started by the test) that answers each path with bytes the test
/// wrote, as they are: status lines, headers and bodies no well-behaved server library would
/// send. It reads one request a connection, answers and closes; an unknown path is a 404.
/// `{port}` in a response is replaced by the origin's port.
final class RawOrigin: @unchecked Sendable {  // set up once; read and stopped by the test only
    let port: Int
    private let process: Process
    private let folder: URL
    private let output: FileHandle

    init(responses: [String: String]) throws {
        let port = try TestBroker.freePort()
        self.port = port
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("ifw-raw-origin-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let table = responses.mapValues { $0.replacingOccurrences(of: "{port}", with: "\(port)") }
        try JSONSerialization.data(withJSONObject: table).write(to: folder.appendingPathComponent("responses.json"))
        try """
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
        """.write(to: folder.appendingPathComponent("origin.py"), atomically: true, encoding: .utf8)
        process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = [
            folder.appendingPathComponent("origin.py").path, "\(port)",
            folder.appendingPathComponent("responses.json").path,
        ]
        let pipe = Pipe()
        process.standardOutput = pipe
        output = pipe.fileHandleForReading
        try process.run()
        _ = output.readData(ofLength: 6)
        output.readabilityHandler = { [weak self] handle in
            let text = String(decoding: handle.availableData, as: UTF8.self)
            let paths = text.split(separator: "\n").filter { $0.hasPrefix("request ") }.map { String($0.dropFirst(8)) }
            self?.log.withLock { $0 += paths }
        }
    }

    private let log = Mutex<[String]>([])

    /// The paths requested so far, in order.
    var requests: [String] { log.withLock { $0 } }

    func url(_ path: String) -> String { "http://127.0.0.1:\(port)\(path)" }

    func stop() {
        output.readabilityHandler = nil
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        try? FileManager.default.removeItem(at: folder)
    }
}
