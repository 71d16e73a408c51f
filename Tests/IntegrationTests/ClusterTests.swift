import Foundation
import ImageFetchWorker
import Testing

/// Data safety on a real three-node RabbitMQ cluster (TestCluster, started once for the suite):
/// a node's Erlang VM killed mid-run, and a memory alarm mid-run, against worker processes on
/// quorum queues. Under scripts/test.sh the suite always runs; a cluster that cannot start fails it.
@Suite(.enabled(if: TestBroker.script != nil, "needs scripts/rabbitmq.sh, which `make test` provides"), .serialized)
struct ClusterTests {
    /// A test's configuration on the cluster, quorum queues, publishing and declaring through `node`.
    static func configuration(_ name: String, cluster: TestCluster, node: Int = 1) throws -> WorkerConfiguration {
        var configuration = try TestBroker.configuration(name)
        configuration.amqp.urls = try AMQPURL.parseList(cluster.amqpURL(startingAt: node))
        configuration.queue.type = .quorum
        return configuration
    }

    /// A worker process on the cluster, connecting to `node` first.
    static func worker(
        _ configuration: WorkerConfiguration, cluster: TestCluster, node: Int,
        extra: [String: String] = [:]
    ) throws -> WorkerProcess {
        let environment = TestBroker.environment(configuration, storage: WorkerEndToEndTests.storageFolder())
            .merging(["AMQP_URL": cluster.amqpURL(startingAt: node)]) { _, new in new }
            .merging(extra) { _, new in new }
        return try WorkerProcess(environment: environment)
    }

    /// Result bodies by job id: how often each id was answered, and with which status. The results
    /// are read through pika (PeerCollector), not the worker's own AMQP client.
    static func tally(_ collector: PeerCollector) -> (ok: Set<String>, answers: Int, notOK: [String]) {
        var ok = Set<String>()
        var notOK: [String] = []
        let objects = collector.objects
        for object in objects {
            guard let id = object["id"] as? String else { continue }
            if object["status"] as? String == "ok" { ok.insert(id) } else { notOK.append(id) }
        }
        return (ok, objects.count, notOK)
    }

    // The limit includes the cluster's start on first use: 20-30 s on a quiet machine, 6 min on
    // two cores shared with parallel Swift builds.
    @Test(.timeLimit(.minutes(12)))
    func killingANodeMidRunLosesNoJob() async throws {
        let cluster = try TestCluster.shared()
        let origin = try await TestOrigin.start(threads: 2)
        let configuration = try Self.configuration("cfail", cluster: cluster)
        let prefetch = 32
        let ids = (0..<3000).map { "c\($0)" }
        #expect(
            try TestBroker.publish(
                configuration, bodies: ids.map { JobPublisher.jobBody(id: $0, url: origin.url("/slow?ms=5&n=\($0)")) })
                == ids.count)
        // The collector reads through node 3, which stays up; node 1, which leads the queues (they
        // were declared through it), is the one killed.
        let results = try PeerCollector(urls: cluster.amqpURL(startingAt: 3), queue: configuration.queue.results)
        defer { results.close() }
        let extra = ["WORKER_CONCURRENCY": "16", "AMQP_PREFETCH": "\(prefetch)", "AMQP_HEARTBEAT": "5"]
        let workers = try (1...3).map { try Self.worker(configuration, cluster: cluster, node: $0, extra: extra) }
        defer { for worker in workers { worker.signal(SIGKILL) } }
        let logs = {
            workers.enumerated().map { "worker \($0.offset + 1):\n\($0.element.log.suffix(1500))" }.joined(
                separator: "\n")
        }

        #expect(await eventually(timeout: 90) { results.received.count >= 800 }, "\(logs())")
        let killedAt = results.received.count
        #expect(try cluster.node(1, ["kill9"]) == 0)
        // The surviving nodes keep the work going while node 1 is down.
        #expect(
            await eventually(timeout: 60) { results.received.count >= killedAt + 300 },
            "no progress without node 1:\n\(logs())")
        #expect(try cluster.node(1, ["start"]) == 0, "node 1 did not come back")

        let finished = await eventually(timeout: 120) { Self.tally(results).ok.count == ids.count }
        let tally = Self.tally(results)
        #expect(
            finished,
            "\(ids.count - tally.ok.count) jobs never answered ok; missing e.g. \(Set(ids).subtracting(tally.ok).sorted().prefix(10))\n\(logs())"
        )
        #expect(tally.ok == Set(ids))
        #expect(tally.notOK.isEmpty, "answered not ok: \(tally.notOK.prefix(10))")
        let duplicates = tally.answers - tally.ok.count
        print(
            "cluster failover: \(ids.count) jobs, \(tally.answers) results, \(duplicates) duplicates "
                + "(node 1 killed after \(killedAt) results; prefetch \(prefetch) a worker)")
        // A kill -9 returns at most the killed connection's unacked window; a duplicate is a job
        // of that window whose result was confirmed before its ack reached the dead node.
        #expect(duplicates <= prefetch, "\(duplicates) duplicates: more than one prefetch window (\(prefetch))")

        // Nothing is left queued once node 1 is back: no ready or unacked job, no retry, no dead letter.
        var leftover = ""
        let drained = await eventually(timeout: 30) {
            leftover = ""
            for (name, depth) in (try? cluster.queues(through: 1)) ?? [:]
            where name.hasPrefix(configuration.queue.jobs) || name == configuration.queue.dead {
                if depth.ready + depth.unacked > 0 {
                    leftover += "\(name): \(depth.ready) ready, \(depth.unacked) unacked\n"
                }
            }
            return leftover.isEmpty
        }
        #expect(drained, "left queued:\n\(leftover)")
        for worker in workers {
            #expect(worker.isRunning, "a worker exited:\n\(worker.log.suffix(2000))")
            #expect(await worker.stop() == 0)
        }
        for queue in QueueDepth.queueNames(configuration) { _ = try? cluster.ctl(1, ["delete_queue", queue]) }
        try await origin.shutdown()
    }

    @Test(.timeLimit(.minutes(12)))
    func aMemoryAlarmPausesTheWorkerUntilItClears() async throws {
        let cluster = try TestCluster.shared()
        let origin = try await TestOrigin.start(threads: 2)
        let configuration = try Self.configuration("calarm", cluster: cluster, node: 2)
        // The broker blocks a connection when it next publishes, so results must still be flowing
        // when the alarm goes up, however long rabbitmqctl takes (seconds on a quiet machine, a
        // minute under a parallel build): 4,000 jobs paced at 100 ms with 4 permits last 100 s.
        // Once the alarm is over, the pace drops to nothing and the rest finish at once.
        origin.setPace(milliseconds: 100)
        let ids = (0..<4000).map { "m\($0)" }
        #expect(
            try TestBroker.publish(
                configuration, bodies: ids.map { JobPublisher.jobBody(id: $0, url: origin.url("/paced?n=\($0)")) })
                == ids.count)
        let results = try PeerCollector(urls: cluster.amqpURL(startingAt: 2), queue: configuration.queue.results)
        defer { results.close() }
        let port = try TestBroker.freePort()
        let worker = try Self.worker(
            configuration, cluster: cluster, node: 2,
            extra: ["WORKER_CONCURRENCY": "4", "HTTP_PORT": "\(port)", "HTTP_HOST": "127.0.0.1"])
        let endpoint = try OperationsEndpoint(port: port)
        let pid = worker.process.processIdentifier
        defer {
            // Whatever happens, the next test gets a cluster without an alarm.
            _ = try? cluster.ctl(2, ["set_vm_memory_high_watermark", "0.4"])
        }
        #expect(await eventuallyAsync(timeout: 30) { await endpoint.readiness() == 200 }, "never ready:\n\(worker.log)")
        #expect(await eventually(timeout: 60) { results.received.count >= 50 }, "log:\n\(worker.log.suffix(2000))")

        // A watermark far below what the node uses raises the memory alarm at the next check (1 s).
        _ = try cluster.ctl(2, ["set_vm_memory_high_watermark", "0.000001"])
        #expect(
            await eventuallyAsync(timeout: 30) { await endpoint.readiness() == 503 },
            "/readyz stayed 200 under the alarm:\n\(worker.log.suffix(2000))")
        let blocked = await endpoint.metrics()
        #expect(blocked["image_fetch_broker_blocked"] == 1)
        // Paused: once the fetches admitted before the block have ended, the origin sees no request.
        try await Task.sleep(for: .seconds(1))
        let requestsWhileBlocked = origin.stats.requests
        try await Task.sleep(for: .seconds(3))
        #expect(origin.stats.requests == requestsWhileBlocked, "fetches went on under the alarm")
        #expect(results.received.count < ids.count, "every job finished before the alarm took effect")

        _ = try cluster.ctl(2, ["set_vm_memory_high_watermark", "0.4"])
        origin.setPace(milliseconds: 0)
        #expect(
            await eventuallyAsync(timeout: 30) { await endpoint.readiness() == 200 },
            "/readyz did not recover:\n\(worker.log.suffix(2000))")
        let finished = await eventually(timeout: 90) { Self.tally(results).ok.count == ids.count }
        #expect(
            finished,
            "\(ids.count - Self.tally(results).ok.count) jobs unanswered after the alarm:\n\(worker.log.suffix(2000))")
        #expect(Self.tally(results).ok == Set(ids))
        #expect(worker.isRunning && worker.process.processIdentifier == pid, "the worker restarted")
        #expect(worker.log.contains("blocked the connection"))
        #expect(worker.log.contains("unblocked the connection"))
        #expect(
            !worker.log.contains("lost the broker connection"),
            "the alarm cost a reconnect:\n\(worker.log.suffix(2000))")
        #expect(await worker.stop() == 0)
        for queue in QueueDepth.queueNames(configuration) { _ = try? cluster.ctl(2, ["delete_queue", queue]) }
        try await origin.shutdown()
    }
}
