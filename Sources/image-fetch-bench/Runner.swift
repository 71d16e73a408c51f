import Dispatch
import Foundation
import ImageFetchWorker
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// What `run` is told by scripts/bench.sh.
struct RunOptions {
    var scenario: Scenario
    var jobs: Int
    var warmupFraction = 0.05
    var worker = ".build/release/image-fetch-worker"
    var amqpURL = "amqp://guest:guest@127.0.0.1:5699/%2F"
    /// Base URL of the nginx origin, e.g. http://127.0.0.1:18080
    var fastOrigin = "http://127.0.0.1:18080"
    var png = ""
    var jpeg = ""
    var httpPort = 19690
    var workDir = "/tmp"
    var rowsFile: String?
    var markdownFile: String?
    /// The JPEG origin's own rate (requests/s at concurrency 16), measured by the script with wrk or curl.
    var originRate: Double?
    var originTool = ""
    var watch: [(name: String, pids: [Int32])] = []
    var command = "scripts/bench.sh"
    var versions = ""
    var stallSeconds = 60.0
    /// The internet scenario's job list (`InternetJobs`).
    var jobsFile: String?
    /// More environment for the worker (or the yardstick), over the driver's own.
    var environment: [String: String] = [:]
    /// true: consume the results while the worker runs (the counted window includes the broker's
    /// work of delivering them to the driver). false: only poll the results queue's depth during the
    /// run, and consume the results after the worker stopped.
    var consumeDuringRun = true
}

/// The moments the counter marks, with the readings taken there.
struct Reading: Sendable {
    var time: UInt64 = 0
    var workerCPU = 0.0
    var workerFaults = 0.0
    var watchedCPU: [Double] = []
    var driverCPU = 0.0
    var machine: (busy: Double, total: Double) = (0, 0)
    var histogram: String?
}

final class Runner: @unchecked Sendable {
    // @unchecked Sendable: shared state is in Mutexes; the rest is set before threads start.
    let options: RunOptions
    let marks = Mutex<(warmup: Reading?, done: Reading?)>((nil, nil))
    private let workerPID = Atomic<Int32>(0)
    let samples = Mutex(Samples())
    private let sampling = Atomic<Bool>(true)
    private let finished = DispatchSemaphore(value: 0)

    struct Samples {
        var maxThreads = 0
        var maxRSS = 0
        /// (seconds since the warm-up boundary, RSS bytes), once a second after the warm-up.
        var rssSeries: [(Double, Int)] = []
    }

    init(options: RunOptions) { self.options = options }

    private func log(_ text: String) {
        FileHandle.standardError.write(Data("bench[\(options.scenario.name)]: \(text)\n".utf8))
    }

    private func reading() -> Reading {
        let pid = workerPID.load(ordering: .relaxed)
        return Reading(
            time: DispatchTime.now().uptimeNanoseconds,
            workerCPU: ProcStats.cpuSeconds(pid: pid) ?? 0,
            workerFaults: ProcStats.minorFaults(pid: pid) ?? 0,
            watchedCPU: options.watch.map { ProcStats.cpuSeconds(pids: $0.pids) },
            driverCPU: ProcStats.cpuSeconds(pid: getpid()) ?? 0,
            machine: ProcStats.machineTicks())
    }

    /// Runs the scenario; returns the process exit status for the driver.
    func run() throws -> Int32 {
        let scenario = options.scenario
        if scenario.origin == .origins { return try OriginScenarios(options: options).run() }
        let jobs = options.jobs
        let warmup = max(1, min(jobs / 2, Int(Double(jobs) * options.warmupFraction)))
        let loadAtStart = ProcStats.loadAverage()
        let started = Date()

        // Origin.
        var slowOrigin: SlowOrigin?
        var internetJobs: InternetJobs?
        let url: String
        switch scenario.origin {
        case .fastPNG: url = options.fastOrigin + "/bench.png"
        case .fastJPEG: url = options.fastOrigin + "/bench.jpg"
        case .origins:
            throw BenchError("\(scenario.name) runs through OriginScenarios")
        case .internet:
            guard let path = options.jobsFile else { throw BenchError("\(scenario.name) needs --jobs-file") }
            internetJobs = try InternetJobs(path: path, count: jobs)
            url = "\(internetJobs?.urls.count ?? 0) URLs of \(path)"
        case .slowPNG:
            guard let body = FileManager.default.contents(atPath: options.png) else {
                throw BenchError("cannot read the PNG \(options.png)")
            }
            let origin = try SlowOrigin.start(
                delayMilliseconds: Scenario.slowDelayMilliseconds, body: Array(body),
                contentType: "image/png")
            slowOrigin = origin
            url = "http://127.0.0.1:\(origin.port)/slow.png"
        }
        defer { slowOrigin?.shutdown() }

        // Queues of this run, and the jobs, all published and confirmed before the worker starts.
        let runID = String(UInt32.random(in: 0...UInt32.max), radix: 36)
        var configuration = WorkerConfiguration()
        configuration.amqp.urls = try AMQPURL.parseList(options.amqpURL)
        configuration.queue.jobs = "bench.\(scenario.name).\(runID).jobs"
        configuration.queue.results = "bench.\(scenario.name).\(runID).results"
        configuration.queue.dead = "bench.\(scenario.name).\(runID).dead"
        log("publishing \(jobs) jobs for \(url) to \(configuration.queue.jobs)")
        let publishStart = DispatchTime.now().uptimeNanoseconds
        let publisher = try JobPublisher(configuration: configuration, logger: quietLogger("bench.publisher"))
        let prefix = "\(runID)-"
        // The same image each time under a URL of its own (`?j=N`): identical requests in flight
        // share one fetch (issue 35), and the benchmark counts fetches. With newFilePerJob each
        // also names its own storage key.
        let newFiles = scenario.newFilePerJob
        let urls = internetJobs?.urls
        let confirmed = publisher.publish(
            bodies: (0..<jobs).lazy.map {
                JobPublisher.jobBody(
                    id: prefix + String($0), url: urls?[$0] ?? url + "?j=" + String($0),
                    key: newFiles ? "bench/\(runID)/\($0 / 1000)/\($0)" : nil)
            })
        publisher.close()
        let publishSeconds = Double(DispatchTime.now().uptimeNanoseconds - publishStart) / 1e9
        guard confirmed == jobs else {
            throw BenchError("only \(confirmed) of \(jobs) jobs were confirmed by the broker")
        }
        log(
            String(
                format: "published and confirmed in %.1f s (%.0f/s); warm-up %d jobs, then %d counted",
                publishSeconds, Double(jobs) / publishSeconds, warmup, jobs - warmup))

        let mark: @Sendable (ResultCounter.Mark) -> Void = { [self] mark in
            var now = reading()
            switch mark {
            case .warmupDone:
                marks.withLock { $0.warmup = now }
                DispatchQueue.global().async { [self] in
                    let text = LocalHTTP.get(port: options.httpPort, path: "/metrics")
                    marks.withLock { $0.warmup?.histogram = text }
                }
            case .allDone:
                now.histogram = nil
                marks.withLock { $0.done = now }
                finished.signal()
            }
        }
        let polled = SharedCount()
        var counter: ResultCounter?
        if options.consumeDuringRun {
            counter = try ResultCounter(
                configuration: configuration, total: jobs, warmup: warmup, idPrefix: prefix, onMark: mark)
        } else {
            try startPoller(configuration: configuration, jobs: jobs, warmup: warmup, polled: polled, mark: mark)
        }
        defer { counter?.close() }
        func progress() -> Int { counter?.snapshot.distinct ?? polled.value.load(ordering: .relaxed) }

        // The worker.
        let storage = options.workDir + "/images-\(scenario.name)"
        try? FileManager.default.removeItem(atPath: storage)
        let logPath = options.workDir + "/worker-\(scenario.name).log"
        _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: options.worker)
        process.arguments = ["run"]
        var environment = ProcessInfo.processInfo.environment.filter {
            !$0.key.hasPrefix("AMQP_") && !$0.key.hasPrefix("QUEUE_")
        }
        environment.merge([
            "AMQP_URL": options.amqpURL,
            "QUEUE_JOBS": configuration.queue.jobs,
            "QUEUE_RESULTS": configuration.queue.results,
            "QUEUE_DEAD": configuration.queue.dead,
            "WORKER_CONCURRENCY": String(scenario.concurrency),
            "STORAGE_PATH": storage,
            "STORAGE_FSYNC": "false",
            "FETCH_ALLOW_PRIVATE_NETWORKS": "true",
            "LOG_LEVEL": "warning",
            "HTTP_PORT": String(options.httpPort),
            "HTTP_HOST": "127.0.0.1",
        ]) { $1 }
        environment.merge(scenario.workerEnvironment) { $1 }
        environment.merge(options.environment) { $1 }
        process.environment = environment
        let logHandle = try FileHandle(forWritingTo: URL(fileURLWithPath: logPath))
        process.standardOutput = logHandle
        process.standardError = logHandle
        try process.run()
        workerPID.store(process.processIdentifier, ordering: .relaxed)
        // Foundation starts the worker in a process group of its own, so a Ctrl-C does not reach
        // it and it outlives a driver that dies: scripts/bench.sh stops the pid written here.
        let pidFile = options.workDir + "/contender.pid"
        try? "\(process.processIdentifier)\n".write(toFile: pidFile, atomically: true, encoding: .utf8)
        log("worker pid \(process.processIdentifier), concurrency \(scenario.concurrency), log \(logPath)")
        let sampler = startSampler(pid: process.processIdentifier)

        // Wait, watching for stalls and crashes.
        var failure: String?
        var lastProgress = progress()
        var lastProgressAt = Date()
        var lastReport = Date()
        while finished.wait(timeout: .now() + 1) == .timedOut {
            let now = progress()
            if now != lastProgress {
                lastProgress = now
                lastProgressAt = Date()
            }
            if Date().timeIntervalSince(lastReport) >= 10 {
                lastReport = Date()
                let rss = samples.withLock { $0.maxRSS }
                let detail =
                    counter.map { ", \($0.snapshot.failed) failed, \($0.snapshot.duplicates) duplicates" }
                    ?? " (queue depth)"
                log("\(now)/\(jobs) results\(detail), peak RSS \(rss / 1_048_576) MB")
            }
            if !process.isRunning {
                failure = "the worker exited (status \(process.terminationStatus)) after \(now) of \(jobs) results"
                break
            }
            if Date().timeIntervalSince(lastProgressAt) > options.stallSeconds {
                failure = "STALL: no new result for \(Int(options.stallSeconds)) s at \(now) of \(jobs) results"
                break
            }
        }
        let endMetrics = process.isRunning ? LocalHTTP.get(port: options.httpPort, path: "/metrics") : nil
        let status = ProcStats.status(pid: process.processIdentifier)
        sampling.store(false, ordering: .relaxed)
        sampler.wait()
        let originStats = slowOrigin?.stats

        if let failure {
            log(failure)
            if let depth = try? QueueDepth.sample(configuration) {
                for row in depth {
                    log(
                        "  queue \(row.queue): ready \(row.ready.map(String.init) ?? "-"), consumers \(row.consumers.map(String.init) ?? "-")"
                    )
                }
            }
            if let originStats { log("  slow origin: \(originStats)") }
            if let status { log("  worker: RSS \(status.rss / 1_048_576) MB, threads \(status.threads)") }
            log("  last lines of the worker log:")
            let tail = (ProcStats.read(logPath) ?? "").split(separator: "\n").suffix(20)
            for line in tail { log("    \(line)") }
        }

        // Drain: SIGTERM, as an orchestrator would, and time the exit.
        var exitStatus: Int32 = -1
        var drainSeconds = 0.0
        if process.isRunning {
            let t0 = Date()
            kill(process.processIdentifier, SIGTERM)
            let deadline = Date().addingTimeInterval(40)
            while process.isRunning, Date() < deadline { usleep(20_000) }
            if process.isRunning {
                log("the worker did not exit within 40 s of SIGTERM; killing it")
                kill(process.processIdentifier, SIGKILL)
                process.waitUntilExit()
            }
            drainSeconds = Date().timeIntervalSince(t0)
        }
        exitStatus = process.terminationStatus
        try? FileManager.default.removeItem(atPath: pidFile)
        // Results that arrive after the last one (duplicates) get a moment to show up.
        usleep(300_000)
        if counter == nil {
            // Polling mode: now read every result (not timed) for the checks and the durations.
            let late = try ResultCounter(configuration: configuration, total: jobs, warmup: warmup, idPrefix: prefix) {
                _ in
            }
            counter = late
            let deadline = Date().addingTimeInterval(60)
            while late.snapshot.distinct < jobs, Date() < deadline { usleep(50_000) }
            usleep(300_000)
        }
        guard let results = counter else { throw BenchError("no results consumer") }
        let final = results.snapshot
        let leftover = (try? QueueDepth.sample(configuration))?.first?.ready ?? nil

        let (figures, notes) = self.figures(
            of: RunMeasurements(
                jobs: jobs, warmup: warmup, results: results, final: final, leftover: leftover, failure: failure,
                exitStatus: exitStatus, drainSeconds: drainSeconds, workerStatus: status, endMetrics: endMetrics,
                originStats: originStats, publishSeconds: publishSeconds, started: started, internetJobs: internetJobs))
        let loadAtEnd = ProcStats.loadAverage()
        report(
            figures: figures, notes: notes, jobs: jobs, warmup: warmup, loadAtStart: loadAtStart, loadAtEnd: loadAtEnd)
        return failure == nil && exitStatus == 0 ? 0 : 1
    }

    /// Polls the results queue's depth every 20 ms on a connection of its own, and marks the
    /// warm-up boundary and the end by it (the `--results after` mode).
    private func startPoller(
        configuration: WorkerConfiguration, jobs: Int, warmup: Int, polled: SharedCount,
        mark: @escaping @Sendable (ResultCounter.Mark) -> Void
    ) throws {
        let connection = try AMQPConnection()
        try connection.open(
            url: configuration.amqp.urls[0], tls: .init(), heartbeat: 0, connectionName: "bench results poller")
        try connection.openChannel(1)
        let queue = configuration.queue.results
        let box = UncheckedBox(connection)
        let thread = Thread { [self] in
            let connection = box.value
            defer { connection.close() }
            var warmed = false
            while sampling.load(ordering: .relaxed) {
                guard let depth = try? connection.declareQueue(channel: 1, name: queue, passive: true).messages else {
                    log("the results poller lost its connection")
                    return
                }
                polled.value.store(depth, ordering: .relaxed)
                if !warmed, depth >= warmup {
                    warmed = true
                    mark(.warmupDone)
                }
                if depth >= jobs {
                    mark(.allDone)
                    return
                }
                usleep(20_000)
            }
        }
        thread.start()
    }

    /// Samples RSS and threads every 100 ms on a thread of its own; the semaphore is signalled when it stops.
    private func startSampler(pid: Int32) -> DispatchSemaphore {
        let stopped = DispatchSemaphore(value: 0)
        let thread = Thread { [self] in
            defer { stopped.signal() }
            var lastSeries = 0.0
            while sampling.load(ordering: .relaxed) {
                if let status = ProcStats.status(pid: pid) {
                    let warm = marks.withLock { $0.warmup?.time }
                    samples.withLock { s in
                        s.maxThreads = max(s.maxThreads, status.threads)
                        s.maxRSS = max(s.maxRSS, status.rss)
                        if let warm, marks.withLock({ $0.done == nil }) {
                            let t = Double(DispatchTime.now().uptimeNanoseconds - warm) / 1e9
                            if t - lastSeries >= 1 || s.rssSeries.isEmpty {
                                s.rssSeries.append((t, status.rss))
                                lastSeries = t
                            }
                        }
                    }
                }
                usleep(100_000)
            }
        }
        thread.start()
        return stopped
    }
}
