import Foundation
import ImageFetchWorker
import Testing

/// `redrive` against the real broker: filters, dry run, the copy's headers, and kill -9 mid-way.
@Suite(.enabled(if: TestBroker.isAvailable, "needs the RabbitMQ that `make test` starts"), .serialized)
struct RedriveTests {
    struct DeadLetter {
        var id: String
        var code: String
        var age: Double?
    }

    /// Declares the topology and puts dead letters straight into `queue.dead`, in transactions.
    static func fill(_ configuration: WorkerConfiguration, _ letters: [DeadLetter]) throws {
        #expect(try TestBroker.publish(configuration, bodies: []) == 0)
        let connection = try AMQPConnection()
        try connection.open(url: configuration.amqp.urls[0], tls: .init(), heartbeat: 0, connectionName: "test filler")
        defer { connection.close() }
        try connection.openChannel(1)
        try connection.selectTransactions(channel: 1)
        let now = Date().timeIntervalSince1970
        for (index, letter) in letters.enumerated() {
            var properties = AMQPProperties()
            properties.contentType = "application/json"
            properties.persistent = true
            properties.correlationID = "corr-\(letter.id)"
            properties.timestamp = letter.age.map { UInt64(now - $0) }
            properties.headers = [
                "x-error-code": .string(letter.code), "x-error-message": .string("failed"),
                "x-attempt": .int(4), "tenant": .string("acme"),
            ]
            let body = JobPublisher.jobBody(id: letter.id, url: "http://origin.test/\(letter.id).png")
            try connection.publish(
                channel: 1, OutboundMessage(routingKey: configuration.queue.dead, properties: properties, body: body))
            if index % 500 == 499 { try connection.commit(channel: 1) }
        }
        try connection.commit(channel: 1)
    }

    static func arguments(_ configuration: WorkerConfiguration) -> [String] {
        [
            "--amqp-url", TestBroker.url ?? "", "--queue-jobs", configuration.queue.jobs,
            "--queue-results", configuration.queue.results, "--queue-dead", configuration.queue.dead,
        ]
    }

    /// Ready and unacked messages of a queue, read with rabbitmqctl (not the product's client).
    static func depth(_ queue: String) throws -> Int {
        let row = try TestBroker.listQueues()[queue]
        return (row?.ready ?? 0) + (row?.unacked ?? 0)
    }

    /// The job ids in a queue, each as often as it is there (the messages are consumed).
    static func drainIDs(_ configuration: WorkerConfiguration, queue: String, expected: Int) async throws -> [String] {
        let collector = try QueueCollector(configuration, queue: queue)
        defer { collector.close() }
        let received = await collector.wait(for: expected, timeout: 60)
        try? await Task.sleep(for: .milliseconds(300))  // anything beyond `expected` shows up too
        _ = received
        return collector.objects.compactMap { $0["id"] as? String }
    }

    @Test(.timeLimit(.minutes(3)))
    func filtersDryRunAndTheCopysHeaders() async throws {
        let configuration = try TestBroker.configuration("redrive")
        defer { TestBroker.cleanUp(configuration) }
        try Self.fill(
            configuration,
            [
                DeadLetter(id: "t-old-1", code: "timeout", age: 7200),
                DeadLetter(id: "t-old-2", code: "timeout", age: 7200),
                DeadLetter(id: "t-old-3", code: "timeout", age: 7200),
                DeadLetter(id: "t-new", code: "timeout", age: 60),
                DeadLetter(id: "d-old", code: "dns_failure", age: 7200),
                DeadLetter(id: "t-undated", code: "timeout", age: nil),
            ])
        let base = ["redrive"] + Self.arguments(configuration)

        let dry = try WorkerProcess(arguments: base + ["--dry-run", "--code", "timeout"], environment: [:])
        #expect(await dry.waitForExit(timeout: 60) == 0, "\(dry.log)")
        #expect(dry.log.split(separator: "\n").filter { $0.hasPrefix("would move ") }.count == 5, "\(dry.log)")
        #expect(dry.log.contains("5 of 6 dead letters would move"), "\(dry.log)")
        #expect(try await eventually(timeout: 10) { try Self.depth(configuration.queue.dead) == 6 })
        #expect(try Self.depth(configuration.queue.jobs) == 0)

        let some = try WorkerProcess(
            arguments: base + ["--code=timeout", "--older-than", "1h", "--limit", "2"], environment: [:])
        #expect(await some.waitForExit(timeout: 60) == 0, "\(some.log)")
        #expect(some.log.contains("moved t-old-1 code=timeout attempt=4"), "\(some.log)")
        #expect(some.log.contains("moved t-old-2 code=timeout attempt=4"), "\(some.log)")
        #expect(some.log.contains("2 of 2 dead letters moved"), "\(some.log)")

        let jobs = try QueueCollector(configuration, queue: configuration.queue.jobs)
        let moved = await jobs.wait(for: 2, timeout: 30)
        jobs.close()
        #expect(moved.count == 2)
        for delivery in moved {
            let headers = delivery.properties.headers
            #expect(headers["x-attempt"] == nil && headers["x-error-code"] == nil && headers["x-error-message"] == nil)
            #expect(headers["x-redrive-count"] == .int(1))
            #expect(headers["x-redriven-code"] == .string("timeout"))
            #expect(headers["x-redriven-at"]?.stringValue?.hasSuffix("Z") == true)
            #expect(headers["tenant"] == .string("acme"))
            #expect(delivery.properties.persistent)
            #expect(delivery.properties.correlationID?.hasPrefix("corr-t-old-") == true)
        }
        // The other four stayed, in their order.
        #expect(try await eventually(timeout: 10) { try Self.depth(configuration.queue.dead) == 4 })

        let rest = try WorkerProcess(arguments: base, environment: [:])
        #expect(await rest.waitForExit(timeout: 60) == 0, "\(rest.log)")
        #expect(rest.log.contains("4 of 4 dead letters moved"), "\(rest.log)")
        let order = rest.log.split(separator: "\n").filter { $0.hasPrefix("moved ") }.map {
            $0.split(separator: " ")[1]
        }
        #expect(order == ["t-old-3", "t-new", "d-old", "t-undated"])
        #expect(try Self.depth(configuration.queue.dead) == 0)
    }

    /// A dead letter whose copy cannot be written (a header that leaves the copy's
    /// `x-redrive-count` no room in a frame) stopped the pass: `redrive` exited 1, and every later
    /// run stopped at the same message. It stays in the dead-letter queue, named on stderr, and
    /// the others move.
    @Test(.timeLimit(.minutes(2)))
    func aDeadLetterWhoseCopyCannotBeWrittenStaysAndTheOthersMove() async throws {
        let configuration = try TestBroker.configuration("redrive-kept")
        defer { TestBroker.cleanUp(configuration) }
        let url = try #require(TestBroker.url)
        #expect(try TestBroker.publish(configuration, bodies: []) == 0)  // declare the topology
        let big = AMQPContractTests.longString(String(repeating: "b", count: 130_967))
        try AMQPPeer.publish(
            url: url, queue: configuration.queue.dead, body: #"{"id":"too-big","url":"http://origin.test/a.png"}"#,
            headers: WireTable.encode([("x-big", big)]))
        try Self.fill(
            configuration, [DeadLetter(id: "after-1", code: "timeout"), DeadLetter(id: "after-2", code: "timeout")])

        let redrive = try WorkerProcess(arguments: ["redrive"] + Self.arguments(configuration), environment: [:])
        #expect(await redrive.waitForExit(timeout: 60) == 0, "\(redrive.log)")
        #expect(redrive.log.contains("kept too-big code=- attempt=-: its copy cannot be written"), "\(redrive.log)")
        #expect(redrive.log.contains("2 of 3 dead letters moved"), "\(redrive.log)")
        let moved = try await Self.drainIDs(configuration, queue: configuration.queue.jobs, expected: 2)
        #expect(Set(moved) == ["after-1", "after-2"])
        #expect(try await eventually(timeout: 10) { try Self.depth(configuration.queue.dead) == 1 })
    }

    /// A dead letter with a property that is not UTF-8 was moved as the worker read it, with
    /// replacement characters in place of its bytes, and the original acked: the bytes were lost.
    /// It stays, as it came, and the others move.
    @Test(.timeLimit(.minutes(2)))
    func aDeadLetterThatCannotBeReadAsItCameStays() async throws {
        let configuration = try TestBroker.configuration("redrive-bytes")
        defer { TestBroker.cleanUp(configuration) }
        let url = try #require(TestBroker.url)
        #expect(try TestBroker.publish(configuration, bodies: []) == 0)  // declare the topology
        try AMQPPeer.publish(
            url: url, queue: configuration.queue.dead, body: #"{"id":"binary","url":"http://origin.test/a.png"}"#,
            headers: WireTable.encode([]), properties: ["correlation_id": "hex:fffe01"])
        try Self.fill(configuration, [DeadLetter(id: "after-1", code: "timeout")])

        let redrive = try WorkerProcess(arguments: ["redrive"] + Self.arguments(configuration), environment: [:])
        #expect(await redrive.waitForExit(timeout: 60) == 0, "\(redrive.log)")
        #expect(redrive.log.contains("kept binary"), "\(redrive.log)")
        #expect(redrive.log.contains("1 of 2 dead letters moved"), "\(redrive.log)")
        #expect(try await Self.drainIDs(configuration, queue: configuration.queue.jobs, expected: 1) == ["after-1"])
        var kept: (headers: [UInt8], body: [UInt8], properties: [String: String])?
        _ = try await eventually(timeout: 10) {
            kept = try AMQPPeer.get(url: url, queue: configuration.queue.dead)
            return kept != nil
        }
        #expect(kept?.properties["correlation_id"] == "hex:fffe01")
    }

    /// kill -9 while moving: every message is in exactly one of the two queues afterwards, and a
    /// second run moves the rest.
    @Test(.timeLimit(.minutes(5)))
    func killedMidRedriveEveryMessageIsInExactlyOneQueue() async throws {
        let configuration = try TestBroker.configuration("redrive-kill")
        defer { TestBroker.cleanUp(configuration) }
        let total = 3000
        let ids = (0..<total).map { "job-\($0)" }
        try Self.fill(configuration, ids.map { DeadLetter(id: $0, code: "timeout", age: 10) })
        #expect(try Self.depth(configuration.queue.dead) == total)

        let redrive = try WorkerProcess(
            arguments: ["redrive", "--batch-size", "1"] + Self.arguments(configuration), environment: [:])
        let started = try await eventually(timeout: 60) {
            (try TestBroker.ready(configuration, queue: configuration.queue.jobs) ?? 0) >= 100
        }
        redrive.signal(SIGKILL)
        #expect(started, "\(redrive.log)")
        #expect(await redrive.waitForExit(timeout: 10) == SIGKILL || !redrive.isRunning)
        // The broker requeues the killed connection's unacked message; then the counts settle.
        #expect(
            try await eventually(timeout: 20) {
                let queues = try TestBroker.listQueues()
                return queues[configuration.queue.dead]?.unacked == 0
            })
        let inJobs = try Self.depth(configuration.queue.jobs)
        let inDead = try Self.depth(configuration.queue.dead)
        #expect(inJobs + inDead == total, "jobs \(inJobs) + dead \(inDead)")
        #expect(inJobs > 0 && inDead > 0, "the kill did not land mid-way: jobs \(inJobs), dead \(inDead)")

        // A second run moves the rest; then each id is in the jobs queue exactly once.
        let rest = try WorkerProcess(arguments: ["redrive"] + Self.arguments(configuration), environment: [:])
        #expect(await rest.waitForExit(timeout: 120) == 0, "\(rest.log)")
        #expect(rest.log.contains("\(inDead) of \(inDead) dead letters moved"), "\(rest.log)")
        let found = try await Self.drainIDs(configuration, queue: configuration.queue.jobs, expected: total)
        #expect(found.count == total)
        #expect(found.sorted() == ids.sorted())
        #expect(try Self.depth(configuration.queue.dead) == 0)
    }
}
