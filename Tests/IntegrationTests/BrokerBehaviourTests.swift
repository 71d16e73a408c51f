import Foundation
import ImageFetchWorker
import Testing

/// What the broker can say to a running worker: a nack or a return of its result, a resource
/// alarm, a cancelled consumer, a dead first URL. The worker is a separate process; some tests
/// change the shared broker, so the suite runs alone (scripts/test.sh runs suites one at a time).
@Suite(
    .enabled(if: TestBroker.isAvailable && TestBroker.script != nil, "needs the RabbitMQ that `make test` starts"),
    .serialized)
struct BrokerBehaviourTests {
    static func ctl(_ arguments: [String]) throws {
        let status = try TestBroker.run(try #require(TestBroker.script), ["ctl"] + arguments)
        #expect(status == 0, "rabbitmqctl \(arguments.joined(separator: " ")) exited \(status)")
    }

    static func declare(_ configuration: WorkerConfiguration, queue: String, arguments: [String: AMQPFieldValue]) throws
    {
        let connection = try AMQPConnection()
        try connection.open(url: configuration.amqp.urls[0], tls: .init(), heartbeat: 0, connectionName: "test setup")
        defer { connection.close() }
        try connection.openChannel(1)
        try connection.declareQueue(channel: 1, name: queue, arguments: arguments)
    }

    /// A result the broker does not take (returned: no such `reply_to` queue; nacked: the queue
    /// refuses it) is never followed by an ack: the job goes back to the queue and runs again, and
    /// once the queue takes results, its result arrives.
    // Four minutes: each rabbitmqctl call starts an Erlang VM, which takes many seconds on a loaded
    // machine, and the nacked case makes about ten of them.
    @Test(.timeLimit(.minutes(4)), arguments: ["returned", "nacked"])
    func aResultTheBrokerDoesNotTakeNeverLeadsToAnAck(_ outcome: String) async throws {
        let origin = try await TestOrigin.start()
        let configuration = try TestBroker.configuration("unconfirmed-\(outcome)")
        defer { TestBroker.cleanUp(configuration) }
        let replyTo = "\(configuration.queue.jobs).replies"
        defer { _ = try? TestBroker.run(try #require(TestBroker.script), ["ctl", "delete_queue", replyTo]) }
        _ = try TestBroker.publish(configuration, bodies: [])  // declare the topology
        let policy = "refuse-\(replyTo)"
        if outcome == "nacked" {
            // A full queue that refuses new messages: the broker nacks every publish to it. A
            // policy, not queue arguments, so that the queue can take results later without being
            // deleted: a publish in flight to a queue being deleted is confirmed and lost.
            try Self.ctl([
                "set_policy", "--apply-to", "queues", policy, "^\(NSRegularExpression.escapedPattern(for: replyTo))$",
                #"{"max-length":0,"overflow":"reject-publish"}"#,
            ])
            try Self.declare(configuration, queue: replyTo, arguments: [:])
            #expect(
                await eventually(timeout: 10) {
                    ((try? TestBroker.output(try #require(TestBroker.script), ["ctl", "list_queues", "name", "policy"]))
                        ?? "")
                        .split(separator: "\n").contains { $0.hasPrefix(replyTo) && $0.hasSuffix(policy) }
                }, "the policy never applied")
        }
        // Gone already when the test got that far (then rabbitmqctl says so, and that is fine).
        defer {
            if outcome == "nacked", let script = TestBroker.script {
                _ = try? TestBroker.run(script, ["ctl", "clear_policy", policy])
            }
        }
        #expect(
            try TestBroker.publish(
                configuration, bodies: [JobPublisher.jobBody(id: "u-1", url: origin.url("/ok.png"))],
                replyTo: replyTo) == 1)
        // A high limit, so the loop of hand-backs is not cut short by the poison rule (after
        // `queue.delivery_limit` redeliveries the job would go to the dead-letter queue instead).
        let worker = try WorkerProcess(
            environment: TestBroker.environment(configuration, storage: WorkerEndToEndTests.storageFolder())
                .merging(["QUEUE_DELIVERY_LIMIT": "10000"]) { _, new in new })
        // Ran more than once: it was handed back each time, not acked.
        #expect(await eventually(timeout: 30) { origin.stats.requests >= 3 }, "log:\n\(worker.log.suffix(2000))")
        #expect(worker.log.contains("publish not confirmed; job handed back"))
        #expect(worker.log.contains("outcome=\(outcome)"))
        let queues = try TestBroker.listQueues()
        #expect((queues[configuration.queue.jobs]?.ready ?? 0) + (queues[configuration.queue.jobs]?.unacked ?? 0) == 1)
        // Let the results in: the job ends with its result and leaves the queue.
        if outcome == "nacked" {
            try Self.ctl(["clear_policy", policy])
        } else {
            try Self.declare(configuration, queue: replyTo, arguments: [:])
        }
        #expect(
            await eventually(timeout: 30) { (try? TestBroker.ready(configuration, queue: replyTo)) == 1 },
            "log:\n\(worker.log.suffix(3000))")
        #expect(
            await eventually(timeout: 10) {
                let jobs = (try? TestBroker.listQueues())?[configuration.queue.jobs]
                return jobs?.ready == 0 && jobs?.unacked == 0
            })
        #expect(await worker.stop() == 0)
        try await origin.shutdown()
    }

    /// A memory alarm blocks the worker's publishing connection: admission stops (the origin sees
    /// no new requests beyond those already admitted), `/readyz` says 503, and after the alarm the
    /// same process finishes every job.
    @Test(.timeLimit(.minutes(3)))
    func connectionBlockedPausesAdmission() async throws {
        let origin = try await TestOrigin.start(threads: 2)
        let configuration = try TestBroker.configuration("blocked")
        defer { TestBroker.cleanUp(configuration) }
        let ids = (0..<300).map { "b\($0)" }
        origin.setPace(milliseconds: 100)
        #expect(
            try TestBroker.publish(
                configuration, bodies: ids.map { JobPublisher.jobBody(id: $0, url: origin.url("/paced?n=\($0)")) })
                == 300)
        let results = try QueueCollector(configuration, queue: configuration.queue.results)
        defer { results.close() }
        let port = try TestBroker.freePort()
        let endpoint = try OperationsEndpoint(port: port)
        let worker = try WorkerProcess(
            environment: TestBroker.environment(configuration, storage: WorkerEndToEndTests.storageFolder())
                .merging([
                    "WORKER_CONCURRENCY": "4", "HTTP_PORT": "\(port)", "HTTP_HOST": "127.0.0.1",
                    // A depth sample every second: the blocked connection must not be asked.
                    "METRICS_DEPTH_INTERVAL": "1",
                ]) { _, new in new })
        #expect(await eventually(timeout: 30) { results.received.count >= 20 }, "log:\n\(worker.log.suffix(2000))")
        // The broker blocks a connection when it next publishes, so results must still be coming
        // once rabbitmqctl has raised the alarm, however long that takes on a loaded machine.
        origin.setPace(milliseconds: 1_000)
        try Self.ctl(["set_vm_memory_high_watermark", "0.000001"])
        defer {
            _ = try? TestBroker.run(try #require(TestBroker.script), ["ctl", "set_vm_memory_high_watermark", "0.4"])
        }
        #expect(
            await eventuallyAsync(timeout: 20) { await endpoint.readiness() == 503 }, "log:\n\(worker.log.suffix(2000))"
        )
        #expect(worker.log.contains("the broker blocked the connection"))
        // At most the admitted jobs (4) and the one waiting for a permit may still reach the origin.
        try await Task.sleep(for: .milliseconds(500))
        let before = origin.stats.requests
        // The worker stays live meanwhile: a blocked connection reads nothing, so an RPC on it (a
        // depth sample's passive declare) would hold the channel queue, and /healthz with it.
        var unhealthy = 0
        for _ in 0..<8 {
            if await endpoint.get("/healthz").status != 200 { unhealthy += 1 }
            try await Task.sleep(for: .milliseconds(500))
        }
        #expect(unhealthy == 0, "/healthz failed \(unhealthy) of 8 probes while blocked")
        let during = origin.stats.requests - before
        #expect(during <= 5, "\(during) requests while blocked")
        origin.setPace(milliseconds: 20)
        try Self.ctl(["set_vm_memory_high_watermark", "0.4"])
        #expect(
            await eventually(timeout: 60) { Set(results.objects.compactMap { $0["id"] as? String }) == Set(ids) },
            "log:\n\(worker.log.suffix(2000))")
        #expect(await endpoint.readiness() == 200)
        #expect(worker.log.contains("the broker unblocked the connection"))
        #expect(worker.isRunning)
        #expect(await worker.stop() == 0)
        try await origin.shutdown()
    }

    /// A run against a paced origin: `jobs` jobs of `/paced` published, a collector on the
    /// results, and a worker with its operations endpoint on loopback and `environment` on top.
    struct PacedRun {
        let origin: TestOrigin
        let ids: [String]
        let results: QueueCollector
        let endpoint: OperationsEndpoint
        let worker: WorkerProcess
    }

    static func pacedRun(
        _ configuration: WorkerConfiguration, jobs: Int, paceMilliseconds: Int, environment: [String: String]
    ) async throws -> PacedRun {
        let origin = try await TestOrigin.start(threads: 2)
        let ids = (0..<jobs).map { "p\($0)" }
        origin.setPace(milliseconds: paceMilliseconds)
        let bodies = ids.map { JobPublisher.jobBody(id: $0, url: origin.url("/paced?n=\($0)")) }
        #expect(try TestBroker.publish(configuration, bodies: bodies) == ids.count)
        let results = try QueueCollector(configuration, queue: configuration.queue.results)
        let port = try TestBroker.freePort()
        let endpoint = try OperationsEndpoint(port: port)
        let worker = try WorkerProcess(
            environment: TestBroker.environment(configuration, storage: WorkerEndToEndTests.storageFolder())
                .merging(environment.merging(["HTTP_PORT": "\(port)", "HTTP_HOST": "127.0.0.1"]) { $1 }) { $1 })
        return PacedRun(origin: origin, ids: ids, results: results, endpoint: endpoint, worker: worker)
    }

    /// SIGTERM while a memory alarm blocks the connection. The broker reads nothing from a blocked
    /// connection, so the consumer's `basic.cancel` waited out the RPC timeout (30 s), and the
    /// close of the connection it then dropped waited 30 s more: the exit came about a minute
    /// later, whatever `worker.drain_timeout` said, past a default Kubernetes grace period.
    @Test(.timeLimit(.minutes(3)))
    func aStopWhileTheBrokerBlocksTheConnectionEndsWithinTheDrainTimeout() async throws {
        let configuration = try TestBroker.configuration("blocked-stop")
        defer { TestBroker.cleanUp(configuration) }
        let run = try await Self.pacedRun(
            configuration, jobs: 200, paceMilliseconds: 100,
            environment: ["WORKER_CONCURRENCY": "4", "WORKER_DRAIN_TIMEOUT": "3"])
        let (origin, results, endpoint, worker) = (run.origin, run.results, run.endpoint, run.worker)
        defer { results.close() }
        #expect(await eventually(timeout: 30) { results.received.count >= 20 }, "log:\n\(worker.log.suffix(2000))")
        let script = try #require(TestBroker.script)
        defer { _ = try? TestBroker.run(script, ["ctl", "set_vm_memory_high_watermark", "0.4"]) }
        origin.setPace(milliseconds: 1_000)
        try Self.ctl(["set_vm_memory_high_watermark", "0.000001"])
        #expect(
            await eventuallyAsync(timeout: 20) { await endpoint.readiness() == 503 }, "log:\n\(worker.log.suffix(2000))"
        )
        #expect(worker.log.contains("the broker blocked the connection"))
        // Let a result or two reach the blocked connection, then stop.
        try await Task.sleep(for: .seconds(2))
        let stoppedAt = DispatchTime.now()
        worker.signal(SIGTERM)
        // The drain timeout (3 s), its grace for aborted fetches (5 s), and a close (2 s).
        let status = await worker.waitForExit(timeout: 25)
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - stoppedAt.uptimeNanoseconds) / 1e9
        #expect(status != nil, "still running 25 s after SIGTERM; log:\n\(worker.log.suffix(3000))")
        if status == nil { _ = await worker.stop(grace: 90) }
        #expect(seconds < 20, "exited \(seconds) s after SIGTERM")
        try Self.ctl(["set_vm_memory_high_watermark", "0.4"])
        try await origin.shutdown()
    }

    /// rabbitmq-c writes without a deadline. A job over `queue.max_job_bytes` is streamed to its
    /// dead copy as it is read; when the broker blocks the connection (a memory alarm) it reads
    /// nothing, so once the socket's buffers are full the write waits, and the broker's own write
    /// of the delivery waits on the worker. The drain's close waited behind it until the broker's
    /// send timeout broke the connection: 26 s after SIGTERM with a 2 s drain timeout.
    @Test(.timeLimit(.minutes(3)))
    func aStopWhileAWriteWaitsOnABlockedConnectionStillEnds() async throws {
        let configuration = try TestBroker.configuration("blocked-write")
        defer { TestBroker.cleanUp(configuration) }
        let url = try #require(TestBroker.url)
        _ = try TestBroker.publish(configuration, bodies: [])  // declare the topology
        let padding = String(repeating: "x", count: 40 << 20)
        let large = #"{"id":"huge","url":"http://127.0.0.1:9/never.png","padding":"\#(padding)"}"#
        try AMQPPeer.publish(url: url, queue: configuration.queue.jobs, body: large, headers: WireTable.encode([]))
        let script = try #require(TestBroker.script)
        defer { _ = try? TestBroker.run(script, ["ctl", "set_vm_memory_high_watermark", "0.4"]) }
        try Self.ctl(["set_vm_memory_high_watermark", "0.000001"])
        let worker = try WorkerProcess(
            environment: TestBroker.environment(configuration, storage: WorkerEndToEndTests.storageFolder())
                .merging(["QUEUE_MAX_JOB_BYTES": "65536", "WORKER_DRAIN_TIMEOUT": "2"]) { _, new in new })
        #expect(
            await eventually(timeout: 30) { worker.log.contains("worker started") }, "log:\n\(worker.log.suffix(2000))")
        // Time to read the job's first frames and fill the socket with its copy.
        try await Task.sleep(for: .seconds(4))
        worker.signal(SIGTERM)
        // The drain timeout (2 s), its grace for aborted fetches (5 s), the close's bound (5 s).
        let status = await worker.waitForExit(timeout: 16)
        #expect(status != nil, "still running 16 s after SIGTERM; log:\n\(worker.log.suffix(3000))")
        if status == nil { worker.signal(SIGKILL) }
        try Self.ctl(["set_vm_memory_high_watermark", "0.4"])
        // Nothing is lost: the job is back in the jobs queue, or its copy made it to the dead one.
        #expect(
            await eventually(timeout: 30) {
                let jobs = (try? AMQPPeer.depth(configuration.queue.jobs)) ?? 0
                let dead = (try? AMQPPeer.depth(configuration.queue.dead)) ?? 0
                return jobs + dead >= 1
            })
    }

    /// Issue 33, defect 1: the connection is lost while the broker blocks it, and the alarm clears
    /// before the worker is back. The new connection is not blocked, so the broker never sends
    /// `connection.unblocked` on it; the worker must not stay parked waiting for one.
    @Test(.timeLimit(.minutes(3)))
    func aConnectionLostWhileBlockedDoesNotParkTheWorker() async throws {
        let configuration = try TestBroker.configuration("blocked-lost")
        defer { TestBroker.cleanUp(configuration) }
        let run = try await Self.pacedRun(
            configuration, jobs: 600, paceMilliseconds: 40, environment: ["WORKER_CONCURRENCY": "8"])
        let (origin, ids, results, endpoint, worker) = (run.origin, run.ids, run.results, run.endpoint, run.worker)
        defer { results.close() }
        #expect(await eventually(timeout: 30) { results.received.count >= 50 }, "log:\n\(worker.log.suffix(2000))")
        let script = try #require(TestBroker.script)
        defer { _ = try? TestBroker.run(script, ["ctl", "set_vm_memory_high_watermark", "0.4"]) }
        // Results keep coming while rabbitmqctl raises the alarm (the broker blocks on a publish).
        origin.setPace(milliseconds: 1_000)
        try Self.ctl(["set_vm_memory_high_watermark", "0.000001"])
        #expect(
            await eventually(timeout: 20) { worker.log.contains("the broker blocked the connection") },
            "log:\n\(worker.log.suffix(2000))")
        // The results collector's connection goes too; it reconnects by itself.
        try Self.ctl(["close_all_connections", "test: lost while blocked"])
        try Self.ctl(["set_vm_memory_high_watermark", "0.4"])
        origin.setPace(milliseconds: 20)
        #expect(await eventually(timeout: 30) { worker.log.contains("lost the broker connection") })
        let done = await eventually(timeout: 90) { Set(results.objects.compactMap { $0["id"] as? String }) == Set(ids) }
        let seen = Set(results.objects.compactMap { $0["id"] as? String }).count
        #expect(done, "\(seen) of \(ids.count) results; log:\n\(worker.log.suffix(3000))")
        #expect(await eventuallyAsync(timeout: 10) { await endpoint.readiness() == 200 })
        #expect(worker.isRunning)
        #expect(await worker.stop() == 0)
        try await origin.shutdown()
    }

    /// A server-sent `basic.cancel` (the jobs queue deleted under the worker): the worker
    /// reconnects, declares the queue again and consumes again; jobs published afterwards all run.
    @Test(.timeLimit(.minutes(2)))
    func aServerCancelLeadsToConsumingAgain() async throws {
        let origin = try await TestOrigin.start()
        let configuration = try TestBroker.configuration("cancel")
        defer { TestBroker.cleanUp(configuration) }
        _ = try TestBroker.publish(configuration, bodies: [])  // declare the topology
        let results = try QueueCollector(configuration, queue: configuration.queue.results)
        defer { results.close() }
        let worker = try WorkerProcess(
            environment: TestBroker.environment(configuration, storage: WorkerEndToEndTests.storageFolder()))
        #expect(
            await eventually(timeout: 20) { (try? TestBroker.listQueues())?[configuration.queue.jobs]?.consumers == 1 })
        try Self.ctl(["delete_queue", configuration.queue.jobs])
        #expect(
            await eventually(timeout: 20) { worker.log.contains("the broker cancelled the consumer") },
            "log:\n\(worker.log)")
        // Declared again by the worker, with a consumer again.
        #expect(
            await eventually(timeout: 30) { (try? TestBroker.listQueues())?[configuration.queue.jobs]?.consumers == 1 },
            "log:\n\(worker.log.suffix(2000))")
        let ids = (0..<50).map { "c\($0)" }
        #expect(
            try TestBroker.publish(
                configuration, bodies: ids.map { JobPublisher.jobBody(id: $0, url: origin.url("/ok.png?n=\($0)")) })
                == 50)
        #expect(await eventually(timeout: 30) { Set(results.objects.compactMap { $0["id"] as? String }) == Set(ids) })
        #expect(worker.isRunning)
        #expect(await worker.stop() == 0)
        try await origin.shutdown()
    }

    /// `amqp.url` with several URLs whose first is dead: the worker moves on to the next one.
    @Test(.timeLimit(.minutes(2)))
    func aDeadFirstURLFailsOverToTheNext() async throws {
        let origin = try await TestOrigin.start()
        let configuration = try TestBroker.configuration("failover")
        defer { TestBroker.cleanUp(configuration) }
        let url = try #require(TestBroker.url)
        let deadPort = try TestBroker.freePort()
        let dead = "amqp://guest:guest@127.0.0.1:\(deadPort)/%2F"
        let ids = (0..<20).map { "fo\($0)" }
        #expect(
            try TestBroker.publish(
                configuration, bodies: ids.map { JobPublisher.jobBody(id: $0, url: origin.url("/ok.png?n=\($0)")) })
                == 20)
        let results = try QueueCollector(configuration, queue: configuration.queue.results)
        defer { results.close() }
        let worker = try WorkerProcess(
            environment: TestBroker.environment(configuration, storage: WorkerEndToEndTests.storageFolder())
                .merging(["AMQP_URL": "\(dead),\(url)"]) { _, new in new })
        #expect(
            await eventually(timeout: 30) { Set(results.objects.compactMap { $0["id"] as? String }) == Set(ids) },
            "log:\n\(worker.log.suffix(2000))")
        #expect(worker.log.contains("connect to 127.0.0.1:\(deadPort)"), "the first URL was tried")
        let port = try #require(configuration.amqp.urls.first?.port)
        #expect(
            worker.log.contains(
                "127.0.0.1:\(port)/%2F prefetch=32 queue=\(configuration.queue.jobs) [ImageFetchWorker] connected to the broker"
            ))
        #expect(await worker.stop() == 0)
        try await origin.shutdown()
    }

    /// A broker that takes the connection and never answers (issue 33): a SIGTERM during the login
    /// ends the attempt and the worker exits 0 at once. Before, the drain waited on the channel
    /// queue behind rabbitmq-c's 30 s handshake timeout, and the login's failure then stopped the
    /// worker with exit 1.
    @Test(.timeLimit(.minutes(2)))
    func aSIGTERMWhileTheBrokerDoesNotAnswerEndsTheAttempt() async throws {
        let configuration = try TestBroker.configuration("silent")
        let port = try TestBroker.freePort()
        let accepts = TestScratch.path("silent-accepts-\(UUID().uuidString)")
        let listener = Process()
        listener.executableURL = URL(fileURLWithPath: AMQPPeer.python)
        listener.arguments = [
            "-c",
            """
            import socket, sys
            server = socket.socket()
            server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            server.bind(("127.0.0.1", \(port)))
            server.listen(8)
            held = []
            while True:
                held.append(server.accept()[0])
                with open(sys.argv[1], "a") as log:
                    log.write("accepted\\n")
            """,
            accepts,
        ]
        try listener.run()
        defer {
            kill(listener.processIdentifier, SIGKILL)
            listener.waitUntilExit()
        }
        func acceptCount() -> Int {
            ((try? String(contentsOfFile: accepts, encoding: .utf8)) ?? "").split(separator: "\n").count
        }
        #expect(await eventually(timeout: 10) { AMQPPeer.accepts(port: port) }, "the listener never listened")
        // The listener logs the probe after its accept returns, which can be after the connect did.
        #expect(await eventually(timeout: 10) { acceptCount() >= 1 }, "the listener never logged the probe")
        let probes = acceptCount()

        let worker = try WorkerProcess(
            environment: TestBroker.environment(configuration, storage: WorkerEndToEndTests.storageFolder())
                .merging(["AMQP_URL": "amqp://guest:guest@127.0.0.1:\(port)/%2F"]) { _, new in new })
        // The worker's socket is open and its login waits for an answer.
        #expect(await eventually(timeout: 20) { acceptCount() > probes }, "log:\n\(worker.log.suffix(2000))")
        try await Task.sleep(for: .milliseconds(500))
        #expect(worker.isRunning)
        worker.signal(SIGTERM)
        let status = await worker.waitForExit(timeout: 10)
        #expect(status == 0, "log:\n\(worker.log.suffix(2000))")
        #expect(worker.log.contains("shutdown began while connecting to the broker"), "\(worker.log.suffix(2000))")
    }
}
