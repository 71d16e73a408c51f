import Foundation
import ImageFetchWorker
import Logging
import Synchronization

/// The RabbitMQ node that `make test` (scripts/test.sh) starts for the test run, and helpers to
/// give each test its own queues on it.
enum TestBroker {
    /// `IFW_TEST_AMQP_URL`, exported by scripts/test.sh.
    static var url: String? { ProcessInfo.processInfo.environment["IFW_TEST_AMQP_URL"] }

    /// Whether a broker was provided; the integration suites are disabled without one (run them
    /// through `make test`).
    static var isAvailable: Bool { url != nil }

    /// `IFW_TEST_STRICT=1` (scripts/test.sh, so `make test` and CI): a suite whose broker, cluster or
    /// other tool is missing runs anyway and fails, instead of being skipped.
    static var isStrict: Bool { ProcessInfo.processInfo.environment["IFW_TEST_STRICT"] == "1" }

    /// scripts/rabbitmq.sh, for tests that stop, start or freeze the broker.
    static var script: String? { ProcessInfo.processInfo.environment["IFW_TEST_RABBITMQ_SCRIPT"] }

    /// A configuration whose queue names are unique to one test.
    static func configuration(_ name: String) throws -> WorkerConfiguration {
        var configuration = WorkerConfiguration()
        configuration.amqp.urls = try AMQPURL.parseList(url ?? "amqp://guest:guest@127.0.0.1:5672/%2F")
        let prefix = "test.\(name).\(UUID().uuidString.prefix(8).lowercased())"
        configuration.queue.jobs = "\(prefix).jobs"
        configuration.queue.results = "\(prefix).results"
        configuration.queue.dead = "\(prefix).dead"
        configuration.fetch.allowPrivateNetworks = true
        configuration.storage.fsync = false
        return configuration
    }

    /// Environment variables that give a worker process the same configuration.
    static func environment(_ configuration: WorkerConfiguration, storage: String) -> [String: String] {
        [
            "AMQP_URL": url ?? "",
            "QUEUE_JOBS": configuration.queue.jobs,
            "QUEUE_RESULTS": configuration.queue.results,
            "QUEUE_DEAD": configuration.queue.dead,
            "QUEUE_TYPE": configuration.queue.type.rawValue,
            "FETCH_ALLOW_PRIVATE_NETWORKS": configuration.fetch.allowPrivateNetworks ? "true" : "false",
            "STORAGE_PATH": storage,
            "STORAGE_FSYNC": "false",
            "HTTP_PORT": "0",
            "RETRY_DELAYS": configuration.retry.delays.map { "\($0)s" }.joined(separator: ","),
            "RETRY_MAX_ATTEMPTS": "\(configuration.retry.maxAttempts)",
            "LOG_LEVEL": "info",
        ]
    }

    /// Publishes job bodies with confirms (declaring the topology first) and returns the count confirmed.
    static func publish(
        _ configuration: WorkerConfiguration, bodies: [[UInt8]], replyTo: String? = nil,
        contentType: String? = "application/json"
    ) throws -> Int {
        let publisher = try JobPublisher(configuration: configuration, logger: Logger(label: "test.publisher"))
        defer { publisher.close() }
        return publisher.publish(bodies: bodies, contentType: contentType, replyTo: replyTo)
    }

    /// Ready messages in a queue (passive declare), nil if it does not exist.
    static func ready(_ configuration: WorkerConfiguration, queue: String) throws -> Int? {
        let connection = try AMQPConnection()
        try connection.open(url: configuration.amqp.urls[0], tls: .init(), heartbeat: 0, connectionName: "test probe")
        defer { connection.close() }
        try connection.openChannel(1)
        return try connection.declareQueue(channel: 1, name: queue, passive: true).messages
    }

    /// Deletes a test's queues (best effort): through the management API when the node has it (one
    /// process, milliseconds a queue), else with rabbitmqctl (an Erlang VM start a queue).
    static func cleanUp(_ configuration: WorkerConfiguration) {
        let queues = QueueDepth.queueNames(configuration)
        if let management = ProcessInfo.processInfo.environment["IFW_TEST_MANAGEMENT_URL"] {
            let command =
                "for q in \"$@\"; do curl -fsS -o /dev/null -u guest:guest -X DELETE \"\(management)/api/queues/%2F/$q\" || true; done"
            _ = try? run("/bin/bash", ["-c", command, "cleanup"] + queues)
            return
        }
        guard let script else { return }
        for queue in queues {
            _ = try? run(script, ["ctl", "delete_queue", queue])
        }
    }

    /// A TCP port on 127.0.0.1 for a server that a test starts (or a port where none listens).
    ///
    /// The port is below the kernel's ephemeral range (32768 and up): a port from `bind` to port
    /// 0 is free only until it is closed, and then the local end of any outgoing connection, or
    /// another test's `bind` to port 0, may take it before the server binds it. Below that range
    /// only a listener that names its port can, so a port is handed out once a run, and only one
    /// that binds now. 20000-24999 holds none of the test nodes' fixed ports (5673-5793, and
    /// those plus 10000 and 20000).
    static func freePort() throws -> Int {
        for _ in 0..<500 {
            let port = Int.random(in: 20000..<25000)
            guard handedOut.withLock({ $0.insert(port).inserted }) else { continue }
            if canBind(port) { return port }
        }
        throw POSIXError(.EADDRINUSE)
    }

    private static let handedOut = Mutex<Set<Int>>([])

    /// Whether a listener could bind `port` on 127.0.0.1 now.
    private static func canBind(_ port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        return withLoopback(port: port) { bind(fd, $0, $1) == 0 }
    }

    /// Calls `body` with the address 127.0.0.1:`port` and its length.
    static func withLoopback<T>(port: Int, _ body: (UnsafePointer<sockaddr>, socklen_t) -> T) -> T {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
    }

    /// Binds the TCP socket `fd` to a free port on 127.0.0.1; the port.
    static func bindLoopback(_ fd: Int32) throws -> Int {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer -> Bool in
                bind(fd, pointer, length) == 0 && getsockname(fd, pointer, &length) == 0
            }
        }
        guard bound else { throw POSIXError(.EADDRINUSE) }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// Runs a command and returns its standard output. posix_spawn and waitpid, not Foundation's
    /// Process: its waitUntilExit can miss the exit of a short-lived child on Linux.
    static func capture(_ executable: String, _ arguments: [String]) throws -> [UInt8] {
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("ifw-cmd-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: output) }
        _ = try spawnAndWait(executable, arguments, stdoutPath: output.path)
        return Array((try? Data(contentsOf: output)) ?? Data())
    }

    /// `rabbitmqctl -q list_queues name messages_ready messages_unacknowledged consumers` on the
    /// test node: queue name → (ready, unacked, consumers).
    static func listQueues() throws -> [String: (ready: Int, unacked: Int, consumers: Int)] {
        guard let script else { return [:] }
        let text = try output(
            script,
            [
                "ctl", "-q", "list_queues", "--no-table-headers",
                "name", "messages_ready", "messages_unacknowledged", "consumers",
            ])
        var queues: [String: (ready: Int, unacked: Int, consumers: Int)] = [:]
        for line in text.split(separator: "\n") {
            let fields = line.split(whereSeparator: { $0 == "\t" || $0 == " " })
            guard fields.count == 4, let ready = Int(fields[1]), let unacked = Int(fields[2]),
                let consumers = Int(fields[3])
            else { continue }
            queues[String(fields[0])] = (ready, unacked, consumers)
        }
        return queues
    }

    /// Runs a program and returns its standard output as text.
    static func output(_ executable: String, _ arguments: [String]) throws -> String {
        String(decoding: try capture(executable, arguments), as: UTF8.self)
    }

    /// Runs a command to its end. `environment` is added to this process's; with `log`, standard
    /// output and error are appended to that file, otherwise output is dropped and the errors of a
    /// failed command are printed.
    @discardableResult
    static func run(
        _ executable: String, _ arguments: [String], environment: [String: String] = [:],
        log: String? = nil
    ) throws -> Int32 {
        try spawnAndWait(
            executable, arguments, stdoutPath: log ?? "/dev/null", appendBoth: log != nil,
            environment: environment)
    }

    private static func spawnAndWait(
        _ executable: String, _ arguments: [String], stdoutPath: String,
        appendBoth: Bool = false, environment: [String: String] = [:]
    ) throws -> Int32 {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        let errors = FileManager.default.temporaryDirectory.appendingPathComponent("ifw-cmd-\(UUID().uuidString).err")
        defer { try? FileManager.default.removeItem(at: errors) }
        if appendBoth {
            posix_spawn_file_actions_addopen(&actions, 1, stdoutPath, O_WRONLY | O_CREAT | O_APPEND, 0o644)
            posix_spawn_file_actions_adddup2(&actions, 1, 2)
        } else {
            posix_spawn_file_actions_addopen(&actions, 1, stdoutPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
            posix_spawn_file_actions_addopen(&actions, 2, errors.path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        }
        // Through bash, which first closes every descriptor above 2 that this process would pass
        // on: `rabbitmq.sh start` leaves a daemon (the node) behind, which must not hold the test
        // process's sockets for as long as it runs.
        let closeInherited =
            #"for fd in /proc/$$/fd/*; do fd=${fd##*/}; if ((fd > 2)); then eval "exec $fd>&-"; fi; done 2>/dev/null; exec "$0" "$@""#
        let argv = (["/bin/bash", "-c", closeInherited, executable] + arguments).map { strdup($0) } + [nil]
        let merged = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
        let envp = merged.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { (argv + envp).forEach { free($0) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, "/bin/bash", &actions, nil, argv, envp)
        guard spawned == 0 else { throw POSIXError(POSIXErrorCode(rawValue: spawned) ?? .EINVAL) }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
        // WIFEXITED / WEXITSTATUS, spelled out: the macros are not imported.
        let exit = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
        if exit != 0, !appendBoth, let text = try? String(contentsOf: errors, encoding: .utf8) {
            print("\(executable) \(arguments.joined(separator: " ")) exited \(exit):\n\(text)")
        }
        return exit
    }
}

/// Consumes a queue (results or dead letters) and keeps what arrives, acking each message.
final class QueueCollector: BrokerSessionDelegate, Sendable {
    private let messages = Mutex<[Delivery]>([])
    private let session: BrokerSession

    init(_ configuration: WorkerConfiguration, queue: String) throws {
        var consumer = configuration
        consumer.queue.jobs = queue
        consumer.queue.declare = false
        consumer.amqp.prefetch = 500
        session = BrokerSession(configuration: consumer, logger: Logger(label: "test.collector"), delegate: nil)
        session.setDelegate(self)
        try session.start(retrying: false)
    }

    func session(_ session: BrokerSession, didReceive delivery: Delivery) {
        session.ackOnQueue(delivery)
        messages.withLock { $0.append(delivery) }
    }
    func session(_ session: BrokerSession, didConnect epoch: UInt64) {}
    func session(_ session: BrokerSession, didLoseConnection error: AMQPError) {}
    func session(_ session: BrokerSession, blocked: Bool) {}

    var received: [Delivery] { messages.withLock { $0 } }

    /// The JSON bodies received so far.
    var objects: [[String: Any]] {
        received.compactMap { try? JSONSerialization.jsonObject(with: Data($0.body)) as? [String: Any] }
    }

    /// Waits until at least `count` messages arrived, or the timeout passes; returns what arrived.
    @discardableResult
    func wait(for count: Int, timeout: Double) async -> [Delivery] {
        let deadline = Date().addingTimeInterval(timeout)
        while received.count < count, Date() < deadline {
            try? await Task.sleep(for: .milliseconds(50))
        }
        return received
    }

    func close() { session.close() }
}

/// Polls `condition` until it holds or `timeout` seconds pass.
func eventually(timeout: Double, _ condition: () throws -> Bool) async rethrows -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
        if try condition() { return true }
        try? await Task.sleep(for: .milliseconds(50))
    }
    return try condition()
}
