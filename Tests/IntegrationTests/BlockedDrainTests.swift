import Foundation
import ImageFetchWorker
import Testing

extension BrokerBehaviourTests {
    /// SIGTERM while a memory alarm blocks the connection, and the alarm clears during the drain.
    /// The drain's `basic.cancel` is not sent to a blocked connection, and it was not sent after
    /// the unblock either: the consumer stayed, so every delivery the drain handed back (nacked
    /// with requeue) came straight back to it, thousands a second until the close. On a quorum
    /// queue each return counts towards `x-delivery-limit`, and jobs were dead-lettered unrun.
    @Test(.timeLimit(.minutes(3)))
    func aDrainThatOutlastsTheBrokersBlockHandsEachDeliveryBackOnce() async throws {
        let configuration = try TestBroker.configuration("blocked-drain")
        defer { TestBroker.cleanUp(configuration) }
        let run = try await Self.pacedRun(
            configuration, jobs: 200, paceMilliseconds: 100,
            // The drain waits for the jobs whose results the block holds: a long one, so that the
            // unblock falls inside it even when rabbitmqctl takes its time on a busy machine.
            environment: ["WORKER_CONCURRENCY": "4", "WORKER_DRAIN_TIMEOUT": "30"])
        let (origin, results, endpoint, worker) = (run.origin, run.results, run.endpoint, run.worker)
        defer { results.close() }
        #expect(await eventually(timeout: 30) { results.received.count >= 20 }, "log:\n\(worker.log.suffix(2000))")
        let script = try #require(TestBroker.script)
        defer { _ = try? TestBroker.run(script, ["ctl", "set_vm_memory_high_watermark", "0.4"]) }
        // Fetches that outlast the block, so that the drain is still waiting when it ends.
        origin.setPace(milliseconds: 6_000)
        try Self.ctl(["set_vm_memory_high_watermark", "0.000001"])
        #expect(
            await eventuallyAsync(timeout: 20) { await endpoint.readiness() == 503 }, "log:\n\(worker.log.suffix(2000))"
        )
        // Let a result reach the blocked connection, so that the broker stops reading it.
        try await Task.sleep(for: .seconds(2))
        worker.signal(SIGTERM)
        try await Task.sleep(for: .seconds(1))
        try Self.ctl(["set_vm_memory_high_watermark", "0.4"])
        let status = await worker.waitForExit(timeout: 60)
        #expect(status != nil, "still running 60 s after SIGTERM; log:\n\(worker.log.suffix(3000))")
        #expect(worker.log.contains("consumer cancelled"), "the cancel never went out after the unblock")
        if status == nil { _ = await worker.stop(grace: 90) }
        // The last summary counts the deliveries handed back: each job at most once or twice
        // (the prefetch window is 8), not again and again.
        let summary = worker.log.split(separator: "\n").last { $0.hasSuffix("] summary") }.map(String.init) ?? ""
        let requeued = summary.firstMatch(of: /requeued=(\d+)/).flatMap { Int($0.1) }
        #expect(requeued.map { $0 <= 40 } == true, "summary: \(summary)\nlog:\n\(worker.log.suffix(3000))")
        // Nothing is lost: every job has its result or is back in the queue.
        #expect(
            await eventually(timeout: 10) {
                let left = (try? TestBroker.ready(configuration, queue: configuration.queue.jobs)) ?? 0
                return Set(results.objects.compactMap { $0["id"] as? String }).count + left >= 200
            })
        try await origin.shutdown()
    }
}
