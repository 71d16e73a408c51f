import Foundation
import ImageFetchWorker
import Testing

/// One fetch per URL, one object per content (issue 35, item 3), with a real broker and the test
/// origin on loopback. The origin answers after 300 ms, so jobs published together overlap: the
/// first leads the fetch, the others follow it. Requests are counted by the origin itself.
@Suite(.enabled(if: TestBroker.isAvailable, "needs the RabbitMQ that `make test` starts"), .serialized)
struct SharedFetchTests {
    private static func body(_ fields: [String: Any]) throws -> [UInt8] {
        Array(try JSONSerialization.data(withJSONObject: fields, options: [.sortedKeys]))
    }

    /// A worker on a fresh topology whose jobs are already queued, and the results it publishes.
    private static func run(
        _ name: String, jobs: [[String: Any]], storage: String, expecting count: Int
    ) async throws -> (results: [[String: Any]], log: String) {
        let configuration = try TestBroker.configuration(name)
        defer { TestBroker.cleanUp(configuration) }
        // Published before anything consumes, so that the worker receives them together.
        #expect(try TestBroker.publish(configuration, bodies: jobs.map(Self.body)) == jobs.count)
        let results = try QueueCollector(configuration, queue: configuration.queue.results)
        defer { results.close() }
        let worker = try WorkerProcess(
            environment: TestBroker.environment(configuration, storage: storage).merging([
                "WORKER_CONCURRENCY": "8", "AMQP_PREFETCH": "200",
            ]) { _, new in new })
        let done = await eventually(timeout: 60) { results.objects.count >= count }
        let log = worker.log
        #expect(done, "\(results.objects.count) results; worker log:\n\(log.suffix(3000))")
        #expect(await worker.stop() == 0)
        return (results.objects, log)
    }

    @Test(.timeLimit(.minutes(3)))
    func fiftyJobsForOneURLMakeOneRequestAndFiftyResults() async throws {
        let origin = try await TestOrigin.start()
        let storage = WorkerEndToEndTests.storageFolder()
        let url = origin.url("/slow?ms=300&case=fifty")
        let jobs: [[String: Any]] = (0..<50).map { ["id": "same-\($0)", "url": url] }
        let (results, log) = try await Self.run("shared-fifty", jobs: jobs, storage: storage, expecting: 50)

        #expect(origin.stats.requests == 1, "the origin saw \(origin.stats.requests) requests")
        #expect(Set(results.compactMap { $0["id"] as? String }).count == 50)
        #expect(results.allSatisfy { $0["status"] as? String == "ok" }, "\(results.prefix(3))")
        let digests = Set(results.compactMap { $0["sha256"] as? String })
        #expect(digests.count == 1, "\(digests)")
        let locations = Set(results.compactMap { $0["location"] as? String })
        #expect(locations.count == 1, "\(locations)")
        let stored = results.compactMap { $0["stored"] as? Bool }
        #expect(stored.count == 50 && stored.filter { $0 }.count == 1, "stored: \(stored)")
        // The one object holds the origin's bytes.
        let path = try #require(locations.first).replacingOccurrences(of: "file://", with: "")
        #expect(FileManager.default.contents(atPath: path).map { [UInt8]($0) } == TestOrigin.okBody)
        #expect(results.allSatisfy { $0["attempt"] as? Int == 1 })
        #expect(!log.contains("\"level\":\"error\""), "\(log.suffix(2000))")
        try await origin.shutdown()
    }

    @Test(.timeLimit(.minutes(3)))
    func aFailureSharedBySeveralJobsFailsEachWithTheSameCode() async throws {
        let origin = try await TestOrigin.start()
        let storage = WorkerEndToEndTests.storageFolder()
        let url = origin.url("/status/404?ms=300")
        let jobs: [[String: Any]] = (0..<5).map { ["id": "missing-\($0)", "url": url] }
        let (results, _) = try await Self.run("shared-404", jobs: jobs, storage: storage, expecting: 5)

        #expect(origin.stats.requests == 1, "the origin saw \(origin.stats.requests) requests")
        #expect(results.count == 5)
        for result in results {
            #expect(result["status"] as? String == "failed", "\(result)")
            #expect(result["http_status"] as? Int == 404, "\(result)")
            let error = result["error"] as? [String: Any]
            #expect(error?["code"] as? String == "http_error", "\(result)")
            #expect(result["location"] == nil && result["stored"] == nil, "\(result)")
        }
        try await origin.shutdown()
    }

    @Test(.timeLimit(.minutes(3)))
    func keyedJobsShareTheFetchButEachGetsItsOwnObject() async throws {
        let origin = try await TestOrigin.start()
        let storage = WorkerEndToEndTests.storageFolder()
        let url = origin.url("/slow?ms=300&case=keyed")
        // A key in the content-address namespace that is not this body's own: never used.
        let foreign = "00/" + String(repeating: "0", count: 64) + ".png"
        let jobs: [[String: Any]] = [
            ["id": "plain", "url": url],
            ["id": "keyed", "url": url, "key": "mine/keyed.png"],
            ["id": "foreign-key", "url": url, "key": foreign],
            // Another request for the same URL (it sends If-None-Match): a fetch of its own.
            ["id": "with-etag", "url": url, "etag": "\"v0\""],
        ]
        let (results, log) = try await Self.run("shared-keyed", jobs: jobs, storage: storage, expecting: 4)
        func result(_ id: String) -> [String: Any]? { results.first { $0["id"] as? String == id } }

        #expect(origin.stats.requests == 2, "the origin saw \(origin.stats.requests) requests")
        let plain = try #require(result("plain"), "\(log.suffix(2000))")
        let keyed = try #require(result("keyed"))
        let foreignKey = try #require(result("foreign-key"))
        let withETag = try #require(result("with-etag"))
        for each in [plain, keyed, foreignKey, withETag] {
            #expect(each["status"] as? String == "ok", "\(each)")
        }
        #expect(keyed["location"] as? String == "file://" + storage + "/mine/keyed.png", "\(keyed)")
        #expect(keyed["stored"] as? Bool == true)
        let keyedBytes = FileManager.default.contents(atPath: storage + "/mine/keyed.png").map { [UInt8]($0) }
        #expect(keyedBytes == TestOrigin.okBody)
        // The foreign key falls back to the body's own content address, shared with the plain job.
        #expect(foreignKey["location"] as? String == plain["location"] as? String, "\(foreignKey)")
        #expect(!FileManager.default.fileExists(atPath: storage + "/" + foreign))
        // The follower stores after its leader: the object is there, nothing is written again.
        // (The other fetch's job may race the leader to write it, so its flag is not checked.)
        #expect(foreignKey["stored"] as? Bool == false, "\(foreignKey)")
        #expect(withETag["location"] as? String == plain["location"] as? String, "\(withETag)")
        try await origin.shutdown()
    }
}

extension SharedFetchTests {
    /// Tenants fetch apart: a follower waits on its leader's admission, so a job of an uncapped
    /// tenant that followed a capped tenant's leader would wait behind that tenant's cap.
    @Test(.timeLimit(.minutes(3)))
    func jobsOfTwoTenantsForOneURLFetchApart() async throws {
        let origin = try await TestOrigin.start()
        let storage = WorkerEndToEndTests.storageFolder()
        let url = origin.url("/slow?ms=300&case=tenants")
        let jobs: [[String: Any]] =
            (0..<3).map { ["id": "acme-\($0)", "url": url, "tenant": "acme"] }
            + (0..<3).map { ["id": "globex-\($0)", "url": url, "tenant": "globex"] }
            + (0..<2).map { ["id": "default-\($0)", "url": url] }
        let (results, log) = try await Self.run("shared-tenants", jobs: jobs, storage: storage, expecting: 8)

        #expect(origin.stats.requests == 3, "the origin saw \(origin.stats.requests) requests")
        #expect(results.count == 8)
        #expect(results.allSatisfy { $0["status"] as? String == "ok" }, "\(results.prefix(3))\n\(log.suffix(2000))")
        try await origin.shutdown()
    }
}
