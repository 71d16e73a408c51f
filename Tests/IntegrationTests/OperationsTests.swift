import Foundation
import ImageFetchWorker
import Testing

/// Issue 5 end to end: `/metrics` after a real run, `/readyz` through a drain and a broker outage,
/// and the `depth` command, against the RabbitMQ of `make test` and a worker process.
@Suite(.enabled(if: TestBroker.isAvailable, "needs the RabbitMQ that `make test` starts"), .serialized)
struct OperationsTests {
    /// A worker process with its operations endpoint on a free port.
    static func startWorker(
        _ configuration: WorkerConfiguration, extra: [String: String] = [:]
    )
        throws -> (WorkerProcess, OperationsEndpoint)
    {
        let port = try TestBroker.freePort()
        let environment = TestBroker.environment(configuration, storage: WorkerEndToEndTests.storageFolder())
            .merging(["HTTP_PORT": "\(port)", "HTTP_HOST": "127.0.0.1", "METRICS_DEPTH_INTERVAL": "1"]) { _, new in new
            }
            .merging(extra) { _, new in new }
        return (try WorkerProcess(environment: environment), try OperationsEndpoint(port: port))
    }

    /// Runs `image-fetch-worker ARGS` to completion; its exit status and everything it printed.
    static func command(
        _ arguments: [String], environment: [String: String]
    ) async throws -> (status: Int32?, output: String) {
        let process = try WorkerProcess(arguments: arguments, environment: environment)
        let status = await process.waitForExit(timeout: 30)
        return (status, process.log)
    }

    @Test(.timeLimit(.minutes(3)))
    func metricsCountWhatWasPublishedAndAnswered() async throws {
        let origin = try await TestOrigin.start()
        let configuration = try TestBroker.configuration("metrics")
        defer { TestBroker.cleanUp(configuration) }
        var bodies: [[UInt8]] = []
        for index in 0..<20 {
            bodies.append(JobPublisher.jobBody(id: "ok\(index)", url: origin.url("/ok.png?n=\(index)")))
        }
        for index in 0..<5 {
            bodies.append(JobPublisher.jobBody(id: "nf\(index)", url: origin.url("/status/404?n=\(index)")))
        }
        for index in 0..<3 {
            bodies.append(JobPublisher.jobBody(id: "html\(index)", url: origin.url("/html?n=\(index)")))
        }
        bodies.append(JobPublisher.jobBody(id: "ftp", url: "ftp://127.0.0.1/x.png"))
        bodies.append(Array("not json".utf8))
        bodies.append(Array(#"{"id":"no-url"}"#.utf8))
        #expect(try TestBroker.publish(configuration, bodies: bodies) == bodies.count)

        // Nobody consumes the results yet, so the results queue's depth is something to compare.
        let (worker, endpoint) = try Self.startWorker(configuration, extra: ["WORKER_CONCURRENCY": "4"])
        let answered = await eventuallyAsync(timeout: 60) {
            let metrics = await endpoint.metrics()
            return metrics.series("image_fetch_results_total").values.reduce(0, +) == Double(bodies.count)
        }
        #expect(answered, "worker log:\n\(worker.log.suffix(3000))")
        let metrics = await endpoint.metrics()
        #expect(metrics["image_fetch_jobs_received_total"] == 31)
        #expect(metrics["image_fetch_results_total", ["status": "ok", "code": "none"]] == 20)
        #expect(metrics["image_fetch_results_total", ["status": "failed", "code": "http_error"]] == 5)
        #expect(metrics["image_fetch_results_total", ["status": "failed", "code": "not_an_image"]] == 3)
        #expect(metrics["image_fetch_results_total", ["status": "failed", "code": "unsupported_scheme"]] == 1)
        #expect(metrics["image_fetch_results_total", ["status": "failed", "code": "invalid_job"]] == 2)
        #expect(metrics["image_fetch_dead_lettered_total"] == 2)
        #expect(metrics["image_fetch_retries_total"] == 0)
        #expect(metrics["image_fetch_jobs_requeued_total"] == 0)
        #expect(metrics["image_fetch_jobs_in_flight"] == 0)
        #expect(metrics["image_fetch_jobs_waiting_admission"] == 0)
        #expect(metrics["image_fetch_concurrency"] == 4)
        #expect(metrics["image_fetch_broker_connected"] == 1)
        #expect(metrics["image_fetch_broker_connection_state", ["state": "consuming"]] == 1)
        #expect(metrics.series("image_fetch_broker_connection_state").values.reduce(0, +) == 1)
        // Every job was acked after its confirm: 29 after their result, the two invalid ones after
        // their dead-letter copy.
        #expect(metrics["image_fetch_delivery_to_ack_seconds_count"] == 31)
        #expect(metrics["image_fetch_publish_confirm_seconds_count"].map { $0 >= 31 } == true)
        // 28 transfers ran (the ftp job never left the URL check); 20 bodies were PNGs.
        #expect(metrics["image_fetch_fetch_duration_seconds_count"] == 28)
        #expect(metrics["image_fetch_fetched_bytes_total"].map { $0 >= Double(20 * TestOrigin.okBody.count) } == true)
        #expect(metrics.types["image_fetch_fetch_duration_seconds"] == "histogram")
        #expect(metrics.types["image_fetch_results_total"] == "counter")
        #expect(metrics.types["image_fetch_jobs_in_flight"] == "gauge")

        // The depth gauges (sampled every second here) match the broker's own count.
        var mismatch = ""
        let depthAgrees = try await eventuallyAsync(timeout: 15) {
            let metrics = await endpoint.metrics()
            let broker = try TestBroker.listQueues()
            mismatch = ""
            for name in QueueDepth.queueNames(configuration) {
                let ready = metrics["image_fetch_queue_ready_messages", ["queue": name]]
                let consumers = metrics["image_fetch_queue_consumers", ["queue": name]]
                if ready != broker[name].map({ Double($0.ready) })
                    || consumers != broker[name].map({ Double($0.consumers) })
                {
                    mismatch +=
                        "\(name): gauge \(String(describing: ready))/\(String(describing: consumers)), "
                        + "rabbitmqctl \(String(describing: broker[name]))\n"
                }
            }
            return mismatch.isEmpty
        }
        #expect(depthAgrees, "\(mismatch)")
        #expect(try TestBroker.listQueues()[configuration.queue.results]?.ready == 29)
        #expect(try TestBroker.listQueues()[configuration.queue.dead]?.ready == 2)

        // The results themselves say the same as the counters.
        let results = try QueueCollector(configuration, queue: configuration.queue.results)
        defer { results.close() }
        let objects = await results.wait(for: 29, timeout: 30).compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.body)) as? [String: Any]
        }
        var byCode: [String: Int] = [:]
        for object in objects {
            let code = (object["error"] as? [String: Any])?["code"] as? String ?? "none"
            byCode["\(object["status"] as? String ?? "?")/\(code)", default: 0] += 1
        }
        #expect(
            byCode == ["ok/none": 20, "failed/http_error": 5, "failed/not_an_image": 3, "failed/unsupported_scheme": 1])
        #expect(worker.log.contains("summary"), "the summary line (every 2 s in tests) is missing")
        #expect(await worker.stop() == 0)
        try await origin.shutdown()
    }

    @Test(.timeLimit(.minutes(2)))
    func readinessTurnsFalseDuringADrain() async throws {
        let origin = try await TestOrigin.start(threads: 2)
        let configuration = try TestBroker.configuration("readydrain")
        defer { TestBroker.cleanUp(configuration) }
        let (worker, endpoint) = try Self.startWorker(
            configuration,
            extra: ["WORKER_CONCURRENCY": "4", "WORKER_DRAIN_TIMEOUT": "20", "FETCH_LOW_SPEED_LIMIT": "0"])
        #expect(await eventuallyAsync(timeout: 20) { await endpoint.readiness() == 200 }, "never ready:\n\(worker.log)")
        #expect(await endpoint.get("/healthz").status == 200)
        // 10 s fetches: the checks below must all fall inside the drain, on a busy machine too.
        let bodies = (0..<8).map { JobPublisher.jobBody(id: "s\($0)", url: origin.url("/slow?ms=10000&n=\($0)")) }
        #expect(try TestBroker.publish(configuration, bodies: bodies) == 8)
        #expect(await eventuallyAsync(timeout: 20) { origin.stats.inFlight >= 4 })

        worker.signal(SIGTERM)
        #expect(await eventuallyAsync(timeout: 2) { await endpoint.readiness() == 503 })
        // Still draining: the slow fetches take 10 s, and the process serves /healthz meanwhile.
        #expect(worker.isRunning)
        #expect(await endpoint.get("/healthz").status == 200)
        let state = await endpoint.metrics()
        #expect(state["image_fetch_broker_connection_state", ["state": "consuming"]] == 0)
        #expect(await worker.waitForExit(timeout: 30) == 0, "log:\n\(worker.log.suffix(3000))")
        try await origin.shutdown()
    }

    @Test(.timeLimit(.minutes(4)))
    func readinessFollowsTheBrokerConnection() async throws {
        let script = try #require(TestBroker.script)
        let origin = try await TestOrigin.start(threads: 2)
        let configuration = try TestBroker.configuration("readybroker")
        defer { TestBroker.cleanUp(configuration) }
        // One permit and a prefetch of 10: while the broker is away, jobs wait for admission, which
        // is where a lost channel's deliveries must be counted out exactly once.
        let (worker, endpoint) = try Self.startWorker(
            configuration, extra: ["WORKER_CONCURRENCY": "1", "AMQP_PREFETCH": "10", "AMQP_HEARTBEAT": "5"])
        defer {
            // Leave a running broker to the next tests even when this one fails half-way.
            if (try? TestBroker.run(script, ["status"])) != 0 { _ = try? TestBroker.run(script, ["start"]) }
        }
        #expect(await eventuallyAsync(timeout: 20) { await endpoint.readiness() == 200 }, "never ready:\n\(worker.log)")
        let bodies = (0..<10).map { JobPublisher.jobBody(id: "r\($0)", url: origin.url("/slow?ms=1500&n=\($0)")) }
        #expect(try TestBroker.publish(configuration, bodies: bodies) == 10)
        #expect(
            await eventuallyAsync(timeout: 10) {
                await endpoint.metrics()["image_fetch_jobs_waiting_admission"] ?? 0 >= 5
            })

        let stopped = try TestBroker.run(script, ["stop"])
        #expect(stopped == 0)
        #expect(
            await eventuallyAsync(timeout: 30) { await endpoint.readiness() == 503 },
            "still ready with the broker stopped")
        let down = await endpoint.metrics()
        #expect(down["image_fetch_broker_connected"] == 0)
        #expect(down["image_fetch_broker_connection_state", ["state": "consuming"]] == 0)
        #expect(await endpoint.get("/healthz").status == 200, "liveness must not depend on the broker")

        let started = try TestBroker.run(script, ["start"])
        #expect(started == 0)
        #expect(
            await eventuallyAsync(timeout: 60) { await endpoint.readiness() == 200 },
            "not ready again after the broker came back:\n\(worker.log.suffix(3000))")
        let up = await endpoint.metrics()
        #expect(up["image_fetch_reconnects_total"].map { $0 >= 1 } == true)
        #expect(up["image_fetch_broker_connection_state", ["state": "consuming"]] == 1)

        // Everything is answered after the redelivery, and the gauges come back to zero.
        let settled = await eventuallyAsync(timeout: 60) {
            let metrics = await endpoint.metrics()
            return metrics["image_fetch_results_total", ["status": "ok", "code": "none"]].map { $0 >= 10 } == true
                && metrics["image_fetch_jobs_in_flight"] == 0
        }
        #expect(settled, "log:\n\(worker.log.suffix(3000))")
        let final = await endpoint.metrics()
        #expect(final["image_fetch_jobs_waiting_admission"] == 0)
        #expect(try TestBroker.ready(configuration, queue: configuration.queue.jobs) == 0)
        #expect(await worker.stop() == 0)
        try await origin.shutdown()
    }

    @Test(.timeLimit(.minutes(2)))
    func depthAgreesWithRabbitmqctlAndMaxReadyExits() async throws {
        let configuration = try TestBroker.configuration("depth")
        defer { TestBroker.cleanUp(configuration) }
        let bodies = (0..<7).map { JobPublisher.jobBody(id: "q\($0)", url: "http://127.0.0.1:9/\($0).png") }
        #expect(try TestBroker.publish(configuration, bodies: bodies) == 7)
        let environment = TestBroker.environment(configuration, storage: "/nonexistent")

        let (status, output) = try await Self.command(["depth", "--json"], environment: environment)
        #expect(status == 0, "\(output)")
        let line = try #require(output.split(separator: "\n").last { $0.hasPrefix("[") })
        let rows = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [[String: Any]])
        let broker = try TestBroker.listQueues()
        #expect(rows.map { $0["queue"] as? String } == QueueDepth.queueNames(configuration))
        for row in rows {
            let name = try #require(row["queue"] as? String)
            let counts = try #require(broker[name], "rabbitmqctl does not list \(name)")
            #expect(row["ready"] as? Int == counts.ready, "\(name)")
            #expect(row["consumers"] as? Int == counts.consumers, "\(name)")
        }
        #expect(rows.first?["ready"] as? Int == 7)

        #expect(try await Self.command(["depth", "--max-ready", "7"], environment: environment).status == 0)
        let over = try await Self.command(["depth", "--max-ready", "6"], environment: environment)
        #expect(over.status == 1, "\(over.output)")
        #expect(over.output.contains(configuration.queue.jobs), "the table is printed before exiting 1")
        var unreachable = environment
        unreachable["AMQP_URL"] = "amqp://guest:secret-password@127.0.0.1:\(try TestBroker.freePort())/%2F"
        let cannot = try await Self.command(["depth", "--max-ready", "6"], environment: unreachable)
        #expect(cannot.status == 2, "\(cannot.output)")
        #expect(!cannot.output.contains("secret-password"))
    }

    /// Needs the management plugin, which scripts/test.sh enables (IFW_TEST_MANAGEMENT_URL).
    @Test(
        .timeLimit(.minutes(2)),
        .enabled(
            if: ProcessInfo.processInfo.environment["IFW_TEST_MANAGEMENT_URL"] != nil,
            "needs the management API that scripts/test.sh enables"))
    func depthAddsUnackedAndRatesFromTheManagementAPI() async throws {
        let management = try #require(ProcessInfo.processInfo.environment["IFW_TEST_MANAGEMENT_URL"])
        let origin = try await TestOrigin.start(threads: 2)
        let configuration = try TestBroker.configuration("mgmt")
        defer { TestBroker.cleanUp(configuration) }
        let bodies = (0..<12).map { JobPublisher.jobBody(id: "m\($0)", url: origin.url("/slow?ms=20000&n=\($0)")) }
        #expect(try TestBroker.publish(configuration, bodies: bodies) == 12)
        // A worker with 2 in flight and a prefetch of 6 holds 6 unacked that the ready count does not show.
        let (worker, _) = try Self.startWorker(
            configuration, extra: ["WORKER_CONCURRENCY": "2", "AMQP_PREFETCH": "6", "WORKER_DRAIN_TIMEOUT": "1"])
        let environment = TestBroker.environment(configuration, storage: "/nonexistent")
        #expect(
            await eventuallyAsync(timeout: 20) {
                (try? TestBroker.listQueues()[configuration.queue.jobs]?.unacked) == 6
            })

        // Credentials from amqp.url (the URL has none); the management API's statistics lag a few seconds.
        var last = ""
        let agrees = await eventuallyAsync(timeout: 30) {
            guard
                let (status, output) = try? await Self.command(
                    ["depth", "--json", "--management-url", management], environment: environment), status == 0,
                let line = output.split(separator: "\n").last(where: { $0.hasPrefix("[") }),
                let rows = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [[String: Any]],
                let jobs = rows.first
            else { return false }
            last = String(line)
            return jobs["unacked"] as? Int == 6 && jobs["ready"] as? Int == 6 && jobs.keys.contains("publish_rate")
                && jobs.keys.contains("deliver_rate") && jobs.keys.contains("ack_rate")
        }
        #expect(agrees, "last output: \(last)")
        let table = try await Self.command(["depth", "--management-url", management], environment: environment)
        #expect(table.status == 0)
        #expect(table.output.contains("UNACKED"))
        // The worker's host lists are for the images it fetches, not for the broker's API.
        var listed = environment
        listed["FETCH_ALLOWED_HOSTS"] = "cdn.example.com"
        listed["FETCH_DENIED_HOSTS"] = "127.0.0.1"
        let policed = try await Self.command(["depth", "--management-url", management], environment: listed)
        #expect(policed.status == 0, "\(policed.output)")

        // Wrong credentials: exit 2, and the password is not printed.
        let url = try #require(URL(string: management))
        let wrong = "http://guest:not-the-password@\(url.host ?? "127.0.0.1"):\(url.port ?? 15672)"
        let refused = try await Self.command(["depth", "--management-url", wrong], environment: environment)
        #expect(refused.status == 2, "\(refused.output)")
        #expect(refused.output.contains("401"))
        #expect(!refused.output.contains("not-the-password"))

        // Behind a proxy, a wrong path prefix answers 404 for every queue: that is an API that
        // cannot be read (exit 2), not a table of queues without statistics.
        let proxy = try RawOrigin(responses: [:])
        defer { proxy.stop() }
        let misplaced = try await Self.command(
            ["depth", "--management-url", proxy.url("/not-the-api")], environment: environment)
        #expect(misplaced.status == 2, "\(misplaced.output)")
        #expect(misplaced.output.contains("/not-the-api"), "\(misplaced.output)")
        #expect(await worker.stop() == 0)
        try await origin.shutdown()
    }
}
