import Foundation
import ImageFetchWorker
import Testing

/// Tenants end to end (issue 35, item 4): the worker process, the real RabbitMQ of `make test`, and
/// origins on loopback whose fetches take time, so that the permits are scarce.
@Suite(.enabled(if: TestBroker.isAvailable, "needs the RabbitMQ that `make test` starts"), .serialized)
struct TenantFairnessTests {
    static func body(_ id: String, _ url: String, tenant: String) -> [UInt8] {
        Array(#"{"id":"\#(id)","url":"\#(url)","tenant":"\#(tenant)"}"#.utf8)
    }

    static func waitForResults(_ results: QueueCollector, _ count: Int, timeout: Double) async -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if results.objects.count >= count { return true }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return false
    }

    /// Two tenants on one origin, the big one with ten times the jobs and published first: while both
    /// have work, the small one gets about half the results, not the tenth its jobs would get in
    /// arrival order.
    @Test(.timeLimit(.minutes(3)))
    func aSmallTenantKeepsItsShareBesideABigOne() async throws {
        let origin = try await SchedulingOrigin.start(host: "127.0.0.21", .init(delay: .milliseconds(150)))
        let configuration = try TestBroker.configuration("tenants")
        defer { TestBroker.cleanUp(configuration) }
        #expect(try TestBroker.publish(configuration, bodies: []) == 0)  // declares the queues
        let results = try QueueCollector(configuration, queue: configuration.queue.results)
        defer { results.close() }
        var bodies = (0..<200).map { Self.body("big-\($0)", origin.url("/big-\($0).png"), tenant: "big") }
        bodies += (0..<20).map { Self.body("small-\($0)", origin.url("/small-\($0).png"), tenant: "small") }
        #expect(try TestBroker.publish(configuration, bodies: bodies) == bodies.count)
        // The whole backlog fits the window, so both tenants' jobs are at the worker from the start.
        let worker = try WorkerProcess(
            environment: TestBroker.environment(configuration, storage: OriginSchedulingTests.storage())
                .merging(["WORKER_CONCURRENCY": "4", "AMQP_PREFETCH": "256"]) { _, new in new })
        #expect(
            await Self.waitForResults(results, bodies.count, timeout: 60), "worker log:\n\(worker.log.suffix(2000))")
        let ids = results.objects.map { $0["id"] as? String ?? "" }
        #expect(results.objects.allSatisfy { $0["status"] as? String == "ok" })
        let lastSmall = try #require(ids.lastIndex { $0.hasPrefix("small-") })
        // Counted after the first 4 results: those jobs took the permits before the small tenant's
        // arrived, and on a slow machine the next round can go the same way (arrival order).
        let counted = ids[4...lastSmall]
        let share = Double(counted.count { $0.hasPrefix("small-") }) / Double(counted.count)
        print("tenants: the small tenant had \(Int(share * 100)) % of results 5 to \(lastSmall + 1)")
        #expect(share >= 0.4, "the small tenant had \(share) of the results while both had work")
        #expect(await worker.stop() == 0)
        try await origin.shutdown()
    }

    /// `scheduler.tenant_limits` holds a tenant to its cap,
    /// while the permits it leaves go to the other tenant.
    @Test(.timeLimit(.minutes(3)))
    func aTenantCapHoldsItsTenantOnly() async throws {
        let capped = try await SchedulingOrigin.start(host: "127.0.0.22", .init(delay: .milliseconds(200)))
        let free = try await SchedulingOrigin.start(host: "127.0.0.23", .init(delay: .milliseconds(200)))
        let configuration = try TestBroker.configuration("tenantcap")
        defer { TestBroker.cleanUp(configuration) }
        #expect(try TestBroker.publish(configuration, bodies: []) == 0)  // declares the queues
        let results = try QueueCollector(configuration, queue: configuration.queue.results)
        defer { results.close() }
        var bodies = (0..<24).map { Self.body("c-\($0)", capped.url("/c-\($0).png"), tenant: "capped") }
        bodies += (0..<24).map { Self.body("f-\($0)", free.url("/f-\($0).png"), tenant: "free") }
        #expect(try TestBroker.publish(configuration, bodies: bodies) == bodies.count)
        let worker = try WorkerProcess(
            environment: TestBroker.environment(configuration, storage: OriginSchedulingTests.storage())
                .merging([
                    "WORKER_CONCURRENCY": "8", "AMQP_PREFETCH": "64", "SCHEDULER_TENANT_LIMITS": "capped=2",
                ]) { _, new in new })
        #expect(
            await Self.waitForResults(results, bodies.count, timeout: 60), "worker log:\n\(worker.log.suffix(2000))")
        #expect(results.objects.allSatisfy { $0["status"] as? String == "ok" })
        print("tenant cap: capped tenant at most \(capped.log.maxServing) at once, the other \(free.log.maxServing)")
        #expect(capped.log.maxServing == 2)
        #expect(free.log.maxServing > 2)
        #expect(await worker.stop() == 0)
        try await capped.shutdown()
        try await free.shutdown()
    }
}
