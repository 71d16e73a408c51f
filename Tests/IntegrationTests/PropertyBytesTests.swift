import Foundation
import ImageFetchWorker
import Testing

/// Short-string properties that are not UTF-8. RabbitMQ does not check them, and a producer may
/// set bytes there (a Go client's binary correlation id). The worker reads them as text, so it
/// cannot copy them as they came: the job is rejected unread, and the jobs queue's dead-letter
/// exchange moves it with its bytes. Published and read back through pika.
@Suite("Properties that are not UTF-8", .serialized)
struct PropertyBytesTests {
    /// Failed before the fix: the job ran, and its result carried a repaired `correlation_id`
    /// (U+FFFD for each bad byte); a longer one no longer fitted in a short string, and a job whose
    /// image was stored ended in `queue.dead` as `properties_too_large`.
    @Test(.timeLimit(.minutes(2)))
    func aJobWithSuchAPropertyIsDeadLetteredAsItCame() async throws {
        let origin = try await TestOrigin.start()
        let configuration = try TestBroker.configuration("notutf8prop")
        defer { TestBroker.cleanUp(configuration) }
        let url = try #require(TestBroker.url)
        _ = try TestBroker.publish(configuration, bodies: [])  // declare the topology
        let body = String(decoding: JobPublisher.jobBody(id: "binary", url: origin.url("/ok.png")), as: UTF8.self)
        let (worker, results) = try await AMQPContractTests.runAmongThreeJobs(
            configuration, url: url, origin: origin, body: body, headers: WireTable.encode([]),
            properties: ["correlation_id": "hex:fffe01", "app_id": "producer"])
        defer { results.close() }
        let dead = try #require(try await AMQPContractTests.deadLetter(configuration, url: url))
        #expect(dead.properties["correlation_id"] == "hex:fffe01")
        #expect(dead.properties["app_id"] == "producer")
        #expect(dead.body == Array(body.utf8))
        let headers = try #require(WireTable.split(dead.headers))
        #expect(headers["x-death"] != nil, "rejected to the dead-letter exchange, not a copy")
        #expect(!results.objects.contains { $0["id"] as? String == "binary" })
        #expect(worker.log.contains("correlation_id"), "log:\n\(worker.log.suffix(2000))")
        #expect(worker.isRunning)
        #expect(await worker.stop() == 0)
        try await origin.shutdown()
    }

    /// A job over `queue.max_job_bytes` gets a dead copy that the worker writes from what it read;
    /// with such a property, that copy would not be the job as it came. Failed before the fix: the
    /// copy's `correlation_id` was the repaired text.
    @Test(.timeLimit(.minutes(2)))
    func aTooLargeJobWithSuchAPropertyIsRejectedAsItCame() async throws {
        let configuration = try TestBroker.configuration("notutf8big")
        defer { TestBroker.cleanUp(configuration) }
        let url = try #require(TestBroker.url)
        _ = try TestBroker.publish(configuration, bodies: [])  // declare the topology
        let body = #"{"id":"big","url":"http://a.test/","p":"\#(String(repeating: "x", count: 4096))"}"#
        try AMQPPeer.publish(
            url: url, queue: configuration.queue.jobs, body: body, headers: WireTable.encode([]),
            properties: ["correlation_id": "hex:c328"])
        let worker = try WorkerProcess(
            environment: TestBroker.environment(configuration, storage: WorkerEndToEndTests.storageFolder())
                .merging(["QUEUE_MAX_JOB_BYTES": "1024"]) { _, new in new })
        let dead = try #require(try await AMQPContractTests.deadLetter(configuration, url: url, within: 20))
        #expect(dead.properties["correlation_id"] == "hex:c328")
        #expect(dead.body == Array(body.utf8))
        let headers = try #require(WireTable.split(dead.headers))
        #expect(headers["x-death"] != nil, "rejected to the dead-letter exchange, not a copy")
        #expect(worker.isRunning)
        #expect(await worker.stop() == 0)
        #expect(try AMQPPeer.depth(configuration.queue.jobs) == 0)
    }
}
