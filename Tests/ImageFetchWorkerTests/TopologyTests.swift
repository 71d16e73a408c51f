import Testing
@testable import ImageFetchWorker

@Suite struct TopologyTests {
    @Test func classicTopology() {
        let topology = Topology(configuration: WorkerConfiguration())
        #expect(topology.queues.map(\.name) == [
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
