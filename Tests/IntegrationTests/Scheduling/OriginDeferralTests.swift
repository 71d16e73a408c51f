import Foundation
import ImageFetchWorker
import Testing

/// When jobs leave the prefetch window, end to end (issue 31 §4 and §6, issue 33 defect 5): the
/// worker process, the real RabbitMQ of `make test`, and origins on loopback addresses of their own
/// (or many host names mapped onto one with `fetch.resolve`).
@Suite(.enabled(if: TestBroker.isAvailable, "needs the RabbitMQ that `make test` starts"), .serialized)
struct OriginDeferralTests {
    /// A worker with its operations endpoint on a free port.
    static func worker(
        _ configuration: WorkerConfiguration, _ extra: [String: String]
    ) throws
        -> (WorkerProcess, OperationsEndpoint)
    {
        let port = try TestBroker.freePort()
        let worker = try OriginSchedulingTests.worker(
            configuration,
            extra.merging(
                ["HTTP_PORT": "\(port)", "HTTP_HOST": "127.0.0.1"]) { _, new in new })
        return (worker, try OperationsEndpoint(port: port))
    }

    static func deferrals(_ endpoint: OperationsEndpoint) async -> Double? {
        let values = await endpoint.metrics().values
        let series = values.filter { $0.key.hasPrefix("image_fetch_deferrals_total{") }
        return series.isEmpty ? nil : series.values.reduce(0, +)
    }

    /// Issue 31: a popular origin (a quarter of the jobs) among 50 quieter ones, all healthy
    /// (50 ms). Many origins are active and the popular one always holds more than an equal part of
    /// the window, but its queue drains fast at its own pace: nothing is deferred.
    @Test(.timeLimit(.minutes(4)))
    func aPopularHealthyOriginAmongFiftyIsNotDeferred() async throws {
        let origin = try await SchedulingOrigin.start(host: "127.0.0.8", .init(delay: .milliseconds(50)))
        let names = (0...50).map { "o\($0).sched.test" }
        let configuration = try TestBroker.configuration("popular")
        defer { TestBroker.cleanUp(configuration) }
        #expect(try TestBroker.publish(configuration, bodies: []) == 0)  // declares the queues
        let results = try QueueCollector(configuration, queue: configuration.queue.results)
        defer { results.close() }
        // Every fourth job for o0, the rest spread over the fifty others.
        let jobs = (0..<1_200).map { index in
            let name = index % 4 == 0 ? names[0] : names[1 + (index * 7) % 50]
            return ("p-\(index)", origin.url("/p-\(index).png", name: name))
        }
        #expect(
            try TestBroker.publish(configuration, bodies: jobs.map { JobPublisher.jobBody(id: $0.0, url: $0.1) })
                == jobs.count)
        let (worker, endpoint) = try Self.worker(
            configuration,
            [
                "WORKER_CONCURRENCY": "8", "AMQP_PREFETCH": "64", "FETCH_RESOLVE": origin.resolve(names),
            ])
        let ids = Set(jobs.map(\.0))
        #expect(
            await OriginSchedulingTests.waitForIDs(results, ids, since: Date(), timeout: 120) != nil,
            "worker log:\n\(worker.log.suffix(2000))")
        let (byID, _) = OriginSchedulingTests.byID(results)
        #expect(byID.values.allSatisfy { $0["status"] as? String == "ok" })
        let deferred = await Self.deferrals(endpoint)
        let count = deferred.map { "\(Int($0))" } ?? "?"
        print("popular: \(jobs.count) jobs over \(names.count) origins, \(count) deferred")
        #expect(deferred == 0, "worker log:\n\(worker.log.suffix(2000))")
        #expect(await worker.stop() == 0)
        try await origin.shutdown()
    }

    /// Issue 31 §6: a 429 without `Retry-After` pauses its origin (at least half a second, the
    /// first step of the backoff with its jitter), and only that origin: the other origin's
    /// requests go on meanwhile. The refused job is retried and ends ok.
    @Test(.timeLimit(.minutes(3)))
    func aRefusalWithoutRetryAfterPausesOnlyItsOrigin() async throws {
        let refusing = try await SchedulingOrigin.start(
            host: "127.0.0.9", .init(delay: .milliseconds(20), tooManyFirst: 1))
        let healthy = try await SchedulingOrigin.start(host: "127.0.0.10", .init(delay: .milliseconds(20)))
        let configuration = try TestBroker.configuration("backoff")
        defer { TestBroker.cleanUp(configuration) }
        #expect(try TestBroker.publish(configuration, bodies: []) == 0)  // declares the queues
        let results = try QueueCollector(configuration, queue: configuration.queue.results)
        defer { results.close() }
        var jobs: [(String, String)] = []
        for index in 0..<300 {
            jobs.append(("h-\(index)", healthy.url("/h-\(index).png")))
            if index % 10 == 0 { jobs.append(("r-\(index / 10)", refusing.url("/r-\(index / 10).png"))) }
        }
        #expect(
            try TestBroker.publish(configuration, bodies: jobs.map { JobPublisher.jobBody(id: $0.0, url: $0.1) })
                == jobs.count)
        let (worker, _) = try Self.worker(configuration, ["WORKER_CONCURRENCY": "2", "RETRY_DELAYS": "1s"])
        #expect(
            await OriginSchedulingTests.waitForIDs(results, Set(jobs.map(\.0)), since: Date(), timeout: 60) != nil,
            "worker log:\n\(worker.log.suffix(2000))")
        let (byID, _) = OriginSchedulingTests.byID(results)
        #expect(byID.values.allSatisfy { $0["status"] as? String == "ok" })

        let refused = try #require(refusing.log.requests.first { $0.status == 429 })
        // Requests already sent when the 429 went out may still arrive just after it.
        let pauseBegins = refused.arrival + 0.1, pauseEnds = refused.arrival + 0.5
        let toRefusing = refusing.log.requests.filter { $0.arrival > pauseBegins && $0.arrival < pauseEnds }
        #expect(toRefusing.isEmpty, "\(toRefusing.count) requests to the paused origin: \(toRefusing.map(\.arrival))")
        // The two origins' clocks start milliseconds apart: meanwhile the healthy one is served.
        let toHealthy = healthy.log.requests.filter { $0.arrival > pauseBegins && $0.arrival < pauseEnds }
        #expect(toHealthy.count >= 5, "the healthy origin got \(toHealthy.count) requests during the other's pause")
        #expect(worker.log.contains("origin paused after a refusal without Retry-After"))
        #expect(await worker.stop() == 0)
        try await refusing.shutdown()
        try await healthy.shutdown()
    }

    /// Issue 33, defect 5, scaled down: 200 jobs for A, then 20 for B; A answers 429 with
    /// `Retry-After: 60`. A's paused jobs fill the window while A is the only origin the worker
    /// sees; they must leave it, so that B's jobs are reached and done in seconds, not after the
    /// pause.
    @Test(.timeLimit(.minutes(3)))
    func aPausedOriginAloneDoesNotHoldBackTheJobsBehindIt() async throws {
        let paused = try await SchedulingOrigin.start(
            host: "127.0.0.11", .init(delay: .milliseconds(10), retryAfter: "60", tooManyFirst: 1_000_000))
        let next = try await SchedulingOrigin.start(host: "127.0.0.12", .init(delay: .milliseconds(10)))
        let configuration = try TestBroker.configuration("behind-paused")
        defer { TestBroker.cleanUp(configuration) }
        #expect(try TestBroker.publish(configuration, bodies: []) == 0)  // declares the queues
        let results = try QueueCollector(configuration, queue: configuration.queue.results)
        defer { results.close() }
        let aJobs = (0..<200).map { ("a-\($0)", paused.url("/a-\($0).png")) }
        let bJobs = (0..<20).map { ("b-\($0)", next.url("/b-\($0).png")) }
        let bodies = (aJobs + bJobs).map { JobPublisher.jobBody(id: $0.0, url: $0.1) }
        #expect(try TestBroker.publish(configuration, bodies: bodies) == aJobs.count + bJobs.count)
        let start = Date()
        let (worker, endpoint) = try Self.worker(configuration, ["WORKER_CONCURRENCY": "8", "AMQP_PREFETCH": "16"])
        let took = await OriginSchedulingTests.waitForIDs(results, Set(bJobs.map(\.0)), since: start, timeout: 30)
        #expect(took != nil, "B's jobs were still waiting after 30 s; worker log:\n\(worker.log.suffix(2000))")
        print(
            "behind-paused: B's 20 jobs done after \(took.map { String(format: "%.1f", $0) } ?? "> 30") s, "
                + "\(Int(await Self.deferrals(endpoint) ?? -1)) deferrals")
        #expect((took ?? 60) < 15)
        #expect(next.log.served == 20)
        #expect(await worker.stop() == 0)
        try await paused.shutdown()
        try await next.shutdown()
    }
}
