import Foundation
import ImageFetchWorker
import Synchronization

/// Consumes a queue through scripts/amqp-peer.py (pika), not the worker's own AMQP client: the
/// data-safety tests count what reached the broker with code that shares nothing with the
/// product's `BrokerSession`, `ContentAssembler` or `AckBatcher`, so a bug symmetric between the
/// worker's publishing and consuming sides cannot hide there.
///
/// The peer appends each body to a file (one base64 line, flushed before its ack) and reconnects
/// through the URLs after a lost connection; the test reads the file.
final class PeerCollector: @unchecked Sendable {
    // @unchecked Sendable: `process` is started in init and only signalled afterwards; the file's
    // reading state is behind `state`.
    private let process: Process
    private let path: String
    private let state = Mutex((offset: 0, partial: [UInt8](), bodies: [[UInt8]]()))

    /// Starts consuming `queue` through the first reachable URL of `urls` (comma-separated).
    init(urls: String, queue: String) throws {
        guard AMQPPeer.isInstalled else {
            throw AMQPPeer.PeerError(description: "pika is not installed at \(AMQPPeer.python); run scripts/deps.sh")
        }
        path = TestScratch.path("peer-collect-\(UUID().uuidString)")
        _ = FileManager.default.createFile(atPath: path, contents: nil)
        process = Process()
        process.executableURL = URL(fileURLWithPath: AMQPPeer.python)
        process.arguments = [AMQPPeer.script, "collect", urls, queue, path]
        process.standardOutput = FileHandle.nullDevice
        try process.run()
    }

    /// Consumes `queue` on the test broker (the configuration's first URL).
    convenience init(_ configuration: WorkerConfiguration, queue: String) throws {
        guard let url = TestBroker.url else { throw AMQPPeer.PeerError(description: "no test broker") }
        try self.init(urls: url, queue: queue)
    }

    /// The bodies received so far, in order.
    var received: [[UInt8]] {
        state.withLock { state in
            guard let handle = FileHandle(forReadingAtPath: path) else { return state.bodies }
            defer { try? handle.close() }
            try? handle.seek(toOffset: UInt64(state.offset))
            let data = handle.readDataToEndOfFile()
            state.offset += data.count
            state.partial += data
            // Whole lines only: the peer may be in the middle of writing the last one.
            while let newline = state.partial.firstIndex(of: UInt8(ascii: "\n")) {
                let line = Data(state.partial[..<newline])
                state.partial.removeSubrange(...newline)
                if let body = Data(base64Encoded: line) { state.bodies.append(Array(body)) }
            }
            return state.bodies
        }
    }

    /// The JSON bodies received so far.
    var objects: [[String: Any]] {
        received.compactMap { try? JSONSerialization.jsonObject(with: Data($0)) as? [String: Any] }
    }

    /// Waits until at least `count` messages arrived, or the timeout passes.
    func wait(for count: Int, timeout: Double) async {
        let deadline = Date().addingTimeInterval(timeout)
        while received.count < count, Date() < deadline {
            try? await Task.sleep(for: .milliseconds(100))
        }
    }

    /// Stops the peer (SIGTERM: it finishes the message in hand) and waits for it, 5 s at most.
    func close() {
        guard process.isRunning else { return }
        process.terminate()
        for _ in 0..<100 where process.isRunning { usleep(50_000) }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
    }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        try? FileManager.default.removeItem(atPath: path)
    }
}

extension AMQPPeer {
    /// Whether something accepts TCP connections on 127.0.0.1:`port`.
    static func accepts(port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
    }

    /// A queue's ready count through pika (a passive declare), or nil when the queue does not exist.
    static func depth(url: String, queue: String) throws -> Int? {
        guard isInstalled else {
            throw PeerError(description: "pika is not installed at \(python); run scripts/deps.sh")
        }
        let output = String(decoding: try TestBroker.capture(python, [script, "depth", url, queue]), as: UTF8.self)
        guard let count = Int(output.trimmingCharacters(in: .whitespacesAndNewlines)) else {
            throw PeerError(description: "amqp-peer.py depth printed \(output)")
        }
        return count < 0 ? nil : count
    }

    /// ``depth(url:queue:)`` on the test broker.
    static func depth(_ queue: String) throws -> Int? {
        guard let url = TestBroker.url else { throw PeerError(description: "no test broker") }
        return try depth(url: url, queue: queue)
    }
}

extension PeerCollector {
    /// The ids with an `ok` result.
    var okIDs: Set<String> {
        Set(objects.filter { $0["status"] as? String == "ok" }.compactMap { $0["id"] as? String })
    }

    /// Results beyond one per job id: redeliveries whose result had already been confirmed.
    var duplicates: Int {
        let ids = objects.compactMap { $0["id"] as? String }
        return ids.count - Set(ids).count
    }
}
