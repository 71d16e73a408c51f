import Foundation
import ImageFetchWorker
import Logging
import Testing

/// The library in the test's own process: no signal handler, no exit, nothing global. The drain
/// reports its exit status to the caller instead of ending the process.
@Suite(.enabled(if: TestBroker.isAvailable, "needs the RabbitMQ that `make test` starts"), .serialized)
struct InProcessWorkerTests {
    @Test(.timeLimit(.minutes(4)))
    func aWorkerRunsAndDrainsInsideTheTestProcess() async throws {
        let origin = try await TestOrigin.start()
        var configuration = try TestBroker.configuration("in-process")
        defer { TestBroker.cleanUp(configuration) }
        configuration.storage.kind = .none
        configuration.http.port = 0
        configuration.worker.concurrency = 4
        configuration.worker.drainTimeout = 5
        let ids = (0..<50).map { "ip-\($0)" }
        #expect(
            try TestBroker.publish(
                configuration, bodies: ids.map { JobPublisher.jobBody(id: $0, url: origin.url("/ok.png?n=\($0)")) })
                == ids.count)
        let results = try QueueCollector(configuration, queue: configuration.queue.results)
        defer { results.close() }

        let worker = try Worker(configuration: configuration, logger: Logger(label: "test.in-process"))
        try worker.start()
        await results.wait(for: ids.count, timeout: 60)
        #expect(Set(results.objects.compactMap { $0["id"] as? String }) == Set(ids))
        // A job counts as succeeded once its result is confirmed, which can come after the
        // collector already has the result: wait for the count rather than race it.
        #expect(
            await eventually(timeout: 10) { worker.stats.snapshot.succeeded == ids.count },
            "succeeded: \(worker.stats.snapshot.succeeded)")

        let status: Int32 = await withCheckedContinuation { continuation in
            worker.shutdown { continuation.resume(returning: $0) }
        }
        #expect(status == 0)
        #expect(!worker.isReady)
        try await origin.shutdown()
    }
}
