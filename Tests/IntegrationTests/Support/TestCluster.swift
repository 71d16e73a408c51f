import Foundation
import ImageFetchWorker

/// A three-node RabbitMQ cluster on loopback (scripts/rabbitmq.sh `cluster`), started once for the
/// test process the first time a test asks for it, and destroyed when the process exits.
/// scripts/test.sh names its folder (`IFW_TEST_CLUSTER_DIR`) and destroys it too, in case the test
/// process dies first.
final class TestCluster: Sendable {
    /// The base AMQP port; the nodes listen on `basePort`, `basePort + 1` and `basePort + 2`.
    let basePort: Int
    let directory: String
    let script: String

    /// `amqp://guest:guest@127.0.0.1:PORT/%2F` for each node, node 1 first.
    var urls: [String] { (0..<3).map { "amqp://guest:guest@127.0.0.1:\(basePort + $0)/%2F" } }

    /// The cluster's URLs starting at `node` (1-based), comma-separated: what `amqp.url` takes, so
    /// that a worker connects to `node` first and fails over to the others in order.
    func amqpURL(startingAt node: Int) -> String {
        (0..<3).map { urls[(node - 1 + $0) % 3] }.joined(separator: ",")
    }

    private init(basePort: Int, directory: String, script: String) {
        self.basePort = basePort
        self.directory = directory
        self.script = script
    }

    /// The cluster, started on first use; the error says why it could not start.
    static func shared() throws -> TestCluster { try started.get() }

    private static let started: Result<TestCluster, any Error> = Result {
        guard let script = TestBroker.script else {
            throw TestSetupError("IFW_TEST_RABBITMQ_SCRIPT is not set; run through scripts/test.sh")
        }
        let directory = ProcessInfo.processInfo.environment["IFW_TEST_CLUSTER_DIR"] ?? TestScratch.path("cluster")
        try FileManager.default.createDirectory(
            atPath: directory, withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o755])
        let log = directory + ".start.log"
        // Three consecutive ports (and their distribution ports, +20000) that no other test run holds.
        for basePort in stride(from: 5701, through: 5791, by: 10) {
            let started = Date()
            let status = try TestBroker.run(
                script, ["cluster", "start"],
                environment: [
                    "IFW_RABBIT_DIR": directory, "IFW_AMQP_PORT": "\(basePort)",
                    "IFW_RABBIT_PLUGINS": "", "IFW_RABBIT_TIMEOUT": "180",
                ],
                log: log)
            if status == 98 { continue }
            guard status == 0 else {
                let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
                throw TestSetupError("rabbitmq.sh cluster start exited \(status):\n\(text.suffix(3000))")
            }
            print(
                "test cluster: three nodes on 127.0.0.1:\(basePort)-\(basePort + 2), started in "
                    + String(format: "%.1f s", Date().timeIntervalSince(started)))
            let cluster = TestCluster(basePort: basePort, directory: directory, script: script)
            atexit {
                if case .success(let cluster) = TestCluster.started {
                    _ = try? TestBroker.run(cluster.script, ["cluster", "destroy"], environment: cluster.environment)
                }
            }
            return cluster
        }
        throw TestSetupError("no free ports for a test cluster between 5701 and 5793")
    }

    private var environment: [String: String] {
        [
            "IFW_RABBIT_DIR": directory, "IFW_AMQP_PORT": "\(basePort)", "IFW_RABBIT_PLUGINS": "",
            "IFW_RABBIT_TIMEOUT": "180",
        ]
    }

    /// `rabbitmq.sh node N ARGS`: start, stop, kill9, ctl ... on one node; its exit status.
    @discardableResult
    func node(_ node: Int, _ arguments: [String]) throws -> Int32 {
        try TestBroker.run(
            script, ["node", "\(node)"] + arguments, environment: environment,
            log: directory + ".node\(node).log")
    }

    /// rabbitmqctl on one node; its standard output.
    func ctl(_ node: Int, _ arguments: [String]) throws -> String {
        try TestBroker.output(
            "/usr/bin/env",
            environment.map { "\($0.key)=\($0.value)" }
                + [script, "node", "\(node)", "ctl"] + arguments)
    }

    /// `list_queues name messages_ready messages_unacknowledged` through `node`: queue → (ready, unacked).
    func queues(through node: Int) throws -> [String: (ready: Int, unacked: Int)] {
        var queues: [String: (ready: Int, unacked: Int)] = [:]
        let text = try ctl(
            node, ["-q", "list_queues", "--no-table-headers", "name", "messages_ready", "messages_unacknowledged"])
        for line in text.split(separator: "\n") {
            let fields = line.split(whereSeparator: { $0 == "\t" || $0 == " " })
            guard fields.count == 3, let ready = Int(fields[1]), let unacked = Int(fields[2]) else { continue }
            queues[String(fields[0])] = (ready, unacked)
        }
        return queues
    }
}

struct TestSetupError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
