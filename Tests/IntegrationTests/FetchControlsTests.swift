import Foundation
import ImageFetchWorker
import Testing

/// `fetch.headers`, a job's `headers`, `fetch.allowed_hosts` / `fetch.denied_hosts` and
/// internationalised names, against a real origin on 127.0.0.1. Host names are mapped to it with
/// `fetch.resolve` (libcurl's `CURLOPT_RESOLVE`), which the test controls; nothing touches
/// `/etc/hosts`.
@Suite("Fetch controls")
struct FetchControlsTests {
    /// An engine whose names in `hosts` all resolve to the origin.
    static func withEngine(
        hosts: [String], allowed: [String] = [], denied: [String] = [],
        _ body: (TestOrigin, FetchEngine) async throws -> Void
    ) async throws {
        let origin = try await TestOrigin.start()
        var configuration = FetchEngineTests.configuration()
        configuration.resolve = hosts.map { "\($0):\(origin.port):127.0.0.1" }
        configuration.allowedHosts = allowed.map { try! HostPolicy.normalizedEntry($0).get() }
        configuration.deniedHosts = denied.map { try! HostPolicy.normalizedEntry($0).get() }
        let engine = try FetchEngine(configuration: configuration, addressPolicy: { _ in nil })
        do {
            try await body(origin, engine)
        } catch {
            engine.shutdown()
            try await origin.shutdown()
            throw error
        }
        engine.shutdown()
        try await origin.shutdown()
    }

    static func fetch(_ engine: FetchEngine, _ url: String, checked: Bool = true) async -> FetchResponse {
        var request = FetchRequest(url: url)
        request.checkAddresses = checked
        return await FetchEngineTests.fetch(engine, request)
    }

    /// `/redirect-to?url=…` with `target` percent-encoded.
    static func redirect(_ origin: TestOrigin, host: String, to target: String) -> String {
        let unreserved = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
        let encoded = target.addingPercentEncoding(withAllowedCharacters: unreserved) ?? target
        return "http://\(host):\(origin.port)/redirect-to?url=\(encoded)"
    }

    @Test("the configured and the job's headers reach the origin; a job's header replaces a configured one")
    func headersReachTheOrigin() async throws {
        try await Self.withEngine(hosts: []) { origin, engine in
            var request = FetchRequest(url: origin.url("/headers"))
            request.headers = RequestHeaders.lines(
                configured: [
                    HTTPHeaderField(name: "Referer", value: "https://shop.example/"),
                    HTTPHeaderField(name: "X-Api-Key", value: "k, with a comma"),
                ],
                job: [
                    HTTPHeaderField(name: "Authorization", value: "Bearer abc"),
                    HTTPHeaderField(name: "referer", value: "https://other.example/page"),
                ])
            let response = await FetchEngineTests.fetch(engine, request)
            #expect(response.error == nil)
            let lines = origin.stats.headers["/headers"] ?? []
            #expect(lines.contains("authorization: Bearer abc"))
            #expect(lines.contains("x-api-key: k, with a comma"))
            #expect(lines.contains("referer: https://other.example/page"))
            #expect(!lines.contains("referer: https://shop.example/"))
            #expect(lines.filter { $0.hasPrefix("referer:") }.count == 1)
        }
    }

    @Test("fetch.resolve maps a name to the origin; an exact allowed name is fetched, another is not requested")
    func allowlist() async throws {
        try await Self.withEngine(hosts: ["images.test", "other.test"], allowed: ["images.test"]) { origin, engine in
            let allowed = await Self.fetch(engine, "http://images.test:\(origin.port)/ok.png")
            #expect(allowed.error == nil)
            #expect(origin.stats.hosts == ["images.test:\(origin.port)"])
            let other = await Self.fetch(engine, "http://other.test:\(origin.port)/ok.png")
            #expect(other.error?.code == .hostNotAllowed)
            #expect(other.error?.retryable == false)
            #expect(other.error?.message.contains("other.test") == false)
            #expect(origin.stats.requests == 1, "the refused host must not be requested")
            // A transfer that skips the guards (an S3 upload) skips the host lists too.
            let unchecked = await Self.fetch(engine, "http://other.test:\(origin.port)/ok.png", checked: false)
            #expect(unchecked.error == nil)
        }
    }

    @Test("*.name matches names below it but not the name; a denied match wins over an allowed one")
    func patterns() async throws {
        let hosts = ["a.img.test", "deep.a.img.test", "img.test", "bad.img.test", "evil.test"]
        try await Self.withEngine(hosts: hosts, allowed: ["*.img.test"], denied: ["bad.img.test"]) { origin, engine in
            for (host, allowed) in [
                ("a.img.test", true), ("deep.a.img.test", true), ("IMG.test", false),
                ("bad.img.test", false), ("evil.test", false),
            ] {
                let response = await Self.fetch(engine, "http://\(host):\(origin.port)/ok.png")
                #expect((response.error == nil) == allowed, "\(host): \(String(describing: response.error))")
                if !allowed { #expect(response.error?.code == .hostNotAllowed, "\(host)") }
            }
        }
        try await Self.withEngine(
            hosts: ["evil.test", "sub.evil.test", "fine.test"], denied: ["*.evil.test", "evil.test"]
        ) {
            origin, engine in
            #expect(await Self.fetch(engine, "http://fine.test:\(origin.port)/ok.png").error == nil)
            #expect(
                await Self.fetch(engine, "http://sub.evil.test:\(origin.port)/ok.png").error?.code == .hostNotAllowed)
            #expect(await Self.fetch(engine, "http://evil.test:\(origin.port)/ok.png").error?.code == .hostNotAllowed)
        }
    }

    @Test("every redirect hop is checked before it is requested")
    func redirectHops() async throws {
        try await Self.withEngine(
            hosts: ["images.test", "cdn.images.test", "evil.test"],
            allowed: ["images.test", "*.images.test"]
        ) { origin, engine in
            // Allowed → allowed (absolute), and a relative target that keeps the host.
            let good = await Self.fetch(
                engine,
                Self.redirect(
                    origin, host: "images.test",
                    to: "http://cdn.images.test:\(origin.port)/ok.png"))
            #expect(good.error == nil)
            #expect(good.redirects == 1)
            let relative = await Self.fetch(engine, Self.redirect(origin, host: "images.test", to: "/redirect/2"))
            #expect(relative.error == nil)
            #expect(relative.redirects == 3)
            // Allowed → not allowed: refused before the second request, whatever the 3xx status.
            for status in [301, 302, 303, 307, 308, 300] {
                origin.resetStats()
                let url = Self.redirect(origin, host: "images.test", to: "http://evil.test:\(origin.port)/ok.png")
                let bad = await Self.fetch(engine, url + "&status=\(status)")
                #expect(bad.error?.code == .hostNotAllowed, "status \(status)")
                #expect(bad.error?.message.contains("redirect") == true)
                #expect(origin.stats.requests == 1, "status \(status): the refused hop must not be requested")
                #expect(!origin.stats.hosts.contains { $0.hasPrefix("evil.test") })
            }
            // A protocol-relative target and an IP literal are hosts too.
            let protocolRelative = await Self.fetch(
                engine,
                Self.redirect(
                    origin, host: "images.test",
                    to: "//evil.test:\(origin.port)/ok.png"))
            #expect(protocolRelative.error?.code == .hostNotAllowed)
            let literal = await Self.fetch(
                engine, Self.redirect(origin, host: "images.test", to: origin.url("/ok.png")))
            #expect(literal.error?.code == .hostNotAllowed)
        }
    }

    @Test("an internationalised name is fetched by its punycode name; a confusable one is invalid_url")
    func internationalisedNames() async throws {
        // bücher.test is xn--bcher-kva.test; only the punycode name is mapped to the origin.
        try await Self.withEngine(
            hosts: ["xn--bcher-kva.test", "images.test"],
            allowed: ["bücher.test", "images.test"]
        ) { origin, engine in
            let validated = try URLPolicy.validate("http://BÜCHER.test:\(origin.port)/ok.png").get()
            #expect(validated.host == "xn--bcher-kva.test")
            let direct = await Self.fetch(engine, validated.url)
            #expect(direct.error == nil, "\(String(describing: direct.error))")
            #expect(origin.stats.hosts.last == "xn--bcher-kva.test:\(origin.port)")

            // A redirect to the punycode name passes the allowlist entry written in Unicode. (libcurl
            // 7.88 refuses a Location whose host is raw UTF-8 as malformed: invalid_url either way.)
            let viaRedirect = await Self.fetch(
                engine,
                Self.redirect(
                    origin, host: "images.test",
                    to: "http://xn--bcher-kva.test:\(origin.port)/ok.png"))
            #expect(viaRedirect.error == nil, "\(String(describing: viaRedirect.error))")
            #expect(origin.stats.hosts.last == "xn--bcher-kva.test:\(origin.port)")
            let rawUnicode = await Self.fetch(
                engine,
                Self.redirect(
                    origin, host: "images.test",
                    to: "http://bücher.test:\(origin.port)/ok.png"))
            #expect(rawUnicode.error?.code == .invalidURL)

            // Latin with a Cyrillic а, in Unicode and in punycode: refused before any request.
            origin.resetStats()
            for host in ["\u{0430}pple.test", "xn--pple-43d.test"] {
                let result = URLPolicy.validate("http://\(host):\(origin.port)/ok.png")
                guard case .failure(let refusal) = result else {
                    Issue.record("\(host) passed the URL check")
                    continue
                }
                #expect(JobError(refusal).code == .invalidURL, "\(host)")
                let redirected = await Self.fetch(
                    engine,
                    Self.redirect(
                        origin, host: "images.test",
                        to: "http://\(host):\(origin.port)/ok.png"))
                #expect(redirected.error?.code == .invalidURL, "\(host): \(String(describing: redirected.error))")
            }
            // The punycode form is refused by the engine's own check, before libcurl follows it.
            let punycode = await Self.fetch(
                engine,
                Self.redirect(
                    origin, host: "images.test",
                    to: "http://xn--pple-43d.test:\(origin.port)/ok.png"))
            #expect(punycode.error?.message.contains("mixes Latin, Greek or Cyrillic") == true)
            #expect(origin.stats.requests == 3, "only the redirecting requests")
        }
    }
}

/// The same controls through the worker process, configured by environment as an operator does,
/// with the real broker of `make test`.
@Suite(.enabled(if: TestBroker.isAvailable, "needs the RabbitMQ that `make test` starts"), .serialized)
struct FetchControlsWorkerTests {
    static func body(_ id: String, _ url: String, headers: [String: String]? = nil) throws -> [UInt8] {
        var object: [String: Any] = ["id": id, "url": url]
        if let headers { object["headers"] = headers }
        return Array(try JSONSerialization.data(withJSONObject: object))
    }

    @Test(.timeLimit(.minutes(2)))
    func headersHostListsAndInternationalNamesEndToEnd() async throws {
        let origin = try await TestOrigin.start()
        let port = origin.port
        let configuration = try TestBroker.configuration("controls")
        defer { TestBroker.cleanUp(configuration) }
        let evil = "http%3A%2F%2Fevil.test%3A\(port)%2Fok.png"
        let bodies: [[UInt8]] = [
            try Self.body(
                "with-headers", "http://images.test:\(port)/ok.png?job=1",
                headers: ["Referer": "https://shop.example/p"]),
            try Self.body("idn", "http://Bücher.test:\(port)/ok.png?job=2"),
            try Self.body("denied", "http://evil.test:\(port)/ok.png?job=3"),
            try Self.body("redirect", "http://images.test:\(port)/redirect-to?url=\(evil)"),
            try Self.body("confusable", "http://xn--pple-43d.test:\(port)/ok.png"),
            try Self.body("crlf", "http://images.test:\(port)/ok.png", headers: ["Referer": "a\r\nX-Injected: 1"]),
            try Self.body("not-allowed", "http://images.test:\(port)/ok.png", headers: ["Cookie": "a=b"]),
        ]
        #expect(try TestBroker.publish(configuration, bodies: bodies) == bodies.count)
        let results = try QueueCollector(configuration, queue: configuration.queue.results)
        let dead = try QueueCollector(configuration, queue: configuration.queue.dead)
        defer {
            results.close()
            dead.close()
        }
        let storage = TestScratch.path("images-\(UUID().uuidString)")
        let worker = try WorkerProcess(
            environment: TestBroker.environment(configuration, storage: storage).merging([
                "FETCH_HEADERS": "X-Api-Key: k1, k2\nReferer: https://default.example/",
                "FETCH_JOB_HEADERS": "Referer",
                "FETCH_ALLOWED_HOSTS": "images.test, bücher.test",
                "FETCH_RESOLVE": ["images.test", "xn--bcher-kva.test", "evil.test"].map { "\($0):\(port):127.0.0.1" }
                    .joined(separator: ","),
            ]) { _, new in new })

        await results.wait(for: 5, timeout: 30)
        await dead.wait(for: 2, timeout: 30)
        var byID: [String: [String: Any]] = [:]
        for object in results.objects { byID[object["id"] as? String ?? ""] = object }
        func code(_ id: String) -> String? { (byID[id]?["error"] as? [String: Any])?["code"] as? String }
        #expect(byID["with-headers"]?["status"] as? String == "ok", "log:\n\(worker.log.suffix(2000))")
        #expect(byID["idn"]?["status"] as? String == "ok", "\(String(describing: byID["idn"]))")
        #expect(code("denied") == "host_not_allowed")
        #expect(code("redirect") == "host_not_allowed")
        #expect(code("confusable") == "invalid_url")
        #expect(results.objects.count == 5)

        // What the origin received: the configured headers, the job's Referer in place of the default.
        let received = origin.stats.headers["/ok.png?job=1"] ?? []
        #expect(received.contains("x-api-key: k1, k2"))
        #expect(received.contains("referer: https://shop.example/p"))
        #expect(!received.contains("referer: https://default.example/"))
        #expect(origin.stats.headers["/ok.png?job=2"]?.contains("referer: https://default.example/") == true)
        #expect(origin.stats.hosts.contains("xn--bcher-kva.test:\(port)"))
        #expect(!origin.stats.hosts.contains { $0.hasPrefix("evil.test") }, "a refused host was requested")

        #expect(
            Set(
                dead.received.compactMap { message -> String? in
                    (try? JSONSerialization.jsonObject(with: Data(message.body)) as? [String: Any])?["id"] as? String
                }) == ["crlf", "not-allowed"])
        for message in dead.received {
            #expect(message.properties.headers["x-error-code"]?.stringValue == "invalid_job")
        }
        #expect(origin.stats.headers.values.allSatisfy { !$0.contains { $0.hasPrefix("x-injected") } })
        #expect(await worker.stop() == 0)
        try await origin.shutdown()
    }
}
