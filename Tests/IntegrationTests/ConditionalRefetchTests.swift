import Foundation
import ImageFetchWorker
import Testing

/// Conditional refetch (issue 35, item 2) with real origins: nginx, which sends ETag and
/// Last-Modified for a static file and answers 304 to a matching If-None-Match or
/// If-Modified-Since, and the test origin, which ignores conditional requests.
@Suite(.enabled(if: TestBroker.isAvailable, "needs the RabbitMQ that `make test` starts"), .serialized)
struct ConditionalRefetchTests {
    private static func body(_ fields: [String: String]) throws -> [UInt8] {
        Array(try JSONSerialization.data(withJSONObject: fields, options: [.sortedKeys]))
    }

    @Test(.timeLimit(.minutes(3)))
    func validatorsComeBackAndARefetchOfTheSameImageStoresNothing() async throws {
        let nginx = try TLSOrigin.start(names: ["refetch.test"])
        defer { nginx.shutdown() }
        let plain = try await TestOrigin.start()
        let configuration = try TestBroker.configuration("refetch")
        defer { TestBroker.cleanUp(configuration) }
        let storage = WorkerEndToEndTests.storageFolder()
        // The first job, published before anything consumes: publishing declares the topology.
        let url = nginx.url("refetch.test")
        #expect(try TestBroker.publish(configuration, bodies: [Self.body(["id": "first", "url": url])]) == 1)
        let results = try QueueCollector(configuration, queue: configuration.queue.results)
        defer { results.close() }
        let worker = try WorkerProcess(
            environment: TestBroker.environment(configuration, storage: storage).merging([
                "FETCH_TLS_CA_FILE": nginx.caFile, "FETCH_RESOLVE": nginx.resolve.joined(separator: ","),
            ]) { _, new in new })
        func result(_ id: String) async -> [String: Any]? {
            _ = await eventually(timeout: 30) { results.objects.contains { $0["id"] as? String == id } }
            return results.objects.first { $0["id"] as? String == id }
        }

        // A first fetch: ok, stored, with nginx's validators.
        let first = try #require(await result("first"), "worker log:\n\(worker.log.suffix(2000))")
        #expect(first["status"] as? String == "ok", "\(first)")
        let etag = try #require(first["etag"] as? String, "\(first)")
        let lastModified = try #require(first["last_modified"] as? String, "\(first)")
        #expect(etag.hasPrefix("\"") && etag.hasSuffix("\""))
        #expect(lastModified.hasSuffix(" GMT"))
        let sha256 = try #require(first["sha256"] as? String)

        // Refetches: by etag, by date (304 each), and with a stale etag (200, stored at its key).
        let bodies = try [
            Self.body(["id": "by-etag", "url": url, "etag": etag, "key": "again/by-etag.png"]),
            Self.body(["id": "by-date", "url": url, "last_modified": lastModified, "key": "again/by-date.png"]),
            Self.body(["id": "stale", "url": url, "etag": "\"stale\"", "key": "again/stale.png"]),
        ]
        #expect(try TestBroker.publish(configuration, bodies: bodies) == 3)
        for id in ["by-etag", "by-date"] {
            let refetch = try #require(await result(id))
            #expect(refetch["status"] as? String == "not_modified", "\(refetch)")
            #expect(refetch["http_status"] as? Int == 304)
            #expect(refetch["etag"] as? String == etag)
            #expect(refetch["location"] == nil && refetch["error"] == nil && refetch["format"] == nil)
            #expect(refetch["attempt"] as? Int == 1)
            #expect(!FileManager.default.fileExists(atPath: storage + "/again/\(id).png"))
        }
        let stale = try #require(await result("stale"))
        #expect(stale["status"] as? String == "ok", "\(stale)")
        #expect(stale["etag"] as? String == etag)
        #expect(FileManager.default.fileExists(atPath: storage + "/again/stale.png"), "\(stale)")
        // nginx writes a request's line after its response went out.
        #expect(await FetchEngineTests.eventually { nginx.accessLog().count >= 4 })
        let statuses = nginx.accessLog().map(\.status)
        #expect(statuses.sorted() == [200, 200, 304, 304], "\(statuses)")

        // An origin that ignores conditional requests: the same bytes are not_modified by their
        // digest, other bytes are ok; validators that break the rules are left out of the result.
        let hostileETag = "%22" + String(repeating: "e", count: 300) + "%22"
        let hostile = plain.url("/validators.png?etag=\(hostileETag)&last_modified=yesterday%20at%20noon")
        let sane = plain.url("/validators.png?etag=%22v2%22&last_modified=Sun,%2006%20Nov%201994%2008:49:37%20GMT")
        let more = try [
            Self.body([
                "id": "same-digest", "url": plain.url("/ok.png"), "sha256": sha256.uppercased(),
                "etag": "\"ignored\"", "key": "again/same-digest.png",
            ]),
            Self.body([
                "id": "other-digest", "url": plain.url("/ok.png"), "sha256": String(repeating: "0", count: 64),
                "key": "again/other-digest.png",
            ]),
            Self.body(["id": "hostile", "url": hostile]),
            Self.body(["id": "sane", "url": sane]),
        ]
        #expect(try TestBroker.publish(configuration, bodies: more) == 4)
        let same = try #require(await result("same-digest"))
        #expect(same["status"] as? String == "not_modified", "\(same)")
        #expect(same["http_status"] as? Int == 200)
        #expect(same["sha256"] as? String == sha256)
        #expect(same["location"] == nil)
        #expect(!FileManager.default.fileExists(atPath: storage + "/again/same-digest.png"))
        let other = try #require(await result("other-digest"))
        #expect(other["status"] as? String == "ok", "\(other)")
        #expect(FileManager.default.fileExists(atPath: storage + "/again/other-digest.png"))
        let dropped = try #require(await result("hostile"))
        #expect(dropped["status"] as? String == "ok", "\(dropped)")
        #expect(dropped["etag"] == nil && dropped["last_modified"] == nil, "\(dropped)")
        let kept = try #require(await result("sane"))
        #expect(kept["etag"] as? String == "\"v2\"", "\(kept)")
        #expect(kept["last_modified"] as? String == "Sun, 06 Nov 1994 08:49:37 GMT", "\(kept)")

        #expect(await worker.stop() == 0)
        try await plain.shutdown()
    }

    /// libcurl follows a `Location` on any 3xx, 304 too, and keeps the 304 as the transfer's
    /// status when the next hop fails: that failure is the job's result, not `not_modified`.
    @Test(.timeLimit(.minutes(2)))
    func a304ThatRedirectsToAForbiddenAddressIsNotNotModified() async throws {
        let origin = try RawOrigin(responses: [
            "/moved.png": "HTTP/1.1 304 Not Modified\r\nLocation: http://169.254.169.254/latest/meta-data/\r\n"
                + "Content-Length: 0\r\n\r\n",
            // Followed until the redirect limit, where libcurl stops with the last 304 unfollowed.
            "/again.png": "HTTP/1.1 304 Not Modified\r\nLocation: /again.png\r\nContent-Length: 0\r\n\r\n",
        ])
        defer { origin.stop() }
        let configuration = try TestBroker.configuration("refetch304")
        defer { TestBroker.cleanUp(configuration) }
        let jobs = try [
            Self.body(["id": "moved", "url": origin.url("/moved.png"), "etag": "\"v1\""]),
            Self.body(["id": "again", "url": origin.url("/again.png"), "etag": "\"v1\""]),
        ]
        #expect(try TestBroker.publish(configuration, bodies: jobs) == 2)
        let results = try QueueCollector(configuration, queue: configuration.queue.results)
        defer { results.close() }
        // The default address veto, with the origin's own address allowed.
        var environment = TestBroker.environment(configuration, storage: WorkerEndToEndTests.storageFolder())
        environment["FETCH_ALLOW_PRIVATE_NETWORKS"] = nil
        environment["FETCH_ALLOWED_NETWORKS"] = "127.0.0.1/32"
        let worker = try WorkerProcess(environment: environment)
        #expect(await eventually(timeout: 30) { results.objects.count == 2 }, "log:\n\(worker.log.suffix(2000))")
        let byID = HostileOriginTests.byID(results)
        let moved = try #require(byID["moved"])
        #expect(moved["status"] as? String == "failed", "\(moved)")
        #expect((moved["error"] as? [String: Any])?["code"] as? String == "forbidden_address", "\(moved)")
        let again = try #require(byID["again"])
        #expect(again["status"] as? String == "not_modified", "\(again)")
        #expect(await worker.stop() == 0)
    }
}
