import Foundation
import ImageFetchWorker
import Testing

/// The binary as a user runs it: `--version`, `run --help`, `config`, and `publish` with its
/// options and configuration flags in both spellings.
@Suite(.enabled(if: TestBroker.isAvailable, "needs the RabbitMQ that `make test` starts"))
struct CommandLineTests {
    private func run(
        _ arguments: [String], _ environment: [String: String] = [:]
    ) async throws -> (status: Int32?, output: String) {
        let process = try WorkerProcess(arguments: arguments, environment: environment)
        let status = await process.waitForExit(timeout: 60)
        return (status, process.log)
    }

    @Test func versionAndHelp() async throws {
        let version = try await run(["--version"])
        #expect(version.status == 0)
        #expect(version.output == BuildInfo.description + "\n")

        let help = try await run(["run", "--help"])
        #expect(help.status == 0)
        for key in ConfigurationLoader.keys {
            #expect(
                help.output.contains(ConfigurationLoader.flagName(forKey: key) + " <"), "\(key) missing from run --help"
            )
            #expect(help.output.contains(ConfigurationLoader.environmentVariableName(forKey: key)), "\(key)")
        }
    }

    @Test func configPrintsSourcesAndExits78OnABadValue() async throws {
        let good = try await run(
            ["config", "--log-format=json", "--fetch-max-bytes", "1000"],
            ["WORKER_CONCURRENCY": "8", "AMQP_URL": "amqp://app:hunter2@broker/"])
        #expect(good.status == 0, "\(good.output)")
        let rows = good.output.split(separator: "\n").map { $0.split(separator: " ").map(String.init) }
        #expect(rows.contains(["worker.concurrency", "8", "env", "WORKER_CONCURRENCY"]))
        #expect(rows.contains(["fetch.max_bytes", "1000", "flag", "--fetch-max-bytes"]))
        #expect(rows.contains(["log.format", "json", "flag", "--log-format"]))
        #expect(rows.contains(["http.port", "9090", "default"]))
        #expect(!good.output.contains("hunter2"))

        let bad = try await run(["config"], ["WORKER_CONCURRENCY": "lots", "AMQP_URL": "amqp://app:hunter2@broker/"])
        #expect(bad.status == 78)
        #expect(
            bad.output
                == #"configuration error: worker.concurrency: must be an integer between 1 and 4096, got "lots" (from environment variable WORKER_CONCURRENCY)"#
                + "\n")

        // The OTEL_* variables are configuration too: run stops on them with 78, so config does.
        let badTracing = try await run(
            ["config"], ["OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_TRACES_EXPORTER": "zipkin"])
        #expect(badTracing.status == 78, "\(badTracing.output)")
        #expect(badTracing.output.split(separator: "\n").count == 1, "\(badTracing.output)")
        #expect(badTracing.output.contains("OTEL_TRACES_EXPORTER"), "\(badTracing.output)")
    }

    /// A management URL that is no http(s) URL is a mistake in the command, not an API that could
    /// not be read: one `configuration error` line and 78, before the broker is asked anything
    /// (it exited 2, "cannot read the management API", like an unreachable one).
    @Test(arguments: [
        ("ftp://rabbitmq:15672", "must be an http or https URL"), ("rabbitmq:15672", "must be an http or https URL"),
        ("http://", "must be an http or https URL"), ("http://guest:secret@", "must be an http or https URL"),
        ("http://guest:12/secret@rabbitmq:15672", "has an @ after its host"),
    ])
    func depthRefusesAManagementURLThatIsNoURL(url: String, problem: String) async throws {
        // A broker that is not there: the URL must be refused before it is asked.
        let result = try await run(
            ["depth", "--management-url", url], ["AMQP_URL": "amqp://guest:guest@127.0.0.1:9/%2F"])
        #expect(result.status == 78, "\(result.output)")
        #expect(result.output.hasPrefix("configuration error: --management-url \(problem)"), "\(result.output)")
        #expect(result.output.split(separator: "\n").count == 1, "\(result.output)")
        #expect(!result.output.contains("secret"))
    }

    /// A start-up failure that is not the configuration's (the storage root cannot be made) exits
    /// 1 with one `cannot start` line, which names no job's error code: start-up is no job.
    @Test func aStorageRootThatCannotBeMadeStopsTheStart() async throws {
        let file = TestScratch.path("plain-\(UUID().uuidString)")
        #expect(FileManager.default.createFile(atPath: file, contents: Data("x".utf8)))
        defer { try? FileManager.default.removeItem(atPath: file) }
        let refused = try await run(["run"], ["STORAGE_KIND": "file", "STORAGE_PATH": file + "/images"])
        #expect(refused.status == 1, "\(refused.output)")
        let lines = refused.output.split(separator: "\n").filter { $0.contains("cannot start") }
        #expect(lines.count == 1, "\(refused.output)")
        #expect(lines.first?.contains("cannot create the storage root") == true, "\(refused.output)")
        #expect(lines.first?.contains("storage_failed") == false, "\(refused.output)")
    }

    /// An operations port another process holds: one `cannot start` line that names `http.port`
    /// and says why, not NIO's `bind(descriptor:ptr:bytes:)`, and exit 1 like the storage root.
    @Test func anOperationsPortInUseStopsTheStartWithOneClearLine() async throws {
        let holder = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #expect(holder >= 0)
        defer { close(holder) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(holder, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        #expect(bound == 0 && listen(holder, 1) == 0)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(holder, $0, &length) }
        }
        let port = Int(UInt16(bigEndian: address.sin_port))
        let refused = try await run(["run"], ["HTTP_HOST": "127.0.0.1", "HTTP_PORT": "\(port)"])
        #expect(refused.status == 1, "\(refused.output)")
        let lines = refused.output.split(separator: "\n").filter { $0.contains("cannot start") }
        #expect(lines.count == 1, "\(refused.output)")
        #expect(
            lines.first?.hasSuffix("cannot start: http.port: 127.0.0.1:\(port) is in use by another process") == true,
            "\(refused.output)")
    }

    /// An `http.host` that is no address of this machine is a bad value, not a passing trouble:
    /// one configuration line and 78, as for any other. Failed before the fix: exit 1. So is a
    /// name that resolves to nothing: NIO's lookup error was taken for a passing trouble (exit 1,
    /// naming `http.port`).
    @Test(arguments: [
        // 192.0.2.1 is TEST-NET-1 (RFC 5737): never an address of the test machine.
        ("192.0.2.1", "http.host: 192.0.2.1:19099 is not an address of this machine"),
        ("no-such-host.invalid", "http.host: no-such-host.invalid does not resolve to an address of this machine"),
    ])
    func anOperationsHostNotOfThisMachineExits78(host: String, line: String) async throws {
        let refused = try await run(["run"], ["HTTP_HOST": host, "HTTP_PORT": "19099"])
        #expect(refused.status == 78, "\(refused.output)")
        let lines = refused.output.split(separator: "\n").filter { $0.contains("http.") }
        #expect(lines.count == 1, "\(refused.output)")
        #expect(lines.first?.hasSuffix("configuration error: " + line) == true, "\(refused.output)")
    }

    /// The jobs queue exists as a classic queue and the worker is configured for quorum queues: the
    /// broker refuses the declare (PRECONDITION_FAILED). The worker kept reconnecting and
    /// redeclaring for good, not ready, where the docs promise it stops at start-up.
    @Test(.timeLimit(.minutes(2)))
    func aJobsQueueOfAnotherTypeStopsTheStartWith78() async throws {
        var configuration = try TestBroker.configuration("other-type")
        defer { TestBroker.cleanUp(configuration) }
        try BrokerBehaviourTests.declare(configuration, queue: configuration.queue.jobs, arguments: [:])
        configuration.queue.type = .quorum
        let refused = try await run(
            ["run"], TestBroker.environment(configuration, storage: WorkerEndToEndTests.storageFolder()))
        #expect(refused.status == 78, "\(refused.output.suffix(2000))")
        let lines = refused.output.split(separator: "\n").filter { $0.contains("configuration error") }
        #expect(lines.count == 1, "\(refused.output.suffix(2000))")
        #expect(lines.first?.contains("configuration error: queue.declare: ") == true, "\(lines)")
        #expect(lines.first?.contains("inequivalent arg") == true, "\(lines)")
        #expect(lines.first?.contains(configuration.queue.jobs) == true, "\(lines)")
    }

    @Test(.timeLimit(.minutes(2)))
    func publishWithItsOptionsAndFlagsEitherWay() async throws {
        let configuration = try TestBroker.configuration("publish")
        defer { TestBroker.cleanUp(configuration) }
        let url = try #require(TestBroker.url)
        let queues = [
            "--queue-jobs", configuration.queue.jobs, "--queue-results=\(configuration.queue.results)",
            "--queue-dead", configuration.queue.dead,
        ]
        let one = try await run(
            ["publish", "--amqp-url", url, "http://origin.test/a.png"] + queues + [
                "--id", "job-1", "--key", "cats/a.png", "--reply-to", "my.replies", "--correlation-id", "req-7",
                "--header", "tenant=acme", "--header", "x-note=a=b", "--priority", "5",
            ])
        #expect(one.status == 0, "\(one.output)")
        #expect(one.output.contains("1 of 1 jobs confirmed"))
        let two = try await run(
            ["publish", "--amqp-url=\(url)", "http://origin.test/b.png", "http://origin.test/c.png"] + queues)
        #expect(two.status == 0, "\(two.output)")
        #expect(
            try await run(["publish", "--id", "x", "http://a/1", "http://a/2", "--amqp-url", url] + queues).status == 64
        )
        // A --header without '=' is refused by its position; the argument itself, which may hold a
        // credential ("Authorization: Bearer …"), is not echoed.
        let noEquals = try await run(
            ["publish", "--amqp-url", url, "http://a/1", "--header", "Authorization: Bearer s3cr3t"] + queues)
        #expect(noEquals.status == 64, "\(noEquals.output)")
        #expect(noEquals.output.contains("--header 1 has no '='"), "\(noEquals.output)")
        #expect(!noEquals.output.contains("s3cr3t"), "\(noEquals.output)")
        // A --file that is not there is no input (66, as for --jsonl), not a usage mistake (64).
        let missing = try await run(["publish", "--amqp-url", url, "--file", "/nonexistent/urls.txt"] + queues)
        #expect(missing.status == 66, "\(missing.output)")
        #expect(missing.output == "cannot read /nonexistent/urls.txt\n", "\(missing.output)")

        let jobs = try QueueCollector(configuration, queue: configuration.queue.jobs)
        defer { jobs.close() }
        let received = await jobs.wait(for: 3, timeout: 30)
        #expect(received.count == 3)
        let first = try #require(received.first)
        let body = try #require(try JSONSerialization.jsonObject(with: Data(first.body)) as? [String: String])
        #expect(body == ["id": "job-1", "url": "http://origin.test/a.png", "key": "cats/a.png"])
        #expect(first.properties.replyTo == "my.replies")
        #expect(first.properties.correlationID == "req-7")
        #expect(first.properties.priority == 5)
        #expect(first.properties.persistent)
        #expect(first.properties.headers["tenant"] == .string("acme"))
        #expect(first.properties.headers["x-note"] == .string("a=b"))
        let urls = received.dropFirst().compactMap {
            (try? JSONSerialization.jsonObject(with: Data($0.body))) as? [String: String]
        }
        .compactMap { $0["url"] }
        #expect(urls == ["http://origin.test/b.png", "http://origin.test/c.png"])
    }
}
