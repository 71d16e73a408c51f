import Foundation
import ImageFetchWorker
import Testing

/// Issue 33, defect 2, as it was reproduced: jobs whose worker headers hold the integer extremes
/// (and other hostile values) among ordinary jobs, some for a slow origin so that the scheduler
/// defers them and some for a failing one so that they are retried. The worker must live, and
/// every job must end with a result or a dead copy.
@Suite(.enabled(if: TestBroker.isAvailable, "needs the RabbitMQ that `make test` starts"), .serialized)
struct HostileHeaderEndToEndTests {
    static let hostile: [(name: String, headers: [String: AMQPFieldValue])] = [
        ("deferrals-long", ["x-deferrals": .int(.max)]),
        ("deferrals-text", ["x-deferrals": .string("9223372036854775807")]),
        ("deferrals-negative", ["x-deferrals": .int(.min)]),
        ("deferred-seconds", ["x-deferred-seconds": .int(.max)]),
        ("deferred-seconds-negative", ["x-deferred-seconds": .string("-9223372036854775808")]),
        ("attempt-long", ["x-attempt": .int(.max)]),
        ("attempt-negative", ["x-attempt": .int(.min)]),
        ("attempt-unsigned", ["x-attempt": .uint64(.max)]),
        ("redrive-count", ["x-redrive-count": .int(.max)]),
        ("first-seen", ["x-first-seen": .string(String(repeating: "z", count: 8192))]),
        (
            "traceparent",
            [
                "traceparent": .string("00-" + String(repeating: "f", count: 4096)),
                "tracestate": .table(["a": .array([.void])]),
            ]
        ),
        ("x-death", ["x-death": .array([.table(["time": .uint64(.max), "count": .string("-1")]), .int(.max)])]),
    ]

    @Test(.timeLimit(.minutes(3)))
    func extremeHeadersNeitherCrashNorLoseJobs() async throws {
        let fast = try await TestOrigin.start(threads: 2)
        let slow = try await TestOrigin.start()
        // Its own origin: a 503 pauses the origin that sends it (issue 31), which must not hold up
        // the ordinary jobs.
        let failing = try await TestOrigin.start()
        var configuration = try TestBroker.configuration("hostile-headers")
        configuration.retry.delays = [1]
        configuration.retry.maxAttempts = 2
        defer { TestBroker.cleanUp(configuration) }
        let publisher = try JobPublisher(configuration: configuration, logger: .init(label: "test.publisher"))
        defer { publisher.close() }
        var ids: Set<String> = []
        let plain = (0..<400).map { "plain-\($0)" }
        ids.formUnion(plain)
        let plainBodies = plain.map { JobPublisher.jobBody(id: $0, url: fast.url("/slow?ms=20&n=\($0)")) }
        #expect(publisher.publish(bodies: plainBodies) == 400)
        for (name, headers) in Self.hostile {
            // Slow jobs wait behind their origin's limit and are deferred; failing ones are retried.
            let slowIDs = (0..<3).map { "\(name)-slow-\($0)" }
            let failingIDs = (0..<2).map { "\(name)-503-\($0)" }
            let okIDs = (0..<2).map { "\(name)-ok-\($0)" }
            let bodies =
                slowIDs.map { JobPublisher.jobBody(id: $0, url: slow.url("/slow?ms=800&n=\($0)")) }
                + failingIDs.map { JobPublisher.jobBody(id: $0, url: failing.url("/status/503?n=\($0)")) }
                + okIDs.map { JobPublisher.jobBody(id: $0, url: fast.url("/ok.png?n=\($0)")) }
            #expect(publisher.publish(bodies: bodies, headers: headers) == bodies.count, "\(name)")
            ids.formUnion(slowIDs + failingIDs + okIDs)
        }
        let results = try QueueCollector(configuration, queue: configuration.queue.results)
        defer { results.close() }
        let dead = try QueueCollector(configuration, queue: configuration.queue.dead)
        defer { dead.close() }
        // The failing origin's pauses (a 503 without Retry-After) are short: each one still outlasts
        // SCHEDULER_MAX_WAIT, so its jobs are deferred, but 48 refusals in a row at 1-2 s each made
        // this test take 70 s instead of 20.
        let (worker, endpoint) = try OperationsTests.startWorker(
            configuration,
            extra: [
                "WORKER_CONCURRENCY": "8", "SCHEDULER_MAX_WAIT": "100ms", "SCHEDULER_DEFER_DELAYS": "1s",
                "SCHEDULER_INITIAL_LIMIT": "2", "SCHEDULER_MAX_LIMIT": "4",
                "SCHEDULER_OVERLOAD_PAUSE": "250ms", "SCHEDULER_MAX_OVERLOAD_PAUSE": "500ms",
            ])
        func ended() -> Set<String> {
            let resulted = results.objects.compactMap { $0["id"] as? String }
            let deadLettered = dead.objects.compactMap { $0["id"] as? String }
            return Set(resulted + deadLettered)
        }
        let done = await eventually(timeout: 120) { !worker.isRunning || ended().isSuperset(of: ids) }
        #expect(worker.isRunning, "the worker died; log:\n\(worker.log.suffix(3000))")
        #expect(
            done && ended().isSuperset(of: ids),
            "\(ids.subtracting(ended()).count) never ended, e.g. \(ids.subtracting(ended()).sorted().prefix(5))")
        // The routes the hostile headers were sent down were taken: deferral for a paused origin and
        // for a slow one, and retry.
        let metrics = await endpoint.metrics()
        #expect(metrics["image_fetch_deferrals_total", ["reason": "paused"]] ?? 0 > 0)
        #expect(metrics["image_fetch_deferrals_total", ["reason": "slow"]] ?? 0 > 0)
        #expect(metrics["image_fetch_retries_total"] ?? 0 > 0)
        #expect(await worker.stop() == 0)
        try await fast.shutdown()
        try await slow.shutdown()
        try await failing.shutdown()
    }
}
