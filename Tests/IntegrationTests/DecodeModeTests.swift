import Foundation
import ImageFetchWorker
import Testing

/// `image.verify = decode` end to end: a worker process, the real broker and a real origin.
@Suite(.enabled(if: TestBroker.isAvailable, "needs the RabbitMQ that `make test` starts"), .serialized)
struct DecodeModeTests {
    @Test(.timeLimit(.minutes(2)))
    func decodeModeAddsDecodedFactsAndRefusesPixelsThatDoNotDecode() async throws {
        let origin = try await TestOrigin.start()
        let configuration = try TestBroker.configuration("decode")
        defer { TestBroker.cleanUp(configuration) }
        let jobs = [
            ("turned", origin.url("/fixture/decode-plasma-exif6.jpg")),
            // Its chunks and CRCs are right, its IDAT is filler: the structure walk accepts it.
            ("filler", origin.url("/ok.png")),
        ]
        let bodies = jobs.map { JobPublisher.jobBody(id: $0.0, url: $0.1) }
        #expect(try TestBroker.publish(configuration, bodies: bodies) == 2)
        let results = try QueueCollector(configuration, queue: configuration.queue.results)
        defer { results.close() }
        let storage = TestScratch.path("decode-\(UUID().uuidString)")
        let worker = try WorkerProcess(
            environment: TestBroker.environment(configuration, storage: storage)
                .merging(["IMAGE_VERIFY": "decode", "STORAGE_KIND": "none"]) { _, new in new })
        await results.wait(for: 2, timeout: 60)
        let byID = Dictionary(results.objects.map { ($0["id"] as? String ?? "", $0) }) { a, _ in a }
        let turned = try #require(byID["turned"], "worker log:\n\(worker.log.suffix(2000))")
        #expect(turned["status"] as? String == "ok", "\(turned)")
        #expect(turned["width"] as? Int == 64 && turned["height"] as? Int == 96)
        #expect(turned["decoded_width"] as? Int == 96 && turned["decoded_height"] as? Int == 64)
        #expect((turned["dhash"] as? String)?.count == 16)
        let filler = try #require(byID["filler"])
        let error = try #require(filler["error"] as? [String: Any])
        #expect(error["code"] as? String == "corrupt_image", "\(filler)")
        #expect(filler["dhash"] == nil)
        #expect(await worker.stop() == 0)
        try await origin.shutdown()
    }
}
