import ImageFetchWorker
import Testing

/// The fetch engine's part of the opt-out signals against a real origin on 127.0.0.1: the header
/// check that stops a transfer before its body, and the robots.txt gate's fetch (a body cut at
/// the parse limit, redirects past `fetch.max_redirects`, one fetch for many callers).
@Suite struct OptOutEngineTests {
    static let policy = OptOutPolicy(directives: ["noai"], tdmReservation: true, userAgent: "image-fetch-worker")

    static func withEngine(
        _ behaviour: OptOutOrigin.Behaviour = .init(), change: (inout WorkerConfiguration.Fetch) -> Void = { _ in },
        _ body: (OptOutOrigin, FetchEngine, WorkerConfiguration.Fetch) async throws -> Void
    ) async throws {
        let origin = try await OptOutOrigin.start(behaviour)
        let configuration = FetchEngineTests.configuration(change)
        let engine = try FetchEngine(configuration: configuration, addressPolicy: { _ in nil })
        do {
            try await body(origin, engine, configuration)
        } catch {
            engine.shutdown()
            try await origin.shutdown()
            throw error
        }
        engine.shutdown()
        try await origin.shutdown()
    }

    @Test func aSignalStopsTheTransferAtItsHeaders() async throws {
        try await Self.withEngine { origin, engine, _ in
            var request = FetchRequest(url: origin.url("/noai-endless"))
            request.optOut = Self.policy
            let response = await FetchEngineTests.fetch(engine, request)
            #expect(response.failure == .optedOut(.xRobotsTag(directive: "noai")))
            #expect(response.httpStatus == 200)
            #expect(response.body.isEmpty)
            request.url = origin.url("/tdm/a.png")
            #expect(await FetchEngineTests.fetch(engine, request).failure == .optedOut(.tdmReservation))
            // The header of another crawler, or no policy, lets the image through.
            request.url = origin.url("/scoped/a.png")
            #expect(await FetchEngineTests.fetch(engine, request).failure == nil)
            let unchecked = await FetchEngineTests.fetch(engine, FetchRequest(url: origin.url("/noai/a.png")))
            #expect(unchecked.failure == nil && unchecked.body == TestOrigin.okBody)
        }
    }

    /// libcurl reads `HTTP/1.1  200` (two spaces) as a 200 and keeps the body: the signal must be
    /// read for it too, or the image is stored against the origin's word.
    @Test func aSignalCountsAfterAStatusLineWithExtraSpace() async throws {
        let origin = try RawOrigin(responses: [
            "/spaced.png": "HTTP/1.1  200 OK\r\nX-Robots-Tag: noai\r\nContent-Length: 5\r\n\r\nhello"
        ])
        defer { origin.stop() }
        let engine = try FetchEngine(configuration: FetchEngineTests.configuration(), addressPolicy: nil)
        defer { engine.shutdown() }
        var request = FetchRequest(url: origin.url("/spaced.png"))
        request.optOut = Self.policy
        let response = await FetchEngineTests.fetch(engine, request)
        #expect(
            response.failure == .optedOut(.xRobotsTag(directive: "noai")), "\(String(describing: response.failure))")
        #expect(response.httpStatus == 200)
    }

    @Test func aBodyCutAtItsLimitIsASuccess() async throws {
        try await Self.withEngine(change: { $0.maxBytes = 1 << 20 }) { origin, engine, _ in
            var request = FetchRequest(url: origin.url("/noai-endless"))
            request.truncateBodyAt = 100_000
            let response = await FetchEngineTests.fetch(engine, request)
            #expect(response.failure == nil)
            #expect(response.body.count == 100_000)
        }
    }

    @Test func robotsTxtFollowsFiveRedirectsWhateverFetchMaxRedirectsSays() async throws {
        let behaviour = OptOutOrigin.Behaviour(robots: .body("User-agent: *\nDisallow: /no/\n"), robotsRedirects: 4)
        try await Self.withEngine(behaviour, change: { $0.maxRedirects = 0 }) { origin, engine, configuration in
            let gate = RobotsGate(configuration: configuration, engine: engine, metrics: nil)
            let origin127 = Origin(scheme: "http", host: "127.0.0.1", port: origin.port)
            let verdict = await withCheckedContinuation { continuation in
                gate.check(origin.url("/no/a.png"), origin: origin127) { continuation.resume(returning: $0) }
            }
            #expect(verdict == .optedOut(.robotsDisallowed))
            #expect(origin.log.paths.last == "/robots-final.txt")
        }
        // Seven redirects are more than the five RFC 9309 asks for: unreachable, so all is disallowed.
        let tooMany = OptOutOrigin.Behaviour(robots: .body("User-agent: *\nDisallow:\n"), robotsRedirects: 6)
        try await Self.withEngine(tooMany) { origin, engine, configuration in
            let gate = RobotsGate(configuration: configuration, engine: engine, metrics: nil)
            let verdict = await withCheckedContinuation { continuation in
                gate.check(origin.url("/a.png"), origin: Origin(scheme: "http", host: "127.0.0.1", port: origin.port)) {
                    continuation.resume(returning: $0)
                }
            }
            #expect(verdict == .optedOut(.robotsUnreachable))
        }
    }

    @Test func concurrentChecksShareOneRobotsFetch() async throws {
        let behaviour = OptOutOrigin.Behaviour(
            robots: .body("User-agent: image-fetch-worker\nDisallow: /no/\n"),
            robotsDelay: .milliseconds(200))
        try await Self.withEngine(behaviour) { origin, engine, configuration in
            let gate = RobotsGate(configuration: configuration, engine: engine, metrics: nil)
            let key = Origin(scheme: "http", host: "127.0.0.1", port: origin.port)
            let verdicts = await withTaskGroup(of: (Int, RobotsGate.Verdict).self) { group in
                for index in 0..<40 {
                    group.addTask {
                        let path = index.isMultiple(of: 2) ? "/no/\(index).png" : "/yes/\(index).png"
                        return (
                            index,
                            await withCheckedContinuation { continuation in
                                gate.check(origin.url(path), origin: key) { continuation.resume(returning: $0) }
                            }
                        )
                    }
                }
                var all: [Int: RobotsGate.Verdict] = [:]
                for await (index, verdict) in group { all[index] = verdict }
                return all
            }
            for (index, verdict) in verdicts {
                #expect(verdict == (index.isMultiple(of: 2) ? .optedOut(.robotsDisallowed) : .allowed), "\(index)")
            }
            #expect(verdicts.count == 40)
            #expect(origin.log.count("/robots.txt") == 1)
        }
    }
}
