import Testing

@testable import ImageFetchWorker

@Suite struct TopologyTests {
    @Test func classicTopology() {
        let topology = Topology(configuration: WorkerConfiguration())
        #expect(
            topology.queues.map(\.name) == [
                "image-fetch.dead", "image-fetch.results", "image-fetch.jobs",
                "image-fetch.jobs.retry.5s", "image-fetch.jobs.retry.30s", "image-fetch.jobs.retry.2m",
                "image-fetch.jobs.defer.1s", "image-fetch.jobs.defer.2s", "image-fetch.jobs.defer.5s",
                "image-fetch.jobs.defer.10s", "image-fetch.jobs.defer.30s", "image-fetch.jobs.defer.1m",
            ])
        let jobs = topology.queues[2]
        #expect(jobs.arguments["x-dead-letter-exchange"] == .string(""))
        #expect(jobs.arguments["x-dead-letter-routing-key"] == .string("image-fetch.dead"))
        #expect(jobs.arguments["x-queue-type"] == nil)
        let retry = topology.queues[3]
        #expect(retry.arguments["x-message-ttl"] == .int(5000))
        #expect(retry.arguments["x-dead-letter-routing-key"] == .string("image-fetch.jobs"))
        // Deferral delay queues return their jobs to the jobs queue the same way.
        let deferral = topology.queues[7]
        #expect(deferral.arguments["x-message-ttl"] == .int(2000))
        #expect(deferral.arguments["x-dead-letter-routing-key"] == .string("image-fetch.jobs"))
    }

    @Test func quorumTopologyDeclaresDeliveryLimit() {
        var configuration = WorkerConfiguration()
        configuration.queue.type = .quorum
        configuration.queue.deliveryLimit = 7
        let topology = Topology(configuration: configuration)
        #expect(topology.queues.allSatisfy { $0.arguments["x-queue-type"] == .string("quorum") })
        #expect(topology.queues[2].arguments["x-delivery-limit"] == .int(7))
    }

    /// A TTL hop through a quorum queue is at-least-once only with these two arguments.
    @Test func quorumDelayQueuesDeadLetterAtLeastOnce() {
        var configuration = WorkerConfiguration()
        configuration.queue.type = .quorum
        let queues = Topology(configuration: configuration).queues
        let retries = queues.filter { $0.name.contains(".retry.") }
        let deferrals = queues.filter { $0.name.contains(".defer.") }
        #expect(retries.count == 3)
        #expect(!deferrals.isEmpty)
        for queue in retries + deferrals {
            #expect(queue.arguments["x-dead-letter-strategy"] == .string("at-least-once"), "\(queue.name)")
            #expect(queue.arguments["x-overflow"] == .string("reject-publish"), "\(queue.name)")
            #expect(queue.mayExistWithOtherArguments)
        }
        let delay = Topology.delayQueueArguments(type: .quorum, delayMilliseconds: 1500, deadLetterRoutingKey: "q")
        #expect(
            delay == [
                "x-queue-type": .string("quorum"), "x-message-ttl": .int(1500), "x-dead-letter-exchange": .string(""),
                "x-dead-letter-routing-key": .string("q"), "x-dead-letter-strategy": .string("at-least-once"),
                "x-overflow": .string("reject-publish"),
            ])
    }

    /// Classic queues have no at-least-once dead-lettering: their delay queues keep the plain arguments.
    @Test func classicDelayQueuesKeepThePlainArguments() {
        let delay = Topology.delayQueueArguments(type: .classic, delayMilliseconds: 5000, deadLetterRoutingKey: "q")
        #expect(
            delay == [
                "x-message-ttl": .int(5000), "x-dead-letter-exchange": .string(""),
                "x-dead-letter-routing-key": .string("q"),
            ])
        #expect(
            Topology(configuration: WorkerConfiguration()).queues.filter {
                !$0.name.contains(".retry.") && !$0.name.contains(".defer.")
            }
            .allSatisfy { !$0.mayExistWithOtherArguments })
    }

    @Test func compactDurations() {
        #expect(Topology.compactDuration(5) == "5s")
        #expect(Topology.compactDuration(90) == "90s")
        #expect(Topology.compactDuration(120) == "2m")
        #expect(Topology.compactDuration(7200) == "2h")
    }

    @Test func amqpURLNeverPrintsItsPassword() {
        let url = AMQPURL(host: "broker", user: "app", password: "s3cret", vhost: "/")
        #expect(!url.description.contains("s3cret"))
        #expect(url.description == "amqp://app:***@broker:5672/%2F")
    }
}
