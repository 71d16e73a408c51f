import Foundation
import ImageFetchWorker
import Logging
import Testing

/// Issue 35, item 1 end to end: a real RabbitMQ, the worker in this process, and real origins on
/// 127.0.0.1 that send opt-out signals (``OptOutOrigin``).
@Suite(.enabled(if: TestBroker.isAvailable, "needs the RabbitMQ that `make test` starts"), .serialized)
struct OptOutTests {
    struct Run {
        var results: [String: [String: Any]]
        var stored: [String]
        var metrics: String
    }

    /// Publishes one job per `(id, url)`, each stored under the key `<id>.png` (so that what is
    /// stored shows which jobs stored, whatever their bytes), runs a worker until every result is
    /// in, and drains it.
    static func run(
        _ name: String, jobs: [(String, String)], concurrency: Int = 8,
        configure: (inout WorkerConfiguration) -> Void = { _ in }
    ) async throws -> Run {
        var configuration = try TestBroker.configuration(name)
        defer { TestBroker.cleanUp(configuration) }
        let storage = FileManager.default.temporaryDirectory.appendingPathComponent("optout-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: storage) }
        configuration.storage.kind = .file
        configuration.storage.path = storage
        configuration.http.port = 0
        configuration.worker.concurrency = concurrency
        configuration.worker.drainTimeout = 5
        configuration.retry.delays = [1]
        configure(&configuration)
        #expect(
            try TestBroker.publish(
                configuration, bodies: jobs.map { JobPublisher.jobBody(id: $0.0, url: $0.1, key: "\($0.0).png") })
                == jobs.count)
        let collector = try QueueCollector(configuration, queue: configuration.queue.results)
        defer { collector.close() }
        let worker = try Worker(configuration: configuration, logger: Logger(label: "test.opt-out"))
        try worker.start()
        await collector.wait(for: jobs.count, timeout: 60)
        // Counters move once the results are confirmed, which can come after the collector has them.
        _ = await eventually(timeout: 10) {
            let snapshot = worker.stats.snapshot
            return snapshot.succeeded + snapshot.failed >= jobs.count
        }
        let metrics = String(decoding: worker.stats.metrics.render(), as: UTF8.self)
        let _: Int32 = await withCheckedContinuation { continuation in
            worker.shutdown { continuation.resume(returning: $0) }
        }
        var results: [String: [String: Any]] = [:]
        for object in collector.objects {
            if let id = object["id"] as? String { results[id] = object }
        }
        let stored = (FileManager.default.enumerator(atPath: storage)?.allObjects as? [String] ?? [])
            .filter { !$0.hasSuffix("/") && !(($0 as NSString).lastPathComponent.hasPrefix(".")) }
            .filter {
                var isDirectory: ObjCBool = false
                return FileManager.default.fileExists(atPath: storage + "/" + $0, isDirectory: &isDirectory)
                    && !isDirectory.boolValue
            }
        return Run(results: results, stored: stored, metrics: metrics)
    }

    static func code(_ result: [String: Any]?) -> String? {
        (result?["error"] as? [String: Any])?["code"] as? String
    }

    static func metric(_ page: String, _ series: String) -> Int? {
        for line in page.split(separator: "\n") where line.hasPrefix(series + " ") {
            return Int(Double(line.split(separator: " ").last ?? "") ?? -1)
        }
        return nil
    }

    @Test("X-Robots-Tag noai and tdm-reservation: 1 end opted_out before the body; nothing is stored")
    func headerSignals() async throws {
        let origin = try await OptOutOrigin.start()
        let jobs = [
            ("noai", origin.url("/noai/a.png")), ("tdm", origin.url("/tdm/b.png")),
            ("scoped", origin.url("/scoped/c.png")), ("plain", origin.url("/plain/d.png")),
            ("endless", origin.url("/noai-endless")),
        ]
        let run = try await Self.run("opt-out-headers", jobs: jobs)
        for id in ["noai", "tdm", "endless"] {
            #expect(run.results[id]?["status"] as? String == "failed", "\(id)")
            #expect(Self.code(run.results[id]) == "opted_out", "\(id): \(String(describing: run.results[id]))")
        }
        #expect(
            (run.results["noai"]?["error"] as? [String: Any])?["message"] as? String
                == "the image's X-Robots-Tag says noai")
        // A directive scoped to another crawler does not apply; a plain image is fetched.
        #expect(run.results["scoped"]?["status"] as? String == "ok")
        #expect(run.results["plain"]?["status"] as? String == "ok")
        #expect(Set(run.stored) == ["scoped.png", "plain.png"], "only the ok images are stored")
        // Not retried: each path was asked for once.
        let log = origin.log
        for path in ["/noai/a.png", "/tdm/b.png", "/noai-endless"] { #expect(log.count(path) == 1, "\(path)") }
        #expect(log.count("/robots.txt") == 0, "fetch.robots is off by default")
        // The endless body was never read: the transfer stopped at the headers. Without the check
        // it would run to fetch.max_bytes (20 MiB); what the origin wrote is what the socket
        // buffers took.
        #expect(log.streamedBytes < 8 << 20, "streamed \(log.streamedBytes) bytes")
        #expect(Self.metric(run.metrics, #"image_fetch_opted_out_total{signal="x_robots_tag"}"#) == 2)
        #expect(Self.metric(run.metrics, #"image_fetch_opted_out_total{signal="tdm_reservation"}"#) == 1)
        #expect(run.metrics.contains(#"code="opted_out""#))
        try await origin.shutdown()
    }

    @Test("an empty fetch.opt_out.directives and tdm_reservation=false ignore the headers")
    func headerSignalsOff() async throws {
        let origin = try await OptOutOrigin.start()
        let run = try await Self.run(
            "opt-out-headers-off",
            jobs: [
                ("noai", origin.url("/noai/a.png")),
                ("tdm", origin.url("/tdm/b.png")),
            ]
        ) {
            $0.fetch.optOut.directives = []
            $0.fetch.optOut.tdmReservation = false
        }
        #expect(run.results["noai"]?["status"] as? String == "ok")
        #expect(run.results["tdm"]?["status"] as? String == "ok")
        #expect(Set(run.stored) == ["noai.png", "tdm.png"])
        try await origin.shutdown()
    }

    @Test("robots.txt: a disallowed path ends opted_out, an allowed one is fetched, robots.txt is fetched once")
    func robotsRespect() async throws {
        let robots = """
            User-agent: *
            Disallow: /

            User-agent: image-fetch-worker
            Disallow: /private/
            Allow: /private/open
            """
        // The delay makes the jobs of the first wave arrive while robots.txt is being fetched.
        let origin = try await OptOutOrigin.start(.init(robots: .body(robots), robotsDelay: .milliseconds(300)))
        let privateJobs = (0..<12).map { ("private-\($0)", origin.url("/private/\($0).png")) }
        let publicJobs = (0..<12).map { ("public-\($0)", origin.url("/public/\($0).png")) }
        let open = [("open", origin.url("/private/open.png"))]
        let run = try await Self.run("opt-out-robots", jobs: privateJobs + publicJobs + open) {
            $0.fetch.robots = .respect
        }
        for (id, _) in privateJobs {
            #expect(Self.code(run.results[id]) == "opted_out", "\(id)")
            #expect(
                (run.results[id]?["error"] as? [String: Any])?["message"] as? String
                    == "the origin's robots.txt disallows this path")
        }
        for (id, _) in publicJobs + open { #expect(run.results[id]?["status"] as? String == "ok", "\(id)") }
        let log = origin.log
        #expect(log.count("/robots.txt") == 1, "one robots.txt request for \(run.results.count) jobs: \(log.paths)")
        #expect(log.paths.first == "/robots.txt")
        #expect(
            !log.paths.contains { $0.hasPrefix("/private/") && $0 != "/private/open.png" },
            "a disallowed image is never requested")
        #expect(Set(run.stored) == Set((publicJobs + open).map { "\($0.0).png" }))
        #expect(Self.metric(run.metrics, #"image_fetch_opted_out_total{signal="robots_txt"}"#) == privateJobs.count)
        #expect(Self.metric(run.metrics, #"image_fetch_robots_fetches_total{outcome="ok"}"#) == 1)
        try await origin.shutdown()
    }

    @Test("robots.txt 404 allows all, 503 disallows all (RFC 9309), and off never asks")
    func robotsMissingUnreachableAndOff() async throws {
        let missing = try await OptOutOrigin.start(.init(robots: .status(404)))
        let failing = try await OptOutOrigin.start(.init(robots: .status(503)))
        let ignored = try await OptOutOrigin.start(.init(robots: .body("User-agent: *\nDisallow: /\n")))
        let jobs = (0..<4).flatMap { index in
            [
                ("missing-\(index)", missing.url("/a/\(index).png")),
                ("failing-\(index)", failing.url("/a/\(index).png")),
            ]
        }
        let run = try await Self.run("opt-out-robots-status", jobs: jobs) { $0.fetch.robots = .respect }
        for index in 0..<4 {
            #expect(run.results["missing-\(index)"]?["status"] as? String == "ok")
            #expect(Self.code(run.results["failing-\(index)"]) == "opted_out")
        }
        #expect(missing.log.count("/robots.txt") == 1)
        #expect(failing.log.count("/robots.txt") == 1, "the unreachable verdict is cached too")
        #expect(failing.log.paths == ["/robots.txt"], "no image of an unreachable robots.txt is requested")
        #expect(Self.metric(run.metrics, #"image_fetch_robots_fetches_total{outcome="missing"}"#) == 1)
        #expect(Self.metric(run.metrics, #"image_fetch_robots_fetches_total{outcome="unreachable"}"#) == 1)

        let off = try await Self.run("opt-out-robots-off", jobs: [("off", ignored.url("/a.png"))])
        #expect(off.results["off"]?["status"] as? String == "ok")
        #expect(ignored.log.paths == ["/a.png"], "fetch.robots=off never fetches robots.txt")
        for origin in [missing, failing, ignored] { try await origin.shutdown() }
    }
}
