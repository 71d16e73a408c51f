import Foundation
import ImageFetchWorker
import Testing

/// Real faults against real processes: a killed worker, a restarted or frozen broker, flaky and
/// failing origins, poison messages. scripts/test.sh runs suites one at a time, so stopping the
/// shared broker here disturbs no other test.
@Suite(
    .enabled(if: TestBroker.isAvailable && TestBroker.script != nil, "needs the RabbitMQ that `make test` starts"),
    .serialized)
struct ReliabilityTests {
    static func broker(_ command: String) throws {
        let status = try TestBroker.run(try #require(TestBroker.script), [command])
        #expect(status == 0, "rabbitmq.sh \(command) exited \(status)")
    }

    /// Starts the shared broker again if a test left it stopped or frozen (run from a `defer`).
    static func restoreBroker() {
        guard let script = TestBroker.script else { return }
        _ = try? TestBroker.run(script, ["thaw"])
        if (try? TestBroker.run(script, ["status"])) != 0 { _ = try? TestBroker.run(script, ["start"]) }
    }

    @Test(.timeLimit(.minutes(4)), arguments: [WorkerConfiguration.Queues.QueueType.classic, .quorum])
    func killNineMidRunLosesNothing(queueType: WorkerConfiguration.Queues.QueueType) async throws {
        let origin = try await TestOrigin.start(threads: 2)
        var configuration = try TestBroker.configuration("kill9")
        configuration.queue.type = queueType
        defer { TestBroker.cleanUp(configuration) }
        let ids = (0..<3000).map { "k\($0)" }
        #expect(
            try TestBroker.publish(
                configuration, bodies: ids.map { JobPublisher.jobBody(id: $0, url: origin.url("/slow?ms=5&n=\($0)")) })
                == 3000)
        let results = try PeerCollector(configuration, queue: configuration.queue.results)
        defer { results.close() }
        let prefetch = 64
        let environment = TestBroker.environment(configuration, storage: WorkerEndToEndTests.storageFolder())
            .merging(["WORKER_CONCURRENCY": "32", "AMQP_PREFETCH": "\(prefetch)"]) { _, new in new }
        let first = try WorkerProcess(environment: environment)
        #expect(await eventually(timeout: 60) { results.received.count >= 1500 }, "log:\n\(first.log.suffix(2000))")
        first.signal(SIGKILL)
        _ = await first.waitForExit(timeout: 10)
        let second = try WorkerProcess(environment: environment)
        #expect(await eventually(timeout: 120) { results.okIDs.count == 3000 }, "log:\n\(second.log.suffix(2000))")
        #expect(results.okIDs == Set(ids))
        // A kill -9 hands back at most the dead connection's unacked window; a duplicate is a job of
        // that window whose result was confirmed before its ack was sent.
        let duplicates = results.duplicates
        print(
            "kill -9 (\(queueType)): \(ids.count) jobs, \(results.received.count) results, \(duplicates) duplicates (prefetch \(prefetch))"
        )
        #expect(duplicates <= prefetch, "\(duplicates) duplicates: more than one prefetch window")
        #expect(results.objects.allSatisfy { $0["status"] as? String == "ok" })
        #expect(await eventually(timeout: 10) { (try? AMQPPeer.depth(configuration.queue.jobs)) == 0 })
        #expect(await second.stop() == 0)
        try await origin.shutdown()
    }

    @Test(.timeLimit(.minutes(4)))
    func brokerRestartMidRunIsSurvivedByTheSameProcess() async throws {
        let origin = try await TestOrigin.start(threads: 2)
        let configuration = try TestBroker.configuration("restart")
        defer { TestBroker.cleanUp(configuration) }
        let ids = (0..<1000).map { "r\($0)" }
        #expect(
            try TestBroker.publish(
                configuration, bodies: ids.map { JobPublisher.jobBody(id: $0, url: origin.url("/slow?ms=20&n=\($0)")) })
                == 1000)
        let worker = try WorkerProcess(
            environment: TestBroker.environment(configuration, storage: WorkerEndToEndTests.storageFolder())
                .merging(["WORKER_CONCURRENCY": "16", "AMQP_HEARTBEAT": "5"]) { _, new in new })
        // Wait until work is under way, then restart the node (queues durable, messages persistent).
        #expect(await eventually(timeout: 30) { origin.stats.requests >= 100 })
        defer { Self.restoreBroker() }
        try Self.broker("stop")
        try await Task.sleep(for: .seconds(2))
        try Self.broker("start")
        let results = try PeerCollector(configuration, queue: configuration.queue.results)
        defer { results.close() }
        #expect(await eventually(timeout: 150) { results.okIDs.count == 1000 }, "log:\n\(worker.log.suffix(3000))")
        #expect(results.okIDs == Set(ids))
        // The lost channel's unacked window (prefetch 32 = 2 × concurrency) at most comes twice.
        #expect(results.duplicates <= 32, "\(results.duplicates) duplicates")
        #expect(worker.isRunning)
        #expect(worker.log.contains("lost the broker connection"))
        #expect(worker.log.contains("connected to the broker"))
        #expect(await worker.stop() == 0)
        try await origin.shutdown()
    }

    @Test(.timeLimit(.minutes(3)))
    func frozenBrokerIsDetectedByHeartbeats() async throws {
        let origin = try await TestOrigin.start()
        let configuration = try TestBroker.configuration("frozen")
        defer { TestBroker.cleanUp(configuration) }
        let ids = (0..<300).map { "f\($0)" }
        #expect(
            try TestBroker.publish(
                configuration, bodies: ids.map { JobPublisher.jobBody(id: $0, url: origin.url("/slow?ms=50&n=\($0)")) })
                == 300)
        let worker = try WorkerProcess(
            environment: TestBroker.environment(configuration, storage: WorkerEndToEndTests.storageFolder())
                .merging(["WORKER_CONCURRENCY": "8", "AMQP_HEARTBEAT": "2"]) { _, new in new })
        #expect(await eventually(timeout: 30) { origin.stats.requests >= 50 })
        defer { Self.restoreBroker() }
        try Self.broker("freeze")
        // Two missed heartbeats (2 s each) and the worker gives the connection up.
        #expect(
            await eventually(timeout: 30) { worker.log.contains("lost the broker connection") },
            "the frozen broker went unnoticed:\n\(worker.log.suffix(2000))")
        try Self.broker("thaw")
        let results = try PeerCollector(configuration, queue: configuration.queue.results)
        defer { results.close() }
        #expect(await eventually(timeout: 90) { results.okIDs.count == 300 }, "log:\n\(worker.log.suffix(3000))")
        #expect(results.okIDs == Set(ids))
        #expect(await worker.stop() == 0)
        try await origin.shutdown()
    }

    @Test(.timeLimit(.minutes(2)))
    func flakyOriginSucceedsOnTheThirdAttemptAfterTheDelays() async throws {
        let origin = try await TestOrigin.start()
        var configuration = try TestBroker.configuration("flaky")
        configuration.retry.delays = [1, 2]
        configuration.retry.maxAttempts = 4
        defer { TestBroker.cleanUp(configuration) }
        _ = try TestBroker.publish(configuration, bodies: [])  // declare the topology
        let results = try PeerCollector(configuration, queue: configuration.queue.results)
        defer { results.close() }
        #expect(
            try TestBroker.publish(
                configuration, bodies: [JobPublisher.jobBody(id: "flaky-1", url: origin.url("/flaky?key=a&fail=2"))])
                == 1)
        let worker = try WorkerProcess(
            environment: TestBroker.environment(configuration, storage: WorkerEndToEndTests.storageFolder()))
        await results.wait(for: 1, timeout: 40)
        let object = try #require(results.objects.first, "log:\n\(worker.log.suffix(2000))")
        #expect(object["status"] as? String == "ok")
        #expect(object["attempt"] as? Int == 3)
        #expect(origin.stats.flakyHits["a"] == 3)
        // The delays as the origin saw them, between its own request timestamps: each attempt comes
        // no earlier than its delay after the answer to the one before (1 s, then 2 s), and not
        // much later (RabbitMQ expires the head of a TTL queue within a few hundred ms).
        let times = origin.stats.flakyTimes["a"] ?? []
        try #require(times.count == 3, "\(times)")
        let gaps = [times[1] - times[0], times[2] - times[1]]
        #expect(gaps[0] >= 1 && gaps[0] < 4, "first retry after \(gaps[0]) s, want 1 s")
        #expect(gaps[1] >= 2 && gaps[1] < 5, "second retry after \(gaps[1]) s, want 2 s")
        #expect(await worker.stop() == 0)
        try await origin.shutdown()
    }

    @Test(.timeLimit(.minutes(2)))
    func permanentFailureEndsInOneResultAndADeadLetterCopy() async throws {
        let origin = try await TestOrigin.start()
        var configuration = try TestBroker.configuration("permanent")
        configuration.retry.delays = [1]
        configuration.retry.maxAttempts = 3
        defer { TestBroker.cleanUp(configuration) }
        _ = try TestBroker.publish(configuration, bodies: [])  // declare the topology
        // The dead letter is read through the management API, not the worker's own AMQP client and
        // header decoder, so a bug that both sides share cannot hide.
        let management = try #require(ManagementClient.test, "needs IFW_TEST_MANAGEMENT_URL (scripts/test.sh)")
        let results = try PeerCollector(configuration, queue: configuration.queue.results)
        defer { results.close() }
        #expect(
            try TestBroker.publish(
                configuration, bodies: [JobPublisher.jobBody(id: "down", url: origin.url("/status/503"))]) == 1)
        let worker = try WorkerProcess(
            environment: TestBroker.environment(configuration, storage: WorkerEndToEndTests.storageFolder()))
        await results.wait(for: 1, timeout: 40)
        // Settled: no job left ready, unacked or waiting in a retry queue, so nothing more can come.
        #expect(
            await eventually(timeout: 20) {
                let queues = (try? TestBroker.listQueues()) ?? [:]
                return !queues.isEmpty
                    && queues.filter { $0.key.hasPrefix(configuration.queue.jobs) }
                        .allSatisfy { $0.value.ready + $0.value.unacked == 0 }
            })
        let dead = try await management.take(configuration.queue.dead, atLeast: 1, timeout: 10)
        #expect(results.objects.count == 1)
        let object = try #require(results.objects.first)
        #expect(object["status"] as? String == "failed")
        #expect(object["attempt"] as? Int == 3)
        let error = try #require(object["error"] as? [String: Any])
        #expect(error["code"] as? String == "http_error")
        #expect(error["retryable"] as? Bool == true)
        #expect(dead.count == 1)
        #expect(try await management.take(configuration.queue.dead, count: 10).isEmpty, "more than one dead letter")
        let copy = try #require(dead.first)
        #expect(copy.headers["x-error-code"] as? String == "http_error")
        #expect((copy.headers["x-error-message"] as? String)?.contains("503") == true)
        #expect(copy.headers["x-attempt"] as? Int == 3)
        let rfc3339 = ISO8601DateFormatter()
        rfc3339.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        #expect(
            (copy.headers["x-first-seen"] as? String).map { rfc3339.date(from: $0) != nil } == true,
            "x-first-seen: \(String(describing: copy.headers["x-first-seen"]))")
        // The dead copy is the job as the producer sent it.
        #expect(copy.object?["id"] as? String == "down")
        #expect(copy.object?["url"] as? String == origin.url("/status/503"))
        #expect(await worker.stop() == 0)
        try await origin.shutdown()
    }

    @Test(.timeLimit(.minutes(3)))
    func poisonIsDeadLetteredAmongGoodJobs() async throws {
        let origin = try await TestOrigin.start(threads: 2)
        let configuration = try TestBroker.configuration("poison")
        defer { TestBroker.cleanUp(configuration) }
        var bodies: [[UInt8]] = []
        var generator = SystemRandomNumberGenerator()
        for index in 0..<1000 {
            bodies.append(JobPublisher.jobBody(id: "p\(index)", url: origin.url("/ok.png?n=\(index)")))
            if index % 10 == 0 {
                bodies.append(
                    (0..<Int.random(in: 1...64, using: &generator)).map { _ in
                        UInt8.random(in: 0...255, using: &generator)
                    })
            }
        }
        #expect(try TestBroker.publish(configuration, bodies: bodies, contentType: nil) == 1100)
        let results = try PeerCollector(configuration, queue: configuration.queue.results)
        let dead = try QueueCollector(configuration, queue: configuration.queue.dead)
        defer {
            results.close()
            dead.close()
        }
        let worker = try WorkerProcess(
            environment: TestBroker.environment(configuration, storage: WorkerEndToEndTests.storageFolder()))
        await results.wait(for: 1000, timeout: 90)
        await dead.wait(for: 100, timeout: 30)
        #expect(results.okIDs.count == 1000)
        #expect(dead.received.count == 100)
        #expect(dead.received.allSatisfy { $0.properties.headers["x-error-code"]?.stringValue == "invalid_job" })
        #expect(worker.isRunning)
        #expect(await worker.stop() == 0)
        try await origin.shutdown()
    }

    @Test(.timeLimit(.minutes(2)))
    func quorumQueuesRunEndToEnd() async throws {
        let origin = try await TestOrigin.start()
        var configuration = try TestBroker.configuration("quorum")
        configuration.queue.type = .quorum
        defer { TestBroker.cleanUp(configuration) }
        let ids = (0..<300).map { "q\($0)" }
        #expect(
            try TestBroker.publish(
                configuration, bodies: ids.map { JobPublisher.jobBody(id: $0, url: origin.url("/ok.png?n=\($0)")) })
                == 300)
        let results = try PeerCollector(configuration, queue: configuration.queue.results)
        defer { results.close() }
        let worker = try WorkerProcess(
            environment: TestBroker.environment(configuration, storage: WorkerEndToEndTests.storageFolder()))
        await results.wait(for: 300, timeout: 60)
        #expect(results.okIDs == Set(ids))
        let types = try String(
            decoding: TestBroker.capture(
                try #require(TestBroker.script),
                ["ctl", "-q", "list_queues", "--no-table-headers", "name", "type"]), as: UTF8.self)
        #expect(types.contains("\(configuration.queue.jobs)\tquorum"))
        #expect(types.contains("\(configuration.queue.dead)\tquorum"))
        #expect(types.contains("\(configuration.queue.jobs).retry.5s\tquorum"))
        #expect(await worker.stop() == 0)
        try await origin.shutdown()
    }

    @Test(.timeLimit(.minutes(3)))
    func brokerLostDuringADrainStillExitsInTimeAndLosesNothing() async throws {
        let origin = try await TestOrigin.start(threads: 2)
        let configuration = try TestBroker.configuration("drainfault")
        defer { TestBroker.cleanUp(configuration) }
        let ids = (0..<100).map { "df\($0)" }
        // The fetches (30 s) outlast the drain deadline (6 s) and the exit bound (16 s): a worker
        // that ignored the deadline would fail the bound.
        #expect(
            try TestBroker.publish(
                configuration,
                bodies: ids.map { JobPublisher.jobBody(id: $0, url: origin.url("/slow?ms=30000&n=\($0)")) }) == 100)
        let worker = try WorkerProcess(
            environment: TestBroker.environment(configuration, storage: WorkerEndToEndTests.storageFolder())
                .merging([
                    "WORKER_CONCURRENCY": "8", "WORKER_DRAIN_TIMEOUT": "6", "AMQP_HEARTBEAT": "2",
                    "FETCH_TIMEOUT": "300", "FETCH_LOW_SPEED_LIMIT": "0",
                ]) { _, new in new })
        #expect(await eventually(timeout: 20) { origin.stats.inFlight >= 8 })
        let started = Date()
        defer { Self.restoreBroker() }
        worker.signal(SIGTERM)
        // `rabbitmq.sh stop` returns only once the Erlang VM is gone (8–18 s), long after it closed
        // the worker's connection: the bound is on the worker's exit, so time that, not the stop.
        try Self.broker("stop")
        let status = await worker.waitForExit(timeout: 6 + 10)
        #expect(status == 0, "log:\n\(worker.log.suffix(3000))")
        #expect(worker.log.contains("lost the broker connection"), "log:\n\(worker.log.suffix(3000))")
        let exited = try #require(worker.exitTime)
        #expect(exited.timeIntervalSince(started) < 6 + 10)
        try Self.broker("start")
        // No fetch finished, so nothing was answered and every job is back in the queue, ready.
        let results = try AMQPPeer.depth(configuration.queue.results) ?? 0
        let ready = try AMQPPeer.depth(configuration.queue.jobs) ?? 0
        #expect(results == 0, "\(results) results for fetches that never finished")
        #expect(ready == 100, "\(ready) of 100 jobs back in the queue")
        try await origin.shutdown()
    }

    @Test(.timeLimit(.minutes(2)))
    func heartbeatsKeepAnIdleWorkerConnected() async throws {
        let origin = try await TestOrigin.start()
        let configuration = try TestBroker.configuration("idle")
        defer { TestBroker.cleanUp(configuration) }
        _ = try TestBroker.publish(configuration, bodies: [])  // declare the topology
        let results = try PeerCollector(configuration, queue: configuration.queue.results)
        defer { results.close() }
        let worker = try WorkerProcess(
            environment: TestBroker.environment(configuration, storage: WorkerEndToEndTests.storageFolder())
                .merging(["AMQP_HEARTBEAT": "2"]) { _, new in new })
        try await Task.sleep(for: .seconds(16))
        #expect(!worker.log.contains("lost the broker connection"), "log:\n\(worker.log)")
        // The worker's own connection (named with its pid), not the test collector's, which is also
        // an "image-fetch-worker" connection: still there, with the 2 s heartbeat it asked for.
        let management = try #require(ManagementClient.test, "needs IFW_TEST_MANAGEMENT_URL (scripts/test.sh)")
        let connections = try await management.connections()
        let own = connections.filter { $0.name.hasSuffix(" pid \(worker.process.processIdentifier)") }
        #expect(own.count == 1, "\(connections)")
        #expect(own.first?.heartbeat == 2)
        #expect(
            try TestBroker.publish(
                configuration, bodies: [JobPublisher.jobBody(id: "wake", url: origin.url("/ok.png"))]) == 1)
        await results.wait(for: 1, timeout: 15)
        #expect(results.objects.first?["status"] as? String == "ok")
        #expect(await worker.stop() == 0)
        try await origin.shutdown()
    }

    /// Classic queues have no broker delivery limit: the worker counts redeliveries per job id and
    /// dead-letters past `queue.delivery_limit`. The worker's connection is closed under it three
    /// times while it fetches, so the same process sees the job redelivered three times (limit 2).
    @Test(.timeLimit(.minutes(3)))
    func aClassicQueueJobRedeliveredPastTheLimitIsDeadLettered() async throws {
        let management = try #require(ManagementClient.test, "needs IFW_TEST_MANAGEMENT_URL (scripts/test.sh)")
        let origin = try await TestOrigin.start()
        var configuration = try TestBroker.configuration("dlimit")
        configuration.queue.type = .classic
        defer { TestBroker.cleanUp(configuration) }
        #expect(
            try TestBroker.publish(
                configuration, bodies: [JobPublisher.jobBody(id: "crashy", url: origin.url("/slow?ms=120000"))]) == 1)
        let (worker, endpoint) = try OperationsTests.startWorker(
            configuration,
            extra: [
                "QUEUE_DELIVERY_LIMIT": "2", "WORKER_CONCURRENCY": "8", "WORKER_DRAIN_TIMEOUT": "1",
                "FETCH_TIMEOUT": "300", "FETCH_LOW_SPEED_LIMIT": "0",
            ])
        let pid = worker.process.processIdentifier
        // Deliveries 1, 2 and 3 (the first and two redeliveries) each reach the fetch: the first
        // starts it, and a redelivery shares it while the lost delivery's fetch still runs (issue
        // 35, shared fetches). The 4th is the third redelivery, past the limit, and goes to the
        // dead-letter queue without a fetch.
        @Sendable func fetchesReached() async -> Int {
            let shared = await endpoint.metrics().values["image_fetch_fetches_shared_total"] ?? 0
            return origin.stats.requests + Int(shared)
        }
        for fetches in 1...3 {
            #expect(
                await eventuallyAsync(timeout: 40) { await fetchesReached() >= fetches },
                "fetch \(fetches) never started:\n\(worker.log.suffix(2000))")
            // The management API lists a connection a few seconds after it opens.
            #expect(
                await eventuallyAsync(timeout: 20) {
                    (try? await management.closeConnections(nameEndingWith: " pid \(pid)")) ?? 0 > 0
                })
        }
        let dead = try await management.take(configuration.queue.dead, atLeast: 1, timeout: 40)
        let copy = try #require(dead.first, "nothing dead-lettered:\n\(worker.log.suffix(3000))")
        #expect(copy.headers["x-error-code"] as? String == "delivery_limit")
        #expect(copy.object?["id"] as? String == "crashy")
        #expect(await fetchesReached() == 3)
        #expect(worker.log.contains("redelivered too often"))
        #expect(await eventually(timeout: 10) { (try? AMQPPeer.depth(configuration.queue.jobs)) == 0 })
        #expect(worker.isRunning)
        #expect(await worker.stop() == 0)
        try await origin.shutdown()
    }
}
