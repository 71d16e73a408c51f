import Dispatch
import Foundation
import ImageFetchWorker
import Logging
import Synchronization

/// The scenarios of issue 17, with origins of their own on other loopback addresses:
/// - `mixed`: 3,000 jobs to the fast origin (nginx) alone, then again with 300 jobs (one in eleven)
///   for an origin on 127.0.0.2 that answers in 2 s; the figure is the fast origin's rate beside the
///   slow one as a share of its rate alone. Concurrency 32.
/// - `capacity`: 600 jobs for an origin on 127.0.0.3 that serves 8 requests at once (100 ms each)
///   and answers 429 with `Retry-After: 1` beyond that; concurrency 64, retry delay 1 s, 20 attempts.
///   The figures are refused requests per image served and the share of the capacity used.
/// - `capacity4`, `capacity12`: the same with 4 or 12 workers on the one queue, a fleet whose
///   replicas each learn the origin's limit on their own (`HTTP_PORT` + i for replica i).
///
/// Each run starts the worker once, publishes, and times from the first publish to the last result.
struct OriginScenarios {
    let options: RunOptions

    func run() throws -> Int32 {
        var configuration = WorkerConfiguration()
        configuration.amqp.urls = try AMQPURL.parseList(options.amqpURL)
        let runID = String(UInt32.random(in: 0...UInt32.max), radix: 36)
        let name = options.scenario.name
        configuration.queue.jobs = "bench.\(name).\(runID).jobs"
        configuration.queue.results = "bench.\(name).\(runID).results"
        configuration.queue.dead = "bench.\(name).\(runID).dead"
        guard let png = FileManager.default.contents(atPath: options.png) else {
            throw BenchError("cannot read the PNG \(options.png)")
        }
        // The topology first: the collector consumes the results queue without declaring it.
        try JobPublisher(configuration: configuration, logger: quietLogger("bench.publisher")).close()
        let results = try IDCollector(configuration: configuration)
        defer { results.close() }
        var figures: [Figure]
        switch name {
        case "mixed":
            figures = try mixed(configuration, results: results, body: Array(png))
        default:
            figures = try capacity(configuration, results: results, body: Array(png))
        }
        report(figures)
        return figures.contains { $0.met == "no" } ? 1 : 0
    }

    // MARK: - mixed

    private func mixed(_ configuration: WorkerConfiguration, results: IDCollector, body: [UInt8]) throws -> [Figure] {
        let slow = try SlowOrigin.start(
            host: "127.0.0.2", delayMilliseconds: 2000, body: body, contentType: "image/png")
        defer { slow.shutdown() }
        let worker = try startWorker(configuration, ["WORKER_CONCURRENCY": "32"])
        defer { stop(worker) }
        let fastURL = options.fastOrigin + "/bench.png"
        let count = max(options.jobs, 11)

        let alone = (0..<count).map { ("alone-\($0)", fastURL + "?a=\($0)") }
        let aloneSeconds = try publishAndWait(configuration, alone, results: results, until: Set(alone.map(\.0)))
        var mix: [(String, String)] = []
        for index in 0..<count {
            mix.append(("fast-\(index)", fastURL + "?j=\(index)"))
            if index % 10 == 9 {
                mix.append(("slow-\(index / 10)", "http://127.0.0.2:\(slow.port)/slow.png?j=\(index / 10)"))
            }
        }
        let fastIDs = Set(mix.map(\.0).filter { $0.hasPrefix("fast-") })
        let start = Date()
        let fastSeconds = try publishAndWait(configuration, mix, results: results, until: fastIDs)
        let allIDs = Set(alone.map(\.0) + mix.map(\.0))
        try wait(results, until: allIDs, since: start)
        let allSeconds = Date().timeIntervalSince(start)
        let metrics = LocalHTTP.get(port: options.httpPort, path: "/metrics") ?? ""
        let share = aloneSeconds / fastSeconds
        let ok = results.ok(allIDs)
        return [
            .init(name: "messages/s", value: grouped(Double(count) / fastSeconds)),
            .init(
                name: "fast origin alone",
                value: String(
                    format: "%.2f s for %@ jobs (%@/s)", aloneSeconds,
                    grouped(Double(count)), grouped(Double(count) / aloneSeconds))),
            .init(name: "fast origin beside the slow one", value: String(format: "%.2f s", fastSeconds)),
            .init(
                name: "fast origin's share of its rate alone", value: String(format: "%.1f %%", share * 100),
                target: "≥ 50 %", met: yes(share >= 0.5)),
            .init(name: "jobs ok", value: "\(ok) of \(allIDs.count)", target: "all", met: yes(ok == allIDs.count)),
            .init(name: "all jobs done (slow origin included)", value: String(format: "%.1f s", allSeconds)),
            .init(name: "slow origin: most requests at once", value: "\(slow.stats.maxInFlight)"),
            .init(
                name: "deferrals",
                value: Self.sum(metrics, "image_fetch_deferrals_total").map { String(Int($0)) } ?? "—"),
        ]
    }

    // MARK: - capacity

    private func capacity(_ configuration: WorkerConfiguration, results: IDCollector, body: [UInt8]) throws -> [Figure]
    {
        let capacity = 8
        let service = 0.1
        let origin = try SlowOrigin.start(
            host: "127.0.0.3", delayMilliseconds: Int64(service * 1000), body: body,
            contentType: "image/png", capacity: capacity, retryAfter: "1")
        defer { origin.shutdown() }
        let replicas = max(options.scenario.replicas, 1)
        // All started before the jobs are published, so that every replica takes its share.
        let workers = try (0..<replicas).map { replica in
            try startWorker(
                configuration,
                [
                    "WORKER_CONCURRENCY": "64", "RETRY_DELAYS": "1s", "RETRY_MAX_ATTEMPTS": "20",
                ], replica: replica)
        }
        defer { workers.forEach(stop) }
        let jobs = (0..<max(options.jobs, 1)).map { ("cap-\($0)", "http://127.0.0.3:\(origin.port)/cap.png?j=\($0)") }
        let seconds = try publishAndWait(configuration, jobs, results: results, until: Set(jobs.map(\.0)))
        let stats = origin.stats
        let served = stats.requests - stats.refused
        let refusedPerImage = Double(stats.refused) / Double(max(served, 1))
        let used = Double(served) * service / (Double(capacity) * seconds)
        let ok = results.ok(Set(jobs.map(\.0)))
        return [
            .init(name: "messages/s", value: grouped(Double(jobs.count) / seconds)),
            .init(name: "workers (concurrency 64 each)", value: "\(replicas)"),
            .init(
                name: "refused requests per image",
                value: String(
                    format: "%.3f (%d refused, %d served)", refusedPerImage,
                    stats.refused, served),
                target: "≤ 0.1", met: yes(refusedPerImage <= 0.1)),
            .init(
                name: "origin's capacity used",
                value: String(format: "%.1f %% (%.1f s for %d images)", used * 100, seconds, served),
                target: "≥ 70 %", met: yes(used >= 0.7)),
            .init(name: "jobs ok", value: "\(ok) of \(jobs.count)", target: "all", met: yes(ok == jobs.count)),
            .init(name: "most requests at once at the origin", value: "\(stats.maxInFlight)"),
        ]
    }

    // MARK: - Steps

    /// Starts a worker; replica i of a fleet serves its /metrics and /readyz on `httpPort` + i.
    private func startWorker(
        _ configuration: WorkerConfiguration, _ settings: [String: String], replica: Int = 0
    ) throws -> Process {
        let port = options.httpPort + replica
        let process = Process()
        process.executableURL = URL(fileURLWithPath: options.worker)
        process.arguments = ["run"]
        var environment = ProcessInfo.processInfo.environment.filter {
            !$0.key.hasPrefix("AMQP_") && !$0.key.hasPrefix("QUEUE_")
        }
        environment.merge(
            [
                "AMQP_URL": options.amqpURL, "QUEUE_JOBS": configuration.queue.jobs,
                "QUEUE_RESULTS": configuration.queue.results, "QUEUE_DEAD": configuration.queue.dead,
                "STORAGE_KIND": "none", "FETCH_ALLOW_PRIVATE_NETWORKS": "true", "LOG_LEVEL": "warning",
                "HTTP_PORT": String(port), "HTTP_HOST": "127.0.0.1",
            ].merging(settings) { $1 }
        ) { $1 }
        process.environment = environment
        let logPath = options.workDir + "/worker-\(options.scenario.name)\(replica > 0 ? "-\(replica)" : "").log"
        _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        let log = try FileHandle(forWritingTo: URL(fileURLWithPath: logPath))
        process.standardOutput = log
        process.standardError = log
        try process.run()
        // Ready once /readyz answers 200: the queues are declared and the consumer runs.
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline, LocalHTTP.get(port: port, path: "/readyz") != "ready\n" {
            Thread.sleep(forTimeInterval: 0.05)
        }
        return process
    }

    private func stop(_ process: Process) {
        guard process.isRunning else { return }
        process.terminate()
        process.waitUntilExit()
    }

    /// Publishes `jobs` with confirms, then waits for a result for every id in `ids`; the seconds
    /// from the first publish.
    private func publishAndWait(
        _ configuration: WorkerConfiguration, _ jobs: [(String, String)], results: IDCollector,
        until ids: Set<String>
    ) throws -> Double {
        let start = Date()
        let publisher = try JobPublisher(configuration: configuration, logger: quietLogger("bench.publisher"))
        let confirmed = publisher.publish(bodies: jobs.lazy.map { JobPublisher.jobBody(id: $0.0, url: $0.1) })
        publisher.close()
        guard confirmed == jobs.count else {
            throw BenchError("only \(confirmed) of \(jobs.count) jobs were confirmed")
        }
        try wait(results, until: ids, since: start)
        return Date().timeIntervalSince(start)
    }

    private func wait(_ results: IDCollector, until ids: Set<String>, since start: Date) throws {
        while !results.hasAll(ids) {
            guard Date().timeIntervalSince(start) < options.stallSeconds * 5 else {
                throw BenchError("results missing after \(Int(options.stallSeconds * 5)) s")
            }
            Thread.sleep(forTimeInterval: 0.01)
        }
    }

    /// The sum of every series of `name` (all labels) in a Prometheus text page; nil if none.
    static func sum(_ page: String, _ name: String) -> Double? {
        let values = page.split(separator: "\n").filter { $0.hasPrefix(name + " ") || $0.hasPrefix(name + "{") }
            .compactMap { $0.split(separator: " ").last.flatMap { Double($0) } }
        return values.isEmpty ? nil : values.reduce(0, +)
    }

    /// The value of an unlabelled sample in a Prometheus text page.
    static func sample(_ page: String, _ name: String) -> String? {
        page.split(separator: "\n").first { $0.hasPrefix(name + " ") }.map { String($0.dropFirst(name.count + 1)) }
    }

    private func report(_ figures: [Figure]) {
        let scenario = options.scenario
        print("")
        print("== \(scenario.name): \(scenario.title)")
        for figure in figures {
            print(
                "   \(figure.name.padding(toLength: 46, withPad: " ", startingAt: 0)) \(figure.value)  [target \(figure.target): \(figure.met)]"
            )
        }
        if let rowsFile = options.rowsFile {
            let rows = figures.map {
                [scenario.name, $0.name, $0.value, $0.target, $0.met].joined(separator: "\t") + "\n"
            }.joined()
            try? rows.write(toFile: rowsFile, atomically: true, encoding: .utf8)
        }
        if let markdownFile = options.markdownFile {
            var md = "### \(scenario.name): \(scenario.title)\n\n"
            md +=
                "Measured \(ISO8601DateFormatter().string(from: Date())) with `\(options.command)`, worker `\(options.worker)`; "
            md +=
                "load average \(ProcStats.loadAverage()) at the end.\n\n| figure | value | target | met |\n|---|---|---|---|\n"
            for figure in figures { md += "| \(figure.name) | \(figure.value) | \(figure.target) | \(figure.met) |\n" }
            try? (md + "\n").write(toFile: markdownFile, atomically: true, encoding: .utf8)
        }
    }
}

/// Consumes the results queue and keeps each job id's status.
final class IDCollector: BrokerSessionDelegate, @unchecked Sendable {
    // @unchecked Sendable: `statuses` is behind a Mutex; `session` is written once, in init.
    private let statuses = Mutex<[String: String]>([:])
    private var session: BrokerSession?

    init(configuration: WorkerConfiguration) throws {
        session = try startResultsConsumer(configuration, delegate: self)
    }

    func session(_ session: BrokerSession, didReceive delivery: Delivery) {
        session.ackOnQueue(delivery)
        guard let object = try? JSONSerialization.jsonObject(with: Data(delivery.body)) as? [String: Any],
            let id = object["id"] as? String
        else { return }
        let status = object["status"] as? String ?? "?"
        statuses.withLock { $0[id] = status }
    }
    func session(_ session: BrokerSession, didConnect epoch: UInt64) {}
    func session(_ session: BrokerSession, didLoseConnection error: AMQPError) {}
    func session(_ session: BrokerSession, blocked: Bool) {}

    func hasAll(_ ids: Set<String>) -> Bool { statuses.withLock { statuses in ids.allSatisfy { statuses[$0] != nil } } }
    func ok(_ ids: Set<String>) -> Int { statuses.withLock { statuses in ids.count { statuses[$0] == "ok" } } }
    func close() { session?.close() }
}
