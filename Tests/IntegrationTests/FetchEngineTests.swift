import Dispatch
import ImageFetchWorker
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The fetch engine against a real local origin (``TestOrigin``), no fakes.
@Suite("FetchEngine")
struct FetchEngineTests {
    /// Short limits so that failure cases finish fast.
    static func configuration(
        _ change: (inout WorkerConfiguration.Fetch) -> Void = { _ in }
    ) -> WorkerConfiguration.Fetch {
        var configuration = WorkerConfiguration.Fetch()
        configuration.timeout = 10
        configuration.connectTimeout = 2
        change(&configuration)
        return configuration
    }

    /// Runs one fetch and waits for its completion.
    static func fetch(_ engine: FetchEngine, _ request: FetchRequest) async -> FetchResponse {
        await withCheckedContinuation { continuation in
            engine.fetch(request) { continuation.resume(returning: $0) }
        }
    }

    static func fetch(_ engine: FetchEngine, _ url: String) async -> FetchResponse {
        await fetch(engine, FetchRequest(url: url))
    }

    /// Starts an origin and an engine, runs `body`, and shuts both down.
    static func withOrigin(
        _ change: (inout WorkerConfiguration.Fetch) -> Void = { _ in },
        addressPolicy: (@Sendable (UnsafePointer<sockaddr>) -> String?)? = nil,
        _ body: (TestOrigin, FetchEngine) async throws -> Void
    ) async throws {
        let origin = try await TestOrigin.start()
        let engine = try FetchEngine(configuration: configuration(change), addressPolicy: addressPolicy)
        do {
            try await body(origin, engine)
        } catch {
            engine.shutdown()
            try await origin.shutdown()
            throw error
        }
        engine.shutdown()
        #expect(engine.activeTransfers == 0)
        try await origin.shutdown()
    }

    /// Polls `condition` for up to `seconds`.
    static func eventually(_ seconds: Double = 5, _ condition: () -> Bool) async -> Bool {
        let deadline = DispatchTime.now().uptimeNanoseconds + UInt64(seconds * 1e9)
        while DispatchTime.now().uptimeNanoseconds < deadline {
            if condition() { return true }
            try? await Task.sleep(nanoseconds: 5_000_000)
        }
        return condition()
    }

    @Test("200: body, content type, final URL and timings")
    func ok() async throws {
        try await Self.withOrigin { origin, engine in
            let response = await Self.fetch(engine, origin.url("/ok.png"))
            #expect(response.error == nil)
            #expect(response.httpStatus == 200)
            #expect(response.body == TestOrigin.okBody)
            #expect(response.contentType == "image/png")
            #expect(response.finalURL == origin.url("/ok.png"))
            #expect(response.redirects == 0)
            let timings = try #require(response.timings)
            #expect(timings.totalMs > 0)
            #expect(timings.dnsMs <= timings.connectMs)
            #expect(timings.connectMs <= timings.ttfbMs)
            #expect(timings.ttfbMs <= timings.totalMs)
        }
    }

    @Test("404 is a final http_error, 503 a retryable one")
    func httpErrors() async throws {
        try await Self.withOrigin { origin, engine in
            let notFound = await Self.fetch(engine, origin.url("/status/404"))
            #expect(notFound.error?.code == .httpError)
            #expect(notFound.error?.retryable == false)
            #expect(notFound.httpStatus == 404)
            #expect(notFound.body.isEmpty)
            let unavailable = await Self.fetch(engine, origin.url("/status/503"))
            #expect(unavailable.error?.code == .httpError)
            #expect(unavailable.error?.retryable == true)
            #expect(unavailable.httpStatus == 503)
        }
    }

    @Test("a redirect chain within the limit is followed")
    func redirectsWithinLimit() async throws {
        try await Self.withOrigin({ $0.maxRedirects = 5 }) { origin, engine in
            let response = await Self.fetch(engine, origin.url("/redirect/5"))
            #expect(response.error == nil)
            #expect(response.redirects == 5)
            #expect(response.finalURL == origin.url("/ok.png"))
            // The redirects said text/html; the final response's type wins.
            #expect(response.contentType == "image/png")
            #expect(response.body == TestOrigin.okBody)
        }
    }

    @Test("redirects past the limit, and a loop, are too_many_redirects")
    func tooManyRedirects() async throws {
        try await Self.withOrigin({ $0.maxRedirects = 5 }) { origin, engine in
            let chain = await Self.fetch(engine, origin.url("/redirect/6"))
            #expect(chain.error?.code == .tooManyRedirects)
            let loop = await Self.fetch(engine, origin.url("/loop"))
            #expect(loop.error?.code == .tooManyRedirects)
            #expect(loop.error?.retryable == false)
            // A request's own limit (the robots.txt fetch's) is the one its failure names.
            var request = FetchRequest(url: origin.url("/redirect/3"))
            request.maxRedirects = 2
            let own = await Self.fetch(engine, request)
            #expect(own.failure == .tooManyRedirects(limit: 2))
        }
    }

    @Test("a body without Content-Length past max_bytes is too_large")
    func endlessIsTooLarge() async throws {
        try await Self.withOrigin({ $0.maxBytes = 100_000 }) { origin, engine in
            let response = await Self.fetch(engine, origin.url("/endless"))
            #expect(response.error?.code == .tooLarge)
            #expect(response.body.isEmpty)
        }
    }

    @Test("a Content-Length over max_bytes is too_large before the body")
    func declaredTooLarge() async throws {
        try await Self.withOrigin({ $0.maxBytes = 1_000_000 }) { origin, engine in
            let response = await Self.fetch(engine, origin.url("/big?bytes=1000001"))
            #expect(response.failure == .tooLarge(limit: 1_000_000, declared: true))
            #expect(response.error?.code == .tooLarge)
            #expect(response.error?.retryable == false)
        }
    }

    @Test("no Accept-Encoding is sent, so max_bytes counts the bytes on the wire")
    func noAcceptEncoding() async throws {
        try await Self.withOrigin { origin, engine in
            let response = await Self.fetch(engine, origin.url("/headers"))
            #expect(response.error == nil)
            let lines = String(decoding: response.body, as: UTF8.self).split(separator: "\n")
            #expect(!lines.isEmpty)
            #expect(!lines.contains { $0.hasPrefix("accept-encoding:") }, "\(lines)")
            #expect(!lines.contains { $0.hasPrefix("te:") }, "\(lines)")
            #expect(lines.contains { $0.hasPrefix("user-agent: image-fetch-worker/") }, "\(lines)")
        }
    }

    @Test("a body shorter than its Content-Length is truncated")
    func truncated() async throws {
        try await Self.withOrigin { origin, engine in
            let response = await Self.fetch(engine, origin.url("/truncated"))
            #expect(response.error?.code == .truncated)
            #expect(response.error?.retryable == true)
        }
    }

    @Test("a trickle below the low-speed limit times out")
    func trickleTimesOut() async throws {
        try await Self.withOrigin({
            $0.lowSpeedLimit = 100
            $0.lowSpeedTime = 1
        }) { origin, engine in
            let start = DispatchTime.now().uptimeNanoseconds
            let response = await Self.fetch(engine, origin.url("/trickle"))
            let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
            #expect(response.error?.code == .timeout)
            #expect(response.error?.retryable == true)
            #expect(seconds < 4)
        }
    }

    @Test("a redirect to file: is unsupported_scheme, and no message names the URL")
    func redirectToFile() async throws {
        try await Self.withOrigin { origin, engine in
            let response = await Self.fetch(engine, origin.url("/redirect-to?url=file%3A%2F%2F%2Fetc%2Fpasswd"))
            #expect(response.error?.code == .unsupportedScheme)
            #expect(response.error?.message.contains("passwd") == false)
            #expect(response.error?.message.contains("127.0.0.1") == false)
            let direct = await Self.fetch(engine, "gopher://127.0.0.1:\(origin.port)/")
            #expect(direct.error?.code == .unsupportedScheme)
        }
    }

    @Test("a redirect target with user info or over 8 KiB is invalid_url, and is not requested")
    func redirectTargetChecks() async throws {
        try await Self.withOrigin { origin, engine in
            let userInfo = "http%3A%2F%2Fuser%3Ahunter2%40127.0.0.1%3A\(origin.port)%2Fok.png"
            for target in [userInfo, "%2F%2Fuser%40127.0.0.1%3A\(origin.port)%2Fok.png"] {
                origin.resetStats()
                let response = await Self.fetch(engine, origin.url("/redirect-to?url=\(target)"))
                #expect(response.error?.code == .invalidURL, "\(target)")
                #expect(response.error?.message.contains("user info") == true)
                #expect(response.error?.message.contains("hunter2") == false)
                #expect(origin.stats.requests == 1, "the target must not be requested")
            }
            origin.resetStats()
            let long = await Self.fetch(
                engine, origin.url("/redirect-to?url=%2Fok.png%3Fpad%3D" + String(repeating: "a", count: 8200)))
            #expect(long.error?.code == .invalidURL)
            #expect(origin.stats.requests == 1)
            // An @ after the authority is fine, as in a job URL.
            let atInPath = await Self.fetch(engine, origin.url("/redirect-to?url=%2Fok.png%3Fby%3Da%40b"))
            #expect(atInPath.error == nil)
            #expect(atInPath.redirects == 1)
        }
    }

    /// libcurl follows a `Location` on every 3xx status, not only on 301, 302, 303, 307 and 308.
    @Test(
        "a redirect target with user info is refused on any 3xx status libcurl follows",
        arguments: [300, 304, 305, 306, 399])
    func redirectChecksOnEveryFollowedStatus(status: Int) async throws {
        try await Self.withOrigin { origin, engine in
            let userInfo = "http%3A%2F%2Fuser%3Ahunter2%40127.0.0.1%3A\(origin.port)%2Fok.png"
            let response = await Self.fetch(engine, origin.url("/redirect-to?status=\(status)&url=\(userInfo)"))
            #expect(response.error?.code == .invalidURL, "status \(status): \(String(describing: response.error))")
            #expect(origin.stats.requests == 1, "the target must not be requested")
        }
    }

    @Test("a malformed URL is invalid_url, an unknown host dns_failure, a closed port connect_failed")
    func setupFailures() async throws {
        try await Self.withOrigin { origin, engine in
            let malformed = await Self.fetch(engine, "http://[::1")
            #expect(malformed.error?.code == .invalidURL)
            let unknown = await Self.fetch(engine, "http://no-such-host.invalid/")
            #expect(unknown.error?.code == .dnsFailure)
            // Bind and close a port so nothing listens on it.
            let closed = try await TestOrigin.start()
            let port = closed.port
            try await closed.shutdown()
            let refused = await Self.fetch(engine, "http://127.0.0.1:\(port)/ok.png")
            #expect(refused.error?.code == .connectFailed)
        }
    }

    @Test("the address policy vetoes the first hop and redirect hops")
    func addressVeto() async throws {
        let calls = Atomic<Int>(0)
        try await Self.withOrigin(addressPolicy: { address in
            calls.add(1, ordering: .relaxed)
            guard address.pointee.sa_family == sa_family_t(AF_INET) else { return "non-IPv4" }
            let ip = address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) {
                UInt32(bigEndian: $0.pointee.sin_addr.s_addr)
            }
            return ip == 0x7F00_0001 ? "loopback" : nil
        }) { origin, engine in
            let response = await Self.fetch(engine, origin.url("/ok.png"))
            #expect(response.error?.code == .forbiddenAddress)
            #expect(response.error?.message == "refused to connect to a loopback address")
            #expect(response.error?.retryable == false)
            #expect(calls.load(ordering: .relaxed) >= 1)
            #expect(origin.stats.connections == 0)
        }
        // Allowed first hop (127.0.0.1), vetoed redirect hop (127.0.0.2).
        try await Self.withOrigin(addressPolicy: { address in
            let ip = address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) {
                UInt32(bigEndian: $0.pointee.sin_addr.s_addr)
            }
            return ip == 0x7F00_0002 ? "loopback" : nil
        }) { origin, engine in
            let target = "http%3A%2F%2F127.0.0.2%3A\(origin.port)%2Fok.png"
            let response = await Self.fetch(engine, origin.url("/redirect-to?url=\(target)"))
            #expect(response.error?.code == .forbiddenAddress)
            #expect(await Self.fetch(engine, origin.url("/ok.png")).error == nil)
            // A request that skips the veto tries to connect (nothing listens on 127.0.0.2).
            var unchecked = FetchRequest(url: origin.url("/redirect-to?url=\(target)"))
            unchecked.checkAddresses = false
            #expect(await Self.fetch(engine, unchecked).error?.code == .connectFailed)
        }
    }

    @Test("an inspector's rejection stops the transfer early with its error")
    func inspectorRejects() async throws {
        let largestSeen = Atomic<Int>(0)
        try await Self.withOrigin { origin, engine in
            var request = FetchRequest(url: origin.url("/endless"))
            request.inspector = { body in
                largestSeen.store(body.count, ordering: .relaxed)
                return body.count >= 32 * 1024 ? .reject(.tooManyPixels(width: 1, height: 1)) : .needMore
            }
            let response = await Self.fetch(engine, request)
            #expect(response.failure == .rejected(.tooManyPixels(width: 1, height: 1)))
            #expect(response.body.isEmpty)
            let seen = largestSeen.load(ordering: .relaxed)
            #expect(seen >= 32 * 1024)
            #expect(seen < 256 * 1024)
        }
    }

    /// The inspector runs on the fetch loop's only thread, which drives every transfer. An inspector
    /// that cannot decide (a JPEG that is all stray bytes before its frame header) must not be
    /// shown the whole body again after every chunk: that is quadratic in the body.
    @Test("an undecided inspector sees about the body's size in all, not its square")
    func undecidedInspectorWorkIsLinear() async throws {
        let shown = Atomic<Int>(0)
        let limit = 4 << 20
        try await Self.withOrigin { origin, engine in
            var request = FetchRequest(url: origin.url("/endless"))
            request.inspector = { body in
                shown.add(body.count, ordering: .relaxed)
                return body.count >= limit ? .reject(.tooManyPixels(width: 1, height: 1)) : .needMore
            }
            let response = await Self.fetch(engine, request)
            #expect(response.failure == .rejected(.tooManyPixels(width: 1, height: 1)))
            let total = shown.load(ordering: .relaxed)
            #expect(total <= 4 * limit, "\(total) bytes inspected for a body of \(limit)")
        }
    }

    @Test("an accepting inspector is asked once and the body completes")
    func inspectorAccepts() async throws {
        let calls = Atomic<Int>(0)
        try await Self.withOrigin { origin, engine in
            var request = FetchRequest(url: origin.url("/ok.png"))
            request.inspector = { body in
                calls.add(1, ordering: .relaxed)
                return body.count >= 8 ? .accept : .needMore
            }
            let response = await Self.fetch(engine, request)
            #expect(response.error == nil)
            #expect(response.body == TestOrigin.okBody)
            #expect(calls.load(ordering: .relaxed) == 1)
        }
    }

    @Test("sequential fetches reuse the keep-alive connection")
    func connectionReuse() async throws {
        try await Self.withOrigin { origin, engine in
            for _ in 0..<50 {
                let response = await Self.fetch(engine, origin.url("/ok.png"))
                #expect(response.error == nil)
            }
            #expect(origin.stats.requests == 50)
            #expect(origin.stats.connections <= 2)
        }
    }

    @Test("PUT sends the body with the method; HEAD gets no body")
    func putAndHead() async throws {
        try await Self.withOrigin { origin, engine in
            var put = FetchRequest(url: origin.url("/echo"))
            put.method = .put
            put.uploadBody = Array(0..<200).map { UInt8($0) }
            let echoed = await Self.fetch(engine, put)
            #expect(echoed.error == nil)
            #expect(echoed.body == put.uploadBody)
            var head = FetchRequest(url: origin.url("/ok.png"))
            head.method = .head
            let headResponse = await Self.fetch(engine, head)
            #expect(headResponse.error == nil)
            #expect(headResponse.httpStatus == 200)
            #expect(headResponse.body.isEmpty)
        }
    }

    @Test("after shutdown, fetches complete at once with aborted")
    func afterShutdown() async throws {
        let engine = try FetchEngine(configuration: Self.configuration(), addressPolicy: nil)
        engine.shutdown()
        engine.shutdown()
        let response = await Self.fetch(engine, "http://127.0.0.1:1/")
        #expect(response.failure == .aborted)
        #expect(engine.activeTransfers == 0)
    }
}
