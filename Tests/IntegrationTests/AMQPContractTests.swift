import Foundation
import ImageFetchWorker
import Testing

/// What the worker promises about the messages themselves, read back through a client that is not
/// the worker's own (scripts/amqp-peer.py, pika): headers survive retries and dead-lettering byte
/// for byte, and a job over `queue.max_job_bytes` is dead-lettered whole without being read.
@Suite(.enabled(if: TestBroker.isAvailable, "needs the RabbitMQ that `make test` starts"), .serialized)
struct AMQPContractTests {
    /// One header of every type RabbitMQ carries, as a producer would write it (wire bytes).
    static let producerHeaders: [(key: String, value: [UInt8])] = [
        ("p-bool", [0x74, 0x01]),
        ("p-i8", [0x62, 0xFE]),
        ("p-u8", [0x42, 0xFA]),
        ("p-i16", [0x73, 0xFE, 0xD4]),
        ("p-u16", [0x75, 0xFD, 0xE8]),
        ("p-i32", [0x49, 0xFF, 0xFE, 0xEE, 0x90]),
        ("p-u32", [0x69, 0xEE, 0x6B, 0x28, 0x00]),
        ("p-i64", [0x6C, 0xFF, 0xFF, 0xFF, 0xFE, 0xD5, 0xFA, 0x0E, 0x00]),
        ("p-float", [0x66, 0x3F, 0xC0, 0x00, 0x00]),
        ("p-double", [0x64, 0xC0, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01]),
        ("p-decimal", [0x44, 0x02, 0x00, 0x00, 0x30, 0x39]),
        ("p-text", [0x53, 0x00, 0x00, 0x00, 0x02, 0xC3, 0xA9]),
        ("p-not-utf8", [0x53, 0x00, 0x00, 0x00, 0x02, 0xFF, 0x00]),
        ("p-bytes", [0x78, 0x00, 0x00, 0x00, 0x03, 0x00, 0xFF, 0x80]),
        ("p-timestamp", [0x54, 0x00, 0x00, 0x00, 0x00, 0x65, 0x53, 0xF1, 0x00]),
        ("p-void", [0x56]),
        // {"t": timestamp, "f": float}
        (
            "p-table",
            [
                0x46, 0x00, 0x00, 0x00, 0x12, 0x01, 0x66, 0x66, 0x40, 0x49, 0x0F, 0xDB,
                0x01, 0x74, 0x54, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01,
            ]
        ),
        // [bytes 0x01, decimal 1.5, u8 7]
        (
            "p-array",
            [
                0x41, 0x00, 0x00, 0x00, 0x0E, 0x78, 0x00, 0x00, 0x00, 0x01, 0x01,
                0x44, 0x01, 0x00, 0x00, 0x00, 0x0F, 0x42, 0x07,
            ]
        ),
    ]

    /// The first message on the dead-letter queue, read through pika, waiting up to `seconds`.
    static func deadLetter(
        _ configuration: WorkerConfiguration, url: String, within seconds: Double = 10
    ) async throws -> (headers: [UInt8], body: [UInt8], properties: [String: String])? {
        var dead: (headers: [UInt8], body: [UInt8], properties: [String: String])?
        _ = try await eventually(timeout: seconds) {
            dead = try AMQPPeer.get(url: url, queue: configuration.queue.dead)
            return dead != nil
        }
        return dead
    }

    /// Publishes `body` with the raw header table `headers` through pika, then three ordinary
    /// jobs, and starts a worker (`environment` added to the test broker's); returns once the
    /// three have their results, or their wait timed out (an issue is recorded then).
    static func runAmongThreeJobs(
        _ configuration: WorkerConfiguration, url: String, origin: TestOrigin, body: String, headers: [UInt8],
        environment: [String: String] = [:], properties: [String: String] = [:]
    ) async throws -> (WorkerProcess, QueueCollector) {
        try AMQPPeer.publish(
            url: url, queue: configuration.queue.jobs, body: body, headers: headers, properties: properties)
        let ids = (0..<3).map { "ordinary\($0)" }
        #expect(
            try TestBroker.publish(
                configuration, bodies: ids.map { JobPublisher.jobBody(id: $0, url: origin.url("/ok.png")) }) == 3)
        let results = try QueueCollector(configuration, queue: configuration.queue.results)
        let worker = try WorkerProcess(
            environment: TestBroker.environment(configuration, storage: WorkerEndToEndTests.storageFolder())
                .merging(environment) { _, new in new })
        #expect(
            await eventually(timeout: 30) { Set(results.objects.compactMap { $0["id"] as? String }) == Set(ids) },
            "log:\n\(worker.log.suffix(2000))")
        return (worker, results)
    }

    static func longString(_ text: String) -> [UInt8] {
        [0x53] + withUnsafeBytes(of: UInt32(text.utf8.count).bigEndian, Array.init) + Array(text.utf8)
    }

    /// The worker decodes the headers and publishes them again twice: the retry copy, then (after
    /// the retry queue's TTL hands the job back) the dead copy. Each producer header must reach the
    /// dead-letter queue with its type and its bytes, and the producer's properties with it.
    @Test(.timeLimit(.minutes(2)))
    func producerHeadersSurviveARetryAndTheDeadLetterCopyByteForByte() async throws {
        let origin = try await TestOrigin.start()
        var configuration = try TestBroker.configuration("headers")
        configuration.retry.delays = [1]
        configuration.retry.maxAttempts = 2
        defer { TestBroker.cleanUp(configuration) }
        _ = try TestBroker.publish(configuration, bodies: [])  // declare the topology
        let url = try #require(TestBroker.url)
        let body = String(
            decoding: JobPublisher.jobBody(id: "headers-1", url: origin.url("/status/503")), as: UTF8.self)
        let properties = [
            "type": "image.fetch", "app_id": "catalogue-sync", "content_encoding": "identity",
            "correlation_id": "c-1", "message_id": "m-1",
        ]
        try AMQPPeer.publish(
            url: url, queue: configuration.queue.jobs, body: body,
            headers: WireTable.encode(Self.producerHeaders), properties: properties)
        let worker = try WorkerProcess(
            environment: TestBroker.environment(configuration, storage: WorkerEndToEndTests.storageFolder()))
        let dead = try await Self.deadLetter(configuration, url: url, within: 40)
        let message = try #require(dead, "log:\n\(worker.log.suffix(2000))")
        #expect(message.body == Array(body.utf8))
        #expect(message.properties == properties.merging(["content_type": "application/json"]) { $1 })
        let headers = try #require(
            WireTable.split(message.headers), "unparsable table \(AMQPPeer.hex(message.headers))")
        for (key, value) in Self.producerHeaders {
            #expect(headers[key].map(AMQPPeer.hex) == AMQPPeer.hex(value), "\(key)")
        }
        #expect(headers["x-error-code"] == Self.longString("http_error"))
        #expect(origin.stats.requests == 2)
        #expect(await worker.stop() == 0)
        try await origin.shutdown()
    }

    /// A job over `queue.max_job_bytes` is never buffered: the broker's dead-lettering moves the
    /// original, body and headers intact, to the dead-letter queue, and the next jobs run.
    @Test(.timeLimit(.minutes(2)))
    func aJobOverTheLimitIsDeadLetteredWholeAndTheWorkerGoesOn() async throws {
        let origin = try await TestOrigin.start()
        var configuration = try TestBroker.configuration("toolarge")
        configuration.queue.maxJobBytes = 4 << 20  // for the collector below, not the worker
        defer { TestBroker.cleanUp(configuration) }
        let url = try #require(TestBroker.url)
        _ = try TestBroker.publish(configuration, bodies: [])  // declare the topology
        let padding = String(repeating: "x", count: 300_000)
        let large = #"{"id":"large","url":"\#(origin.url("/ok.png"))","padding":"\#(padding)"}"#
        let marker = WireTable.encode([("p-marker", Self.longString("kept"))])
        let (worker, results) = try await Self.runAmongThreeJobs(
            configuration, url: url, origin: origin, body: large, headers: marker,
            environment: ["QUEUE_MAX_JOB_BYTES": "65536"])
        defer { results.close() }
        let dead = try await Self.deadLetter(configuration, url: url)
        let message = try #require(dead)
        #expect(message.body == Array(large.utf8))
        let headers = try #require(WireTable.split(message.headers))
        #expect(headers["p-marker"] == Self.longString("kept"))
        // The worker's own dead copy, streamed as the job's frames came, says why.
        #expect(headers["x-error-code"] == Self.longString("job_too_large"))
        #expect(
            headers["x-error-message"].map {
                String(decoding: $0.dropFirst(5), as: UTF8.self).contains("queue.max_job_bytes")
            } == true)
        #expect(worker.log.contains("job_too_large"))
        #expect(worker.isRunning)
        #expect(results.objects.allSatisfy { $0["status"] as? String == "ok" })
        #expect(await worker.stop() == 0)
        try await origin.shutdown()
    }

    /// `levels` one-element arrays around a `B` 1, five bytes a level.
    static func nestedArrays(_ levels: Int) -> [UInt8] {
        var value = [UInt8](repeating: 0, count: 5 * levels + 2)
        var end = value.count - 2
        value[end] = 0x42
        value[end + 1] = 0x01
        for level in 0..<levels {
            end -= 5
            value[end] = 0x41
            let inner = UInt32(2 + 5 * level)
            withUnsafeBytes(of: inner.bigEndian) { value.replaceSubrange((end + 1)..<(end + 5), with: $0) }
        }
        return value
    }

    /// A producer's header nested as deep as a frame allows crashed the worker that read it (its
    /// decoder recursed a level at a time), and then every replica in turn as the broker
    /// redelivered the job. Now the job is rejected unread, so the broker dead-letters it as it
    /// came, and the jobs beside it run.
    @Test(.timeLimit(.minutes(2)))
    func aHeaderNestedAsDeepAsAFrameAllowsIsDeadLetteredAndTheWorkerGoesOn() async throws {
        let origin = try await TestOrigin.start()
        let configuration = try TestBroker.configuration("deepheader")
        defer { TestBroker.cleanUp(configuration) }
        let url = try #require(TestBroker.url)
        _ = try TestBroker.publish(configuration, bodies: [])  // declare the topology
        let deep = WireTable.encode([("p-marker", Self.longString("kept")), ("p-deep", Self.nestedArrays(25_900))])
        let body = String(decoding: JobPublisher.jobBody(id: "deep", url: origin.url("/ok.png")), as: UTF8.self)
        let (worker, results) = try await Self.runAmongThreeJobs(
            configuration, url: url, origin: origin, body: body, headers: deep)
        defer { results.close() }
        #expect(worker.isRunning, "the worker died; log:\n\(worker.log.suffix(2000))")
        let dead = try await Self.deadLetter(configuration, url: url)
        let message = try #require(dead)
        let headers = try #require(WireTable.split(message.headers))
        #expect(headers["p-marker"] == Self.longString("kept"))
        // Rejected as it came (a copy would have cut what lies deeper than 32 levels).
        #expect(headers["p-deep"] == Self.nestedArrays(25_900))
        #expect(headers["x-death"] != nil && headers["x-error-code"] == nil)
        #expect(worker.log.contains("nests deeper than 32 levels"))
        #expect(await worker.stop() == 0)
        try await origin.shutdown()
    }

    /// A job whose properties nearly fill a frame fits, but its retry copy (the same properties
    /// plus the worker's headers) does not. That copy's failure is the job's alone: no reconnect,
    /// no redelivery loop; the original goes to the dead-letter queue as it came, and a result
    /// with `properties_too_large` says why. Published, read and checked through pika.
    @Test(.timeLimit(.minutes(2)))
    func aCopyThatDoesNotFitInAFrameFailsOnlyItsJob() async throws {
        let origin = try await TestOrigin.start()
        let configuration = try TestBroker.configuration("bigprops")
        defer { TestBroker.cleanUp(configuration) }
        let url = try #require(TestBroker.url)
        _ = try TestBroker.publish(configuration, bodies: [])  // declare the topology
        // 131,072 (frame_max) - 20 (frame header and fixed fields) - ~35 (this table and the other
        // properties): about 50 bytes to spare, fewer than any copy adds.
        let big = String(repeating: "b", count: 130_967)
        let body = #"{"id":"bigprops","url":"\#(origin.url("/status/503"))"}"#
        try AMQPPeer.publish(
            url: url, queue: configuration.queue.jobs, body: body,
            headers: WireTable.encode([("x-big", Self.longString(big))]))
        let ids = (0..<3).map { "after\($0)" }
        #expect(
            try TestBroker.publish(
                configuration, bodies: ids.map { JobPublisher.jobBody(id: $0, url: origin.url("/ok.png")) }) == 3)
        let results = try PeerCollector(configuration, queue: configuration.queue.results)
        defer { results.close() }
        let worker = try WorkerProcess(
            environment: TestBroker.environment(configuration, storage: WorkerEndToEndTests.storageFolder()))
        #expect(await eventually(timeout: 30) { results.objects.count >= 4 }, "log:\n\(worker.log.suffix(3000))")
        let failed = try #require(results.objects.first { $0["id"] as? String == "bigprops" })
        #expect(failed["status"] as? String == "failed")
        #expect((failed["error"] as? [String: Any])?["code"] as? String == "properties_too_large")
        #expect(
            Set(results.objects.filter { $0["status"] as? String == "ok" }.compactMap { $0["id"] as? String })
                == Set(ids))
        let dead = try await Self.deadLetter(configuration, url: url)
        let copy = try #require(dead)
        #expect(copy.body == Array(body.utf8))
        let headers = try #require(WireTable.split(copy.headers))
        #expect(headers["x-big"] == Self.longString(big), "the producer's headers reach the dead queue unchanged")
        #expect(headers["x-death"] != nil)
        #expect(!worker.log.contains("lost the broker connection"), "log:\n\(worker.log.suffix(3000))")
        #expect(try AMQPPeer.depth(configuration.queue.jobs) == 0)
        #expect(results.objects.count == 4, "one result a job")
        #expect(await worker.stop() == 0)
        try await origin.shutdown()
    }

    /// A job over `queue.max_job_bytes` whose properties nearly fill a frame: its dead copy (with
    /// the worker's headers) cannot be encoded, so the original is rejected as it came. The copy
    /// was never sent, so the broker never numbered it: the next too-large job's copy must be
    /// confirmed as the broker numbers it, and its original acked (issue 33: it was numbered one
    /// ahead, its confirm settled nothing, and the original stayed unacked until the connection
    /// went, then ran again).
    @Test(.timeLimit(.minutes(2)))
    func aDeadCopyThatCannotBeEncodedLeavesTheNextCopysConfirmInStep() async throws {
        let configuration = try TestBroker.configuration("bigcopy")
        defer { TestBroker.cleanUp(configuration) }
        let url = try #require(TestBroker.url)
        _ = try TestBroker.publish(configuration, bodies: [])  // declare the topology
        let padding = String(repeating: "x", count: 4096)
        let big = String(repeating: "b", count: 130_967)
        try AMQPPeer.publish(
            url: url, queue: configuration.queue.jobs, body: #"{"id":"big","url":"http://a.test/","p":"\#(padding)"}"#,
            headers: WireTable.encode([("x-big", Self.longString(big))]))
        try AMQPPeer.publish(
            url: url, queue: configuration.queue.jobs, body: #"{"id":"next","url":"http://a.test/","p":"\#(padding)"}"#,
            headers: WireTable.encode([]))
        let worker = try WorkerProcess(
            environment: TestBroker.environment(configuration, storage: WorkerEndToEndTests.storageFolder())
                .merging(["QUEUE_MAX_JOB_BYTES": "1024"]) { _, new in new })
        let settled = await eventually(timeout: 20) {
            let queues = (try? TestBroker.listQueues()) ?? [:]
            return queues[configuration.queue.dead]?.ready == 2
                && queues[configuration.queue.jobs].map { $0.ready + $0.unacked } == 0
        }
        let queues = (try? TestBroker.listQueues()) ?? [:]
        #expect(
            settled,
            "dead \(String(describing: queues[configuration.queue.dead])), jobs \(String(describing: queues[configuration.queue.jobs])):\n\(worker.log.suffix(3000))"
        )
        #expect(!worker.log.contains("lost the broker connection"), "log:\n\(worker.log.suffix(3000))")
        #expect(await worker.stop() == 0)
        #expect(try AMQPPeer.depth(configuration.queue.jobs) == 0, "an original came back after the stop")
    }

    /// The high-water mark of a process's resident memory (`VmHWM`), in bytes.
    static func peakResidentBytes(_ pid: Int32) -> Int? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") })
        else { return nil }
        return line.split(separator: " ").dropFirst().first.flatMap { Int($0) }.map { $0 * 1024 }
    }

    /// A job far over `queue.max_job_bytes` costs the worker a frame or two of memory, not its size:
    /// its frames are dropped as they are read, not held until the whole message is in.
    @Test(.timeLimit(.minutes(3)))
    func aHugeJobIsRefusedInAFrameOrTwoOfMemory() async throws {
        let origin = try await TestOrigin.start()
        let configuration = try TestBroker.configuration("hugejob")
        defer { TestBroker.cleanUp(configuration) }
        let url = try #require(TestBroker.url)
        _ = try TestBroker.publish(configuration, bodies: [])  // declare the topology
        let worker = try WorkerProcess(
            environment: TestBroker.environment(configuration, storage: WorkerEndToEndTests.storageFolder()))
        let ids = (0..<3).map { "warm\($0)" }
        #expect(
            try TestBroker.publish(
                configuration, bodies: ids.map { JobPublisher.jobBody(id: $0, url: origin.url("/ok.png")) }) == 3)
        #expect(
            await eventually(timeout: 30) {
                (try? TestBroker.ready(configuration, queue: configuration.queue.jobs)) == 0
            })
        try await Task.sleep(for: .milliseconds(500))
        let before = try #require(Self.peakResidentBytes(worker.process.processIdentifier))

        let size = 64 << 20
        let huge =
            #"{"id":"huge","url":"\#(origin.url("/ok.png"))","padding":""# + String(repeating: "x", count: size)
            + #""}"#
        try AMQPPeer.publish(url: url, queue: configuration.queue.jobs, body: huge, headers: WireTable.encode([]))
        #expect(
            await eventually(timeout: 60) {
                (try? TestBroker.ready(configuration, queue: configuration.queue.dead)) == 1
            },
            "log:\n\(worker.log.suffix(2000))")
        let after = try #require(Self.peakResidentBytes(worker.process.processIdentifier))
        #expect(try AMQPPeer.depth(configuration.queue.jobs) == 0, "the original is settled")
        print("peak RSS before the 64 MiB job: \(before >> 10) KiB, after: \(after >> 10) KiB")
        #expect(after - before < 8 << 20, "peak RSS rose by \((after - before) >> 10) KiB for a job refused unread")
        #expect(worker.isRunning)
        #expect(await worker.stop() == 0)
        try await origin.shutdown()
    }

    static func queueArguments(_ name: String) throws -> String? {
        let listing = try TestBroker.output(
            try #require(TestBroker.script),
            ["ctl", "-q", "list_queues", "--no-table-headers", "name", "arguments"])
        return listing.split(separator: "\n").first { $0.hasPrefix(name + "\t") }.map(String.init)
    }

    /// The retry hop through a quorum queue is at-least-once: the broker holds the arguments.
    @Test(.timeLimit(.minutes(1)))
    func quorumRetryQueuesAreDeclaredAtLeastOnce() async throws {
        var configuration = try TestBroker.configuration("atleastonce")
        configuration.queue.type = .quorum
        configuration.retry.delays = [1]
        defer { TestBroker.cleanUp(configuration) }
        _ = try TestBroker.publish(configuration, bodies: [])  // declare the topology
        let retry = try #require(
            try Self.queueArguments(Topology.retryQueueName(jobs: configuration.queue.jobs, delaySeconds: 1)))
        #expect(retry.contains("at-least-once"), "\(retry)")
        #expect(retry.contains("reject-publish"), "\(retry)")
    }

    /// A deployment upgraded from a release that declared the quorum retry queues without
    /// at-least-once: the redeclare fails with PRECONDITION_FAILED, and the worker uses the queue as
    /// it is (with a warning) rather than refusing to start. Retries keep working.
    @Test(.timeLimit(.minutes(2)))
    func aRetryQueueDeclaredByAnOlderReleaseIsUsedAsItIs() async throws {
        let origin = try await TestOrigin.start()
        var configuration = try TestBroker.configuration("oldretry")
        configuration.queue.type = .quorum
        configuration.retry.delays = [1]
        configuration.retry.maxAttempts = 3
        defer { TestBroker.cleanUp(configuration) }
        let retryName = Topology.retryQueueName(jobs: configuration.queue.jobs, delaySeconds: 1)
        do {
            let connection = try AMQPConnection()
            try connection.open(
                url: configuration.amqp.urls[0], tls: .init(), heartbeat: 0, connectionName: "test setup")
            defer { connection.close() }
            try connection.openChannel(1)
            try connection.declareQueue(
                channel: 1, name: retryName,
                arguments: [
                    "x-queue-type": .string("quorum"), "x-message-ttl": .int(1000),
                    "x-dead-letter-exchange": .string(""),
                    "x-dead-letter-routing-key": .string(configuration.queue.jobs),
                ])
        }
        #expect(
            try TestBroker.publish(
                configuration, bodies: [JobPublisher.jobBody(id: "old-1", url: origin.url("/flaky?key=old&fail=1"))])
                == 1)
        let results = try QueueCollector(configuration, queue: configuration.queue.results)
        defer { results.close() }
        let worker = try WorkerProcess(
            environment: TestBroker.environment(configuration, storage: WorkerEndToEndTests.storageFolder()))
        await results.wait(for: 1, timeout: 40)
        let object = try #require(results.objects.first, "log:\n\(worker.log.suffix(2000))")
        #expect(object["status"] as? String == "ok")
        #expect(object["attempt"] as? Int == 2)
        #expect(worker.log.contains("a delay queue exists with other arguments"))
        #expect(try Self.queueArguments(retryName)?.contains("at-least-once") == false)
        #expect(await worker.stop() == 0)
        try await origin.shutdown()
    }
}
