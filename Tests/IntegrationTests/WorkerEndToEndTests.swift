import Crypto
import Foundation
import ImageFetchWorker
import Testing

/// The worker process end to end, against the real RabbitMQ of `make test` and a real local origin.
@Suite(.enabled(if: TestBroker.isAvailable, "needs the RabbitMQ that `make test` starts"), .serialized)
struct WorkerEndToEndTests {
    static func storageFolder() -> String {
        let path = TestScratch.path("images-\(UUID().uuidString)")
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    @Test(.timeLimit(.minutes(3)))
    func fiveHundredJobsGiveFiveHundredStoredResults() async throws {
        let origin = try await TestOrigin.start()
        let configuration = try TestBroker.configuration("e2e")
        defer { TestBroker.cleanUp(configuration) }
        let storage = Self.storageFolder()
        let ids = (0..<500).map { "job-\($0)" }
        let bodies = ids.enumerated().map { index, id in
            JobPublisher.jobBody(id: id, url: origin.url("/ok.png?n=\(index)"))
        }
        #expect(try TestBroker.publish(configuration, bodies: bodies) == 500)

        let results = try QueueCollector(configuration, queue: configuration.queue.results)
        defer { results.close() }
        let worker = try WorkerProcess(
            environment: TestBroker.environment(configuration, storage: storage)
                .merging(["WORKER_CONCURRENCY": "16"]) { _, new in new })
        await results.wait(for: 500, timeout: 90)

        let objects = results.objects
        #expect(objects.count == 500, "worker log:\n\(worker.log.suffix(2000))")
        #expect(Set(objects.compactMap { $0["id"] as? String }) == Set(ids))
        let expectedDigest = SHA256.hash(data: TestOrigin.okBody).map { String(format: "%02x", $0) }.joined()
        for object in objects {
            #expect(object["status"] as? String == "ok", "\(object)")
            #expect(object["format"] as? String == "png")
            #expect(object["width"] as? Int == 64)
            #expect(object["height"] as? Int == 32)
            #expect(object["attempt"] as? Int == 1)
            #expect(object["http_status"] as? Int == 200)
            let location = try #require(object["location"] as? String)
            #expect(location.hasPrefix("file://"))
            let path = String(location.dropFirst("file://".count))
            let stored = try #require(FileManager.default.contents(atPath: path))
            let digest = SHA256.hash(data: stored).map { String(format: "%02x", $0) }.joined()
            #expect(digest == object["sha256"] as? String)
            #expect(digest == expectedDigest)
            #expect(path.hasSuffix("/\(digest.prefix(2))/\(digest).png"))
        }
        #expect(
            results.received.allSatisfy { $0.properties.persistent && $0.properties.contentType == "application/json" })
        #expect(try TestBroker.ready(configuration, queue: configuration.queue.jobs) == 0)
        #expect(await worker.stop() == 0)
        try await origin.shutdown()
    }

    @Test(.timeLimit(.minutes(2)))
    func badJobsAreDeadLetteredOrFailedAndTheWorkerKeepsGoing() async throws {
        let origin = try await TestOrigin.start()
        let configuration = try TestBroker.configuration("bad")
        defer { TestBroker.cleanUp(configuration) }
        let bodies: [[UInt8]] = [
            Array("this is not json".utf8),
            Array(#"{"id":"no-url"}"#.utf8),
            JobPublisher.jobBody(id: "passwd", url: "file:///etc/passwd"),
            JobPublisher.jobBody(id: "html", url: origin.url("/html")),
            JobPublisher.jobBody(id: "missing", url: origin.url("/status/404")),
            JobPublisher.jobBody(id: "good", url: origin.url("/ok.png")),
        ]
        #expect(try TestBroker.publish(configuration, bodies: bodies) == bodies.count)
        let results = try QueueCollector(configuration, queue: configuration.queue.results)
        let dead = try QueueCollector(configuration, queue: configuration.queue.dead)
        defer {
            results.close()
            dead.close()
        }
        let worker = try WorkerProcess(
            environment: TestBroker.environment(configuration, storage: Self.storageFolder()))

        await results.wait(for: 4, timeout: 30)
        await dead.wait(for: 2, timeout: 30)
        var byID: [String: [String: Any]] = [:]
        for object in results.objects { byID[object["id"] as? String ?? ""] = object }
        func code(_ id: String) -> String? { (byID[id]?["error"] as? [String: Any])?["code"] as? String }
        #expect(code("passwd") == "unsupported_scheme")
        #expect(code("html") == "not_an_image")
        #expect(code("missing") == "http_error")
        #expect(byID["missing"]?["http_status"] as? Int == 404)
        #expect(byID["good"]?["status"] as? String == "ok")
        #expect(dead.received.count == 2)
        for message in dead.received {
            #expect(message.properties.headers["x-error-code"]?.stringValue == "invalid_job")
            #expect(message.properties.headers["x-error-message"]?.stringValue?.isEmpty == false)
        }
        #expect(
            Set(dead.received.map { String(decoding: $0.body, as: UTF8.self) })
                == ["this is not json", #"{"id":"no-url"}"#])
        #expect(worker.isRunning)
        // Still consuming after the bad ones.
        #expect(
            try TestBroker.publish(
                configuration, bodies: [JobPublisher.jobBody(id: "after", url: origin.url("/ok.png"))]) == 1)
        await results.wait(for: 5, timeout: 30)
        #expect(results.objects.contains { $0["id"] as? String == "after" && $0["status"] as? String == "ok" })
        #expect(await worker.stop() == 0)
        try await origin.shutdown()
    }

    @Test(.timeLimit(.minutes(2)))
    func replyToAndCorrelationIDAreHonoured() async throws {
        let origin = try await TestOrigin.start()
        let configuration = try TestBroker.configuration("reply")
        defer { TestBroker.cleanUp(configuration) }
        let replies = "\(configuration.queue.jobs).replies"
        // The reply queue belongs to the producer; declare it through a throwaway topology.
        var replyConfiguration = configuration
        replyConfiguration.queue.results = replies
        _ = try TestBroker.publish(replyConfiguration, bodies: [])
        #expect(
            try TestBroker.publish(
                configuration, bodies: [JobPublisher.jobBody(id: "r1", url: origin.url("/ok.png"))],
                replyTo: replies) == 1)
        let collector = try QueueCollector(configuration, queue: replies)
        defer { collector.close() }
        let worker = try WorkerProcess(
            environment: TestBroker.environment(configuration, storage: Self.storageFolder()))
        let received = await collector.wait(for: 1, timeout: 30)
        #expect(received.first?.properties.correlationID == "r1")
        #expect(try TestBroker.ready(configuration, queue: configuration.queue.results) == 0)
        #expect(await worker.stop() == 0)
        _ = try? TestBroker.run(TestBroker.script ?? "/bin/true", ["ctl", "delete_queue", replies])
        try await origin.shutdown()
    }

    @Test(.timeLimit(.minutes(2)))
    func concurrencyBoundsRequestsAtTheOrigin() async throws {
        let origin = try await TestOrigin.start(threads: 2)
        let configuration = try TestBroker.configuration("bound")
        defer { TestBroker.cleanUp(configuration) }
        let bodies = (0..<120).map { JobPublisher.jobBody(id: "b\($0)", url: origin.url("/slow?ms=150&n=\($0)")) }
        #expect(try TestBroker.publish(configuration, bodies: bodies) == 120)
        let results = try QueueCollector(configuration, queue: configuration.queue.results)
        defer { results.close() }
        let worker = try WorkerProcess(
            environment: TestBroker.environment(configuration, storage: Self.storageFolder())
                .merging(["WORKER_CONCURRENCY": "8"]) { _, new in new })
        await results.wait(for: 120, timeout: 60)
        #expect(results.objects.count == 120)
        #expect(origin.stats.maxInFlight <= 8)
        #expect(origin.stats.maxInFlight >= 4, "the worker should use its permits")
        #expect(await worker.stop() == 0)
        try await origin.shutdown()
    }

    /// The first case's 3 s fetches end within the 10 s drain; the second's 30 s fetches outlast the
    /// 1 s deadline and the 6 s exit bound, so a drain that ignored its deadline fails the bound.
    @Test(
        .timeLimit(.minutes(2)),
        arguments: [
            (drainTimeout: "10", fetchMilliseconds: 3000, label: "in-flight work finishes"),
            (drainTimeout: "1", fetchMilliseconds: 30000, label: "fetches are aborted at the deadline"),
        ])
    func sigtermDrainsWithoutLosingJobs(drainTimeout: String, fetchMilliseconds: Int, label: String) async throws {
        // The results are read through the management API: an AMQP client that is not the worker's.
        let management = try #require(ManagementClient.test, "needs IFW_TEST_MANAGEMENT_URL (scripts/test.sh)")
        let origin = try await TestOrigin.start(threads: 2)
        let configuration = try TestBroker.configuration("drain")
        defer { TestBroker.cleanUp(configuration) }
        let ids = (0..<200).map { "d\($0)" }
        let bodies = ids.map { JobPublisher.jobBody(id: $0, url: origin.url("/slow?ms=\(fetchMilliseconds)&n=\($0)")) }
        #expect(try TestBroker.publish(configuration, bodies: bodies) == 200)
        let worker = try WorkerProcess(
            environment: TestBroker.environment(configuration, storage: Self.storageFolder())
                .merging([
                    "WORKER_CONCURRENCY": "16", "WORKER_DRAIN_TIMEOUT": drainTimeout,
                    "FETCH_TIMEOUT": "300", "FETCH_LOW_SPEED_LIMIT": "0",
                    // A new origin's slow start begins at 8; these fetches take too long to grow it.
                    "SCHEDULER_INITIAL_LIMIT": "16",
                ]) { _, new in new })
        #expect(
            await eventually(timeout: 60) { origin.stats.inFlight >= 16 },
            "\(label): fetches never started; log:\n\(worker.log.suffix(2000))")
        let started = Date()
        worker.signal(SIGTERM)
        let status = await worker.waitForExit(timeout: Double(drainTimeout)! + 5)
        #expect(status == 0, "\(label): exit status; log:\n\(worker.log.suffix(3000))")
        #expect(Date().timeIntervalSince(started) <= Double(drainTimeout)! + 5)

        // Every job is answered exactly once or back in the queue, never both, never neither.
        let answers = try await management.take(configuration.queue.results, count: 1000).compactMap { $0.object }
        let answered = answers.compactMap { $0["id"] as? String }
        #expect(answered.count == Set(answered).count, "\(label): duplicate results")
        #expect(answers.allSatisfy { $0["status"] as? String == "ok" })
        // The broker requeues a closed connection's unacked deliveries a moment after the exit.
        var requeued = -1
        _ = await eventually(timeout: 10) {
            requeued = (try? TestBroker.ready(configuration, queue: configuration.queue.jobs)) ?? -1
            return answered.count + requeued == 200
        }
        #expect(answered.count + requeued == 200, "\(label): \(answered.count) results + \(requeued) ready")
        #expect(Set(answered).isSubset(of: Set(ids)))
        if fetchMilliseconds < Int(drainTimeout)! * 1000 {
            #expect(answered.count >= 16, "in-flight jobs should finish during the drain")
        } else {
            // Aborted at the deadline: handed back to the queue, not answered (no failure result).
            #expect(answered.isEmpty, "\(label): \(answered.count) aborted fetches were answered")
            #expect(requeued == 200)
        }
        try await origin.shutdown()
    }

    /// A second SIGTERM during a drain ends the process at once; its unacked jobs go back to the queue.
    @Test(.timeLimit(.minutes(2)))
    func aSecondSignalExitsAtOnceAndLosesNothing() async throws {
        let origin = try await TestOrigin.start(threads: 2)
        let configuration = try TestBroker.configuration("twice")
        defer { TestBroker.cleanUp(configuration) }
        let bodies = (0..<40).map { JobPublisher.jobBody(id: "t\($0)", url: origin.url("/slow?ms=60000&n=\($0)")) }
        #expect(try TestBroker.publish(configuration, bodies: bodies) == 40)
        let worker = try WorkerProcess(
            environment: TestBroker.environment(configuration, storage: Self.storageFolder())
                .merging([
                    "WORKER_CONCURRENCY": "8", "AMQP_PREFETCH": "16", "WORKER_DRAIN_TIMEOUT": "120",
                    "FETCH_TIMEOUT": "300", "FETCH_LOW_SPEED_LIMIT": "0",
                ]) { _, new in new })
        #expect(await eventually(timeout: 20) { origin.stats.inFlight >= 8 }, "fetches never started")
        worker.signal(SIGTERM)
        #expect(
            await eventually(timeout: 10) { worker.log.contains("draining") }, "first signal not seen:\n\(worker.log)")
        // Still draining: the fetches take a minute and the drain allows two.
        #expect(worker.isRunning)
        let second = Date()
        worker.signal(SIGTERM)
        let status = await worker.waitForExit(timeout: 5)
        #expect(status != nil && status != 0, "status \(String(describing: status)); log:\n\(worker.log.suffix(2000))")
        #expect(Date().timeIntervalSince(second) < 5)
        #expect(
            await eventually(timeout: 10) {
                (try? TestBroker.ready(configuration, queue: configuration.queue.jobs)) == 40
            }, "jobs not back in the queue")
        #expect(try TestBroker.ready(configuration, queue: configuration.queue.results) == 0)
        try await origin.shutdown()
    }
}
