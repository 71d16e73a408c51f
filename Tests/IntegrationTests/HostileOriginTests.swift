import Crypto
import Foundation
import ImageFetchWorker
import Testing

/// The worker process, run as a user runs it (environment configuration), against a misbehaving
/// origin on 127.0.0.1 and against SSRF attempts: each case gets its exact error code in its result,
/// and the worker keeps running.
@Suite(.enabled(if: TestBroker.isAvailable, "needs the RabbitMQ that `make test` starts"), .serialized)
struct HostileOriginTests {
    /// The environment of a worker whose private-network settings come only from `overrides`:
    /// `FETCH_ALLOW_PRIVATE_NETWORKS` is removed, so it has its default (false) unless set there.
    static func environment(_ configuration: WorkerConfiguration, _ overrides: [String: String]) -> [String: String] {
        var environment = TestBroker.environment(configuration, storage: WorkerEndToEndTests.storageFolder())
        environment["FETCH_ALLOW_PRIVATE_NETWORKS"] = nil
        // Retryable failures give their final result at once instead of going through retry queues.
        environment["RETRY_MAX_ATTEMPTS"] = "1"
        environment["LOG_LEVEL"] = "debug"
        return environment.merging(overrides) { _, new in new }
    }

    /// Results by job id.
    static func byID(_ collector: QueueCollector) -> [String: [String: Any]] {
        var byID: [String: [String: Any]] = [:]
        for object in collector.objects { byID[object["id"] as? String ?? ""] = object }
        return byID
    }

    static func error(_ result: [String: Any]?) -> [String: Any]? { result?["error"] as? [String: Any] }

    /// `http://169.254.169.254/latest/meta-data/`, percent-encoded for `/redirect-to?url=`.
    static let metadataTarget = "http%3A%2F%2F169.254.169.254%2Flatest%2Fmeta-data%2F"

    struct Case: Sendable, CustomStringConvertible {
        let id: String
        let path: String
        let code: String
        let retryable: Bool
        var httpStatus: Int? = nil
        var description: String { "\(id) (\(path))" }
    }

    /// Every misbehaviour of issue 4, with the code and retryability its result must carry.
    static let cases: [Case] = [
        Case(id: "html", path: "/html", code: "not_an_image", retryable: false, httpStatus: 200),
        Case(
            id: "png-with-html-body", path: "/html?type=image/png", code: "not_an_image", retryable: false,
            httpStatus: 200),
        Case(id: "endless", path: "/endless", code: "too_large", retryable: false),
        // Headers only, then silence: refused on its Content-Length, or it would end in the low-speed timeout.
        Case(
            id: "declared-too-large", path: "/big?bytes=2000000", code: "too_large", retryable: false, httpStatus: 200),
        Case(id: "trickle", path: "/trickle", code: "timeout", retryable: true),
        Case(id: "loop", path: "/loop", code: "too_many_redirects", retryable: false),
        Case(id: "long-chain", path: "/redirect/6", code: "too_many_redirects", retryable: false),
        Case(id: "metadata", path: "/redirect-to?url=\(metadataTarget)", code: "forbidden_address", retryable: false),
        Case(
            id: "passwd", path: "/redirect-to?url=file%3A%2F%2F%2Fetc%2Fpasswd", code: "unsupported_scheme",
            retryable: false),
        // Redirect targets get the job URL's checks: no user info, at most 8 KiB.
        Case(
            id: "redirect-user-info", path: "/redirect-to?url=http%3A%2F%2Fuser%3Apw%40127.0.0.1%2Fok.png",
            code: "invalid_url", retryable: false),
        Case(
            id: "redirect-too-long", path: "/redirect-to?url=%2Fok.png%3Fpad%3D" + String(repeating: "a", count: 8200),
            code: "invalid_url", retryable: false),
        Case(id: "truncated", path: "/truncated", code: "truncated", retryable: true),
        Case(id: "pixels", path: "/endless?png=100000x100000", code: "too_many_pixels", retryable: false),
        Case(id: "404", path: "/status/404", code: "http_error", retryable: false, httpStatus: 404),
        Case(id: "500", path: "/status/500", code: "http_error", retryable: true, httpStatus: 500),
        Case(id: "503", path: "/status/503", code: "http_error", retryable: true, httpStatus: 503),
    ]

    @Test(.timeLimit(.minutes(2)))
    func misbehavingOriginGetsExactErrorCodesAndTheWorkerKeepsRunning() async throws {
        let origin = try await TestOrigin.start(threads: 2)
        let configuration = try TestBroker.configuration("hostile")
        defer { TestBroker.cleanUp(configuration) }
        let maxBytes = 1024 * 1024
        var bodies = Self.cases.map { JobPublisher.jobBody(id: $0.id, url: origin.url($0.path)) }
        bodies.append(JobPublisher.jobBody(id: "good", url: origin.url("/redirect/2")))
        #expect(try TestBroker.publish(configuration, bodies: bodies) == bodies.count)

        let results = try QueueCollector(configuration, queue: configuration.queue.results)
        let dead = try QueueCollector(configuration, queue: configuration.queue.dead)
        defer {
            results.close()
            dead.close()
        }
        // Private networks stay denied; only the origin's own address is allowed.
        let worker = try WorkerProcess(
            environment: Self.environment(
                configuration,
                [
                    "FETCH_ALLOWED_NETWORKS": "127.0.0.1/32",
                    "FETCH_MAX_BYTES": "\(maxBytes)",
                    "FETCH_MAX_REDIRECTS": "5",
                    "FETCH_LOW_SPEED_LIMIT": "100",
                    "FETCH_LOW_SPEED_TIME": "2",
                    "FETCH_TIMEOUT": "30",
                ]))
        await results.wait(for: bodies.count, timeout: 60)
        let byID = Self.byID(results)
        #expect(byID.count == bodies.count, "worker log:\n\(worker.log.suffix(3000))")

        for expected in Self.cases {
            let result = byID[expected.id]
            let error = Self.error(result)
            #expect(result?["status"] as? String == "failed", "\(expected)")
            #expect(error?["code"] as? String == expected.code, "\(expected): \(result ?? [:])")
            #expect(error?["retryable"] as? Bool == expected.retryable, "\(expected): \(result ?? [:])")
            let message = error?["message"] as? String ?? ""
            #expect(!message.isEmpty, "\(expected)")
            let portPattern = try Regex("\\b\(origin.port)\\b")
            #expect(
                !message.contains("127.0.0.1") && message.firstMatch(of: portPattern) == nil,
                "\(expected): \(message)")
            if let status = expected.httpStatus {
                #expect(result?["http_status"] as? Int == status, "\(expected)")
            }
            #expect(result?["attempt"] as? Int == 1, "\(expected)")
        }
        // The lying server's declared type is reported as declared.
        #expect(byID["png-with-html-body"]?["content_type"] as? String == "image/png")
        #expect(byID["html"]?["content_type"] as? String == "text/html; charset=utf-8")
        // The refused redirect names the class of the address, not the address.
        let metadataMessage = Self.error(byID["metadata"])?["message"] as? String ?? ""
        #expect(metadataMessage.contains("link-local"), "\(metadataMessage)")
        #expect(!metadataMessage.contains("169.254"), "\(metadataMessage)")
        #expect((Self.error(byID["passwd"])?["message"] as? String)?.contains("passwd") == false)
        #expect(byID["long-chain"]?["redirects"] as? Int ?? 0 >= 5)

        // too_many_pixels came from the header while the origin was still streaming. The worker
        // stopped before it had read fetch.max_bytes (reading on would have given too_large, as it
        // does for /endless), and well within fetch.timeout. The origin's own count of bytes written
        // proves little: on loopback the kernel buffers megabytes the worker never reads.
        let pixelsPath = "/endless?png=100000x100000"
        let pixelsTotal = (byID["pixels"]?["timings"] as? [String: Any])?["total_ms"] as? Double ?? .infinity
        #expect(pixelsTotal < 5000, "the pixel check should abort at once, took \(pixelsTotal) ms")
        #expect(await eventually(timeout: 5) { origin.stats.inFlight == 0 }, "an endless response is still streaming")
        #expect(origin.stats.streamedBytes[pixelsPath] ?? 0 > 33, "the transfer should end mid-body")
        let endlessSent = origin.stats.streamedBytes["/endless"] ?? 0
        #expect(endlessSent >= maxBytes, "the endless body should have run up to max_bytes, sent \(endlessSent)")

        // The good job, fetched through two redirects from the allowed loopback origin: the whole result.
        let good = try #require(byID["good"])
        let expectedDigest = SHA256.hash(data: TestOrigin.okBody).map { String(format: "%02x", $0) }.joined()
        #expect(good["status"] as? String == "ok", "\(good)")
        #expect(good["url"] as? String == origin.url("/redirect/2"))
        #expect(good["attempt"] as? Int == 1)
        #expect(good["redelivered"] as? Bool == false)
        #expect(good["http_status"] as? Int == 200)
        #expect(good["content_type"] as? String == "image/png")
        #expect(good["format"] as? String == "png")
        #expect(good["width"] as? Int == 64)
        #expect(good["height"] as? Int == 32)
        #expect(good["bytes"] as? Int == TestOrigin.okBody.count)
        #expect(good["sha256"] as? String == expectedDigest)
        #expect((good["location"] as? String)?.hasPrefix("file:///") == true)
        #expect(good["final_url"] as? String == origin.url("/ok.png"))
        #expect(good["redirects"] as? Int == 2)
        #expect(good["error"] == nil)
        #expect((good["duration_ms"] as? Double ?? -1) >= 0)
        #expect((good["worker"] as? String)?.isEmpty == false)
        let finishedAt = good["finished_at"] as? String ?? ""
        #expect(finishedAt.count == 24 && finishedAt.hasSuffix("Z"), "\(finishedAt)")
        let timings = try #require(good["timings"] as? [String: Any])
        #expect(Set(timings.keys) == ["dns_ms", "connect_ms", "tls_ms", "ttfb_ms", "total_ms"])
        let total = timings["total_ms"] as? Double ?? 0
        #expect(total > 0)
        #expect((timings["ttfb_ms"] as? Double ?? .infinity) <= total)
        #expect(
            Set(good.keys) == [
                "id", "url", "status", "attempt", "redelivered", "http_status", "content_type", "format", "width",
                "height", "frames", "animated", "bytes", "sha256", "location", "stored", "final_url", "redirects",
                "duration_ms",
                "timings", "worker", "finished_at",
            ])

        // Retryable failures on their last attempt are also dead-lettered, with their code.
        await dead.wait(for: 4, timeout: 10)
        let deadCodes = dead.received.compactMap { $0.properties.headers["x-error-code"]?.stringValue }.sorted()
        #expect(deadCodes == ["http_error", "http_error", "timeout", "truncated"])

        // Still consuming after all that.
        #expect(worker.isRunning)
        #expect(
            try TestBroker.publish(
                configuration, bodies: [JobPublisher.jobBody(id: "after", url: origin.url("/ok.png"))]) == 1)
        await results.wait(for: bodies.count + 1, timeout: 30)
        #expect(Self.byID(results)["after"]?["status"] as? String == "ok")
        #expect(await worker.stop() == 0)
        try await origin.shutdown()
    }

    @Test(.timeLimit(.minutes(2)))
    func defaultConfigurationRefusesLoopbackInEverySpelling() async throws {
        let origin = try await TestOrigin.start()
        let configuration = try TestBroker.configuration("ssrf")
        defer { TestBroker.cleanUp(configuration) }
        let port = origin.port
        let forbidden: [(id: String, url: String)] = [
            ("dotted", "http://127.0.0.1:\(port)/ok.png"),
            ("ipv6", "http://[::1]:\(port)/ok.png"),
            ("hex", "http://0x7f000001:\(port)/ok.png"),
            ("decimal", "http://2130706433:\(port)/ok.png"),
            ("octal", "http://0177.0.0.1:\(port)/ok.png"),
            ("short", "http://127.1:\(port)/ok.png"),
            ("mapped", "http://[::ffff:127.0.0.1]:\(port)/ok.png"),
        ]
        let invalid: [(id: String, url: String)] = [
            ("too-long", "http://127.0.0.1:\(port)/ok.png?pad=" + String(repeating: "a", count: 8200)),
            ("user-info", "http://user:hunter2@127.0.0.1:\(port)/ok.png"),
        ]
        let bodies = (forbidden + invalid).map { JobPublisher.jobBody(id: $0.id, url: $0.url) }
        #expect(try TestBroker.publish(configuration, bodies: bodies) == bodies.count)
        let results = try QueueCollector(configuration, queue: configuration.queue.results)
        defer { results.close() }
        // The default configuration: FETCH_ALLOW_PRIVATE_NETWORKS and FETCH_ALLOWED_NETWORKS unset.
        let worker = try WorkerProcess(environment: Self.environment(configuration, [:]))
        await results.wait(for: bodies.count, timeout: 30)
        let byID = Self.byID(results)
        #expect(byID.count == bodies.count, "worker log:\n\(worker.log.suffix(3000))")

        for (id, _) in forbidden {
            let error = Self.error(byID[id])
            #expect(error?["code"] as? String == "forbidden_address", "\(id): \(byID[id] ?? [:])")
            #expect(error?["retryable"] as? Bool == false, "\(id)")
            let message = error?["message"] as? String ?? ""
            #expect(message.contains("loopback"), "\(id): \(message)")
            for fragment in ["127.0.0.1", "::1", "0x7f", "2130706433", "ok.png", String(port)] {
                #expect(!message.contains(fragment), "\(id): the message names the URL: \(message)")
            }
            #expect(byID[id]?["http_status"] == nil, "\(id)")
        }
        #expect((Self.error(byID["mapped"])?["message"] as? String)?.contains("IPv4-mapped") == true)
        for (id, _) in invalid {
            let error = Self.error(byID[id])
            #expect(error?["code"] as? String == "invalid_url", "\(id): \(byID[id] ?? [:])")
            #expect(error?["retryable"] as? Bool == false, "\(id)")
            #expect((error?["message"] as? String)?.contains("hunter2") == false)
        }
        #expect((Self.error(byID["too-long"])?["message"] as? String)?.contains("8192") == true)
        #expect((Self.error(byID["user-info"])?["message"] as? String)?.contains("user info") == true)
        // Not one packet reached the origin, and the password was never logged.
        #expect(origin.stats.connections == 0)
        #expect(worker.isRunning)
        #expect(await worker.stop() == 0)
        #expect(!worker.log.contains("hunter2"))
        try await origin.shutdown()
    }

    @Test(.timeLimit(.minutes(2)))
    func allowedNetworksAdmitsTheOriginButNotWhatItRedirectsTo() async throws {
        let origin = try await TestOrigin.start()
        let configuration = try TestBroker.configuration("allowed")
        defer { TestBroker.cleanUp(configuration) }
        let port = origin.port
        let bodies = [
            JobPublisher.jobBody(id: "allowed", url: origin.url("/ok.png")),
            JobPublisher.jobBody(id: "metadata", url: origin.url("/redirect-to?url=\(Self.metadataTarget)")),
            // The allowance is exactly 127.0.0.1/32: the rest of loopback stays denied.
            JobPublisher.jobBody(id: "other-loopback", url: "http://127.0.0.2:\(port)/ok.png"),
            JobPublisher.jobBody(id: "ipv6-loopback", url: "http://[::1]:\(port)/ok.png"),
        ]
        #expect(try TestBroker.publish(configuration, bodies: bodies) == bodies.count)
        let results = try QueueCollector(configuration, queue: configuration.queue.results)
        defer { results.close() }
        let worker = try WorkerProcess(
            environment: Self.environment(configuration, ["FETCH_ALLOWED_NETWORKS": "127.0.0.1/32"]))
        await results.wait(for: bodies.count, timeout: 30)
        let byID = Self.byID(results)
        #expect(byID.count == bodies.count, "worker log:\n\(worker.log.suffix(3000))")
        #expect(byID["allowed"]?["status"] as? String == "ok", "\(byID["allowed"] ?? [:])")
        #expect(byID["allowed"]?["format"] as? String == "png")
        #expect(Self.error(byID["metadata"])?["code"] as? String == "forbidden_address")
        #expect((Self.error(byID["metadata"])?["message"] as? String)?.contains("link-local") == true)
        #expect(byID["metadata"]?["redirects"] as? Int == 1)
        #expect(Self.error(byID["other-loopback"])?["code"] as? String == "forbidden_address")
        #expect(Self.error(byID["ipv6-loopback"])?["code"] as? String == "forbidden_address")
        #expect(await worker.stop() == 0)
        try await origin.shutdown()
    }
}
