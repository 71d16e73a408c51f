import Foundation
import ImageFetchWorker
import Testing

/// Real faults against real processes: a killed worker, a restarted or frozen broker, flaky and
/// failing origins, poison messages. scripts/test.sh runs suites one at a time, so stopping the
/// shared broker here disturbs no other test.
@Suite(.enabled(if: TestBroker.isAvailable && TestBroker.script != nil, "needs the RabbitMQ that `make test` starts"),
       .serialized)
struct ReliabilityTests {
    static func broker(_ command: String) throws {
        let status = try TestBroker.run(try #require(TestBroker.script), [command])
        #expect(status == 0, "rabbitmq.sh \(command) exited \(status)")
    }

    func okIDs(_ collector: QueueCollector) -> Set<String> {
        Set(collector.objects.filter { $0["status"] as? String == "ok" }.compactMap { $0["id"] as? String })
    }

    @Test(.timeLimit(.minutes(4)), arguments: [WorkerConfiguration.Queues.QueueType.classic, .quorum])
    func killNineMidRunLosesNothing(queueType: WorkerConfiguration.Queues.QueueType) async throws {
        let origin = try await TestOrigin.start(threads: 2)
        var configuration = try TestBroker.configuration("kill9")
        configuration.queue.type = queueType
        defer { TestBroker.cleanUp(configuration) }
        let ids = (0..<3000).map { "k\($0)" }
        #expect(try TestBroker.publish(configuration, bodies: ids.map { JobPublisher.jobBody(id: $0, url: origin.url("/slow?ms=5&n=\($0)")) }) == 3000)
        let results = try QueueCollector(configuration, queue: configuration.queue.results)
        defer { results.close() }
        let environment = TestBroker.environment(configuration, storage: WorkerEndToEndTests.storageFolder())
            .merging(["WORKER_CONCURRENCY": "32"]) { _, new in new }
        let first = try WorkerProcess(environment: environment)
        #expect(await eventually(timeout: 60) { results.received.count >= 1500 }, "log:\n\(first.log.suffix(2000))")
        first.signal(SIGKILL)
        _ = await first.waitForExit(timeout: 10)
        let second = try WorkerProcess(environment: environment)
        #expect(await eventually(timeout: 120) { okIDs(results).count == 3000 }, "log:\n\(second.log.suffix(2000))")
        #expect(okIDs(results) == Set(ids))
        #expect(await eventually(timeout: 10) { (try? TestBroker.ready(configuration, queue: configuration.queue.jobs)) == 0 })
        #expect(await second.stop() == 0)
        try await origin.shutdown()
    }

    @Test(.timeLimit(.minutes(4)))
    func brokerRestartMidRunIsSurvivedByTheSameProcess() async throws {
        let origin = try await TestOrigin.start(threads: 2)
        let configuration = try TestBroker.configuration("restart")
        defer { TestBroker.cleanUp(configuration) }
        let ids = (0..<1000).map { "r\($0)" }
        #expect(try TestBroker.publish(configuration, bodies: ids.map { JobPublisher.jobBody(id: $0, url: origin.url("/slow?ms=20&n=\($0)")) }) == 1000)
        let worker = try WorkerProcess(environment: TestBroker.environment(configuration, storage: WorkerEndToEndTests.storageFolder())
            .merging(["WORKER_CONCURRENCY": "16", "AMQP_HEARTBEAT": "5"]) { _, new in new })
        // Wait until work is under way, then restart the node (queues durable, messages persistent).
        #expect(await eventually(timeout: 30) { origin.stats.requests >= 100 })
        try Self.broker("stop")
        try await Task.sleep(for: .seconds(2))
        try Self.broker("start")
        let results = try QueueCollector(configuration, queue: configuration.queue.results)
        defer { results.close() }
        #expect(await eventually(timeout: 150) { okIDs(results).count == 1000 }, "log:\n\(worker.log.suffix(3000))")
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
        #expect(try TestBroker.publish(configuration, bodies: ids.map { JobPublisher.jobBody(id: $0, url: origin.url("/slow?ms=50&n=\($0)")) }) == 300)
        let worker = try WorkerProcess(environment: TestBroker.environment(configuration, storage: WorkerEndToEndTests.storageFolder())
            .merging(["WORKER_CONCURRENCY": "8", "AMQP_HEARTBEAT": "2"]) { _, new in new })
        #expect(await eventually(timeout: 30) { origin.stats.requests >= 50 })
        try Self.broker("freeze")
        try await Task.sleep(for: .seconds(8))  // more than 2 × heartbeat
        try Self.broker("thaw")
        let results = try QueueCollector(configuration, queue: configuration.queue.results)
        defer { results.close() }
        #expect(await eventually(timeout: 90) { okIDs(results).count == 300 }, "log:\n\(worker.log.suffix(3000))")
        #expect(worker.log.contains("heartbeat") || worker.log.contains("lost the broker connection"))
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
        let results = try QueueCollector(configuration, queue: configuration.queue.results)
        defer { results.close() }
        let published = Date()
        #expect(try TestBroker.publish(configuration, bodies: [JobPublisher.jobBody(id: "flaky-1", url: origin.url("/flaky?key=a&fail=2"))]) == 1)
        let worker = try WorkerProcess(environment: TestBroker.environment(configuration, storage: WorkerEndToEndTests.storageFolder()))
        let received = await results.wait(for: 1, timeout: 40)
        let elapsed = Date().timeIntervalSince(published)
        let object = try #require(results.objects.first, "log:\n\(worker.log.suffix(2000))")
        #expect(received.count == 1)
        #expect(object["status"] as? String == "ok")
        #expect(object["attempt"] as? Int == 3)
        #expect(origin.stats.flakyHits["a"] == 3)
        // 1 s then 2 s of retry delay; RabbitMQ expires messages lazily, so allow a few seconds more.
        #expect(elapsed >= 3, "retries came too early: \(elapsed) s")
        #expect(elapsed < 15, "retries came too late: \(elapsed) s")
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
        let results = try QueueCollector(configuration, queue: configuration.queue.results)
        let dead = try QueueCollector(configuration, queue: configuration.queue.dead)
        defer { results.close(); dead.close() }
        #expect(try TestBroker.publish(configuration, bodies: [JobPublisher.jobBody(id: "down", url: origin.url("/status/503"))]) == 1)
        let worker = try WorkerProcess(environment: TestBroker.environment(configuration, storage: WorkerEndToEndTests.storageFolder()))
        await results.wait(for: 1, timeout: 40)
        await dead.wait(for: 1, timeout: 10)
        try await Task.sleep(for: .seconds(3))  // nothing more may come
        #expect(results.objects.count == 1)
        let object = try #require(results.objects.first)
        #expect(object["status"] as? String == "failed")
        #expect(object["attempt"] as? Int == 3)
        let error = try #require(object["error"] as? [String: Any])
        #expect(error["code"] as? String == "http_error")
        #expect(error["retryable"] as? Bool == true)
        #expect(dead.received.count == 1)
        let headers = try #require(dead.received.first?.properties.headers)
        #expect(headers["x-error-code"]?.stringValue == "http_error")
        #expect(headers["x-error-message"]?.stringValue?.contains("503") == true)
        #expect(headers["x-attempt"]?.intValue == 3)
        #expect(headers["x-first-seen"]?.stringValue != nil)
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
                bodies.append((0..<Int.random(in: 1...64, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) })
            }
        }
        #expect(try TestBroker.publish(configuration, bodies: bodies, contentType: nil) == 1100)
        let results = try QueueCollector(configuration, queue: configuration.queue.results)
        let dead = try QueueCollector(configuration, queue: configuration.queue.dead)
        defer { results.close(); dead.close() }
        let worker = try WorkerProcess(environment: TestBroker.environment(configuration, storage: WorkerEndToEndTests.storageFolder()))
        await results.wait(for: 1000, timeout: 90)
        await dead.wait(for: 100, timeout: 30)
        #expect(okIDs(results).count == 1000)
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
        #expect(try TestBroker.publish(configuration, bodies: ids.map { JobPublisher.jobBody(id: $0, url: origin.url("/ok.png?n=\($0)")) }) == 300)
        let results = try QueueCollector(configuration, queue: configuration.queue.results)
        defer { results.close() }
        let worker = try WorkerProcess(environment: TestBroker.environment(configuration, storage: WorkerEndToEndTests.storageFolder()))
        await results.wait(for: 300, timeout: 60)
        #expect(okIDs(results) == Set(ids))
        let types = try String(decoding: TestBroker.capture(try #require(TestBroker.script),
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
        #expect(try TestBroker.publish(configuration, bodies: ids.map { JobPublisher.jobBody(id: $0, url: origin.url("/slow?ms=4000&n=\($0)")) }) == 100)
        let worker = try WorkerProcess(environment: TestBroker.environment(configuration, storage: WorkerEndToEndTests.storageFolder())
            .merging(["WORKER_CONCURRENCY": "8", "WORKER_DRAIN_TIMEOUT": "6", "AMQP_HEARTBEAT": "2"]) { _, new in new })
        #expect(await eventually(timeout: 20) { origin.stats.inFlight >= 8 })
        let started = Date()
        worker.signal(SIGTERM)
        try Self.broker("stop")
        let status = await worker.waitForExit(timeout: 6 + 10)
        #expect(status == 0, "log:\n\(worker.log.suffix(3000))")
        #expect(Date().timeIntervalSince(started) < 6 + 10)
        try Self.broker("start")
        // Nothing was acked without a confirmed result: every job is back in the queue or answered.
        let results = try TestBroker.ready(configuration, queue: configuration.queue.results) ?? 0
        let ready = try TestBroker.ready(configuration, queue: configuration.queue.jobs) ?? 0
        #expect(results + ready >= 100, "\(results) results + \(ready) ready")
        #expect(ready > 0)
        try await origin.shutdown()
    }

    @Test(.timeLimit(.minutes(2)))
    func heartbeatsKeepAnIdleWorkerConnected() async throws {
        let origin = try await TestOrigin.start()
        let configuration = try TestBroker.configuration("idle")
        defer { TestBroker.cleanUp(configuration) }
        _ = try TestBroker.publish(configuration, bodies: [])  // declare the topology
        let results = try QueueCollector(configuration, queue: configuration.queue.results)
        defer { results.close() }
        let worker = try WorkerProcess(environment: TestBroker.environment(configuration, storage: WorkerEndToEndTests.storageFolder())
            .merging(["AMQP_HEARTBEAT": "2"]) { _, new in new })
        try await Task.sleep(for: .seconds(16))
        #expect(!worker.log.contains("lost the broker connection"), "log:\n\(worker.log)")
        let connections = try String(decoding: TestBroker.capture(try #require(TestBroker.script),
                                                                  ["ctl", "-q", "list_connections", "--no-table-headers", "client_properties", "timeout"]), as: UTF8.self)
        #expect(connections.contains("image-fetch-worker"))
        #expect(try TestBroker.publish(configuration, bodies: [JobPublisher.jobBody(id: "wake", url: origin.url("/ok.png"))]) == 1)
        await results.wait(for: 1, timeout: 15)
        #expect(results.objects.first?["status"] as? String == "ok")
        #expect(await worker.stop() == 0)
        try await origin.shutdown()
    }
}
