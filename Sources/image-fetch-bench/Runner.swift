#if canImport(Glibc)
import Glibc
#endif
import Dispatch
import Foundation
import ImageFetchWorker
import Logging
import Synchronization

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
    /// true: consume the results while the worker runs (the counted window includes the broker's
    /// work of delivering them to the driver). false: only poll the results queue's depth during the
    /// run, and consume the results after the worker stopped.
    var consumeDuringRun = true
}

/// One figure of the summary: value, target(s), and whether each target is met.
struct Figure {
    var name: String
    var value: String
    var target: String = "—"
    var met: String = "—"
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
    private let marks = Mutex<(warmup: Reading?, done: Reading?)>((nil, nil))
    private let workerPID = Atomic<Int32>(0)
    private let samples = Mutex(Samples())
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
        return Reading(time: DispatchTime.now().uptimeNanoseconds,
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
        let url: String
        switch scenario.origin {
        case .fastPNG: url = options.fastOrigin + "/bench.png"
        case .fastJPEG: url = options.fastOrigin + "/bench.jpg"
        case .origins:
            throw BenchError("\(scenario.name) runs through OriginScenarios")
        case .slowPNG:
            guard let body = FileManager.default.contents(atPath: options.png) else {
                throw BenchError("cannot read the PNG \(options.png)")
            }
            let origin = try SlowOrigin.start(delayMilliseconds: Scenario.slowDelayMilliseconds, body: Array(body),
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
        // The same job each time (distinct ids); with newFilePerJob each names its own storage key.
        let newFiles = scenario.newFilePerJob
        let confirmed = publisher.publish(bodies: (0..<jobs).lazy.map {
            JobPublisher.jobBody(id: prefix + String($0), url: url, key: newFiles ? "bench/\(runID)/\($0 / 1000)/\($0)" : nil)
        })
        publisher.close()
        let publishSeconds = Double(DispatchTime.now().uptimeNanoseconds - publishStart) / 1e9
        guard confirmed == jobs else { throw BenchError("only \(confirmed) of \(jobs) jobs were confirmed by the broker") }
        log(String(format: "published and confirmed in %.1f s (%.0f/s); warm-up %d jobs, then %d counted",
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
            counter = try ResultCounter(configuration: configuration, total: jobs, warmup: warmup, idPrefix: prefix, onMark: mark)
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
        var environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("AMQP_") && !$0.key.hasPrefix("QUEUE_") }
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
        process.environment = environment
        let logHandle = try FileHandle(forWritingTo: URL(fileURLWithPath: logPath))
        process.standardOutput = logHandle
        process.standardError = logHandle
        try process.run()
        workerPID.store(process.processIdentifier, ordering: .relaxed)
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
                let detail = counter.map { ", \($0.snapshot.failed) failed, \($0.snapshot.duplicates) duplicates" } ?? " (queue depth)"
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
                for row in depth { log("  queue \(row.queue): ready \(row.ready.map(String.init) ?? "-"), consumers \(row.consumers.map(String.init) ?? "-")") }
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
        // Results that arrive after the last one (duplicates) get a moment to show up.
        usleep(300_000)
        if counter == nil {
            // Polling mode: now read every result (not timed) for the checks and the durations.
            let late = try ResultCounter(configuration: configuration, total: jobs, warmup: warmup, idPrefix: prefix) { _ in }
            counter = late
            let deadline = Date().addingTimeInterval(60)
            while late.snapshot.distinct < jobs, Date() < deadline { usleep(50_000) }
            usleep(300_000)
        }
        guard let results = counter else { throw BenchError("no results consumer") }
        let final = results.snapshot
        let leftover = (try? QueueDepth.sample(configuration))?.first?.ready ?? nil

        // Figures.
        let (warm, done) = marks.withLock { ($0.warmup, $0.done) }
        var figures: [Figure] = []
        let counted = jobs - warmup
        figures.append(Figure(
            name: "results",
            value: "\(final.ok) ok, \(final.failed) failed, \(final.duplicates) duplicate, \(jobs - final.distinct) missing; jobs left \(leftover.map(String.init) ?? "?"); exit \(exitStatus) after SIGTERM in \(String(format: "%.2f", drainSeconds)) s",
            target: "all ok, none lost, exit 0",
            met: yes(failure == nil && final.ok == jobs && final.duplicates == 0 && exitStatus == 0)))
        if let failure { figures.append(Figure(name: "failure", value: failure, met: "no")) }
        if let first = final.firstFailure { figures.append(Figure(name: "first failed result", value: "`\(first.prefix(300))`")) }

        var notes: [String] = []
        if let warm, let done, failure == nil {
            let seconds = Double(done.time - warm.time) / 1e9
            let rate = Double(counted) / seconds
            let cpuMicros = (done.workerCPU - warm.workerCPU) / Double(counted) * 1e6
            let peak = status?.hwm ?? samples.withLock { $0.maxRSS }
            let threads = samples.withLock { $0.maxThreads }
            let peakMB = Double(peak) / 1_048_576
            switch scenario.name {
            case "png32":
                figures.append(Figure(name: "messages/s", value: grouped(rate), target: "≥ 6,000 (#2); ≥ 7,000 (#6)",
                                      met: "#2 \(yes(rate >= 6000)); #6 \(yes(rate >= 7000))"))
                figures.append(Figure(name: "worker CPU µs/message", value: String(format: "%.1f", cpuMicros),
                                      target: "≤ 110 (#2); ≤ 90 (#6)",
                                      met: "#2 \(yes(cpuMicros <= 110)); #6 \(yes(cpuMicros <= 90))"))
            case "soak", "png32-files", "floor32", "python32":
                figures.append(Figure(name: "messages/s", value: grouped(rate)))
                figures.append(Figure(name: "worker CPU µs/message", value: String(format: "%.1f", cpuMicros)))
            case "slow256", "slow1024", "floor1024":
                let ideal = scenario.idealRate ?? 1
                let efficiency = rate / ideal * 100
                // The issues' targets: efficiency at 256, messages/s at 1,024; none for a yardstick.
                let targets = !scenario.runsAYardstick
                let rateTarget = targets && scenario.concurrency == 1024
                let efficiencyTarget = targets && scenario.concurrency == 256
                figures.append(Figure(name: "messages/s", value: grouped(rate),
                                      target: rateTarget ? "≥ 6,000 (#6)" : "—", met: rateTarget ? yes(rate >= 6000) : "—"))
                figures.append(Figure(name: "efficiency (÷ \(grouped(ideal))/s)", value: String(format: "%.1f %%", efficiency),
                                      target: efficiencyTarget ? "≥ 95 % (#2); ≥ 97 % (#6)" : "—",
                                      met: efficiencyTarget ? "#2 \(yes(efficiency >= 95)); #6 \(yes(efficiency >= 97))" : "—"))
                figures.append(Figure(name: "worker CPU µs/message", value: String(format: "%.1f", cpuMicros)))
            case "jpeg16", "floor16":
                let megabytes = rate * Double(jpegBytes()) / 1_048_576
                figures.append(Figure(name: "messages/s", value: String(format: "%.0f (%.0f MB/s)", rate, megabytes)))
                // The C floor's ratio is the ceiling to read the worker's against, not a target.
                let targeted = !scenario.runsAYardstick
                let target = targeted ? "≥ 80 % (#6)" : "—"
                if let originRate = options.originRate, originRate > 0 {
                    let ratio = rate / originRate * 100
                    figures.append(Figure(name: "of the origin alone (\(String(format: "%.0f", originRate))/s, \(options.originTool))",
                                          value: String(format: "%.1f %%", ratio), target: target, met: targeted ? yes(ratio >= 80) : "—"))
                } else {
                    figures.append(Figure(name: "of the origin alone", value: "not measured", target: target, met: targeted ? "?" : "—"))
                }
                figures.append(Figure(name: "worker CPU µs/message", value: String(format: "%.1f", cpuMicros)))
            default:
                break
            }
            let faults = (done.workerFaults - warm.workerFaults) / Double(counted)
            figures.append(Figure(name: "worker page faults/message", value: String(format: "%.2f", faults)))
            // Peak RSS: issue 2 wants < 64 MB for (a) and (b); issue 6 ≤ 48 MB at concurrency 1,024.
            var rssTarget = "—", rssMet = "—"
            if scenario.name == "png32" || scenario.name == "slow256" {
                rssTarget = "< 64 MB (#2)"; rssMet = yes(peakMB < 64)
            } else if scenario.concurrency == 1024, !scenario.runsAYardstick {
                rssTarget = "≤ 48 MB (#6)"; rssMet = yes(peakMB <= 48)
            }
            figures.append(Figure(name: "peak RSS (VmHWM)", value: String(format: "%.1f MB", peakMB), target: rssTarget, met: rssMet))
            let threadsTarget = scenario.concurrency == 1024 && !scenario.runsAYardstick
            figures.append(Figure(name: "threads (max sampled)", value: "\(threads)",
                                  target: threadsTarget ? "far below 1,024 (#6)" : "—",
                                  met: threadsTarget ? yes(threads < 100) : "—"))

            // Latency.
            if let before = warm.histogram, let after = endMetrics {
                let name = "image_fetch_delivery_to_ack_seconds"
                let delta = Histogram(text: after, name: name).minus(Histogram(text: before, name: name))
                if let p50 = delta.quantile(0.5), let p99 = delta.quantile(0.99) {
                    figures.append(Figure(name: "delivery→ack p50 / p99 (histogram)",
                                          value: String(format: "%.1f / %.1f ms", p50 * 1000, p99 * 1000), target: "reported (#6)", met: "yes"))
                }
            }
            let durations = results.sortedDurations()
            if !durations.isEmpty {
                let p50 = durations[durations.count / 2]
                let p99 = durations[min(durations.count - 1, durations.count * 99 / 100)]
                figures.append(Figure(name: "admission→result p50 / p99 (results)",
                                      value: String(format: "%.2f / %.2f ms", p50, p99)))
            }
            // Where the CPU went.
            let window = seconds
            var share: [String] = []
            let capacity = window * Double(ProcessInfo.processInfo.activeProcessorCount)
            func pct(_ cpu: Double) -> String { String(format: "%.0f %%", cpu / capacity * 100) }
            let machineBusy = (done.machine.busy - warm.machine.busy) / max(1, done.machine.total - warm.machine.total) * 100
            var known = done.workerCPU - warm.workerCPU + done.driverCPU - warm.driverCPU
            share.append("worker \(pct(done.workerCPU - warm.workerCPU))")
            for (i, watched) in options.watch.enumerated() where i < warm.watchedCPU.count {
                let used = done.watchedCPU[i] - warm.watchedCPU[i]
                known += used
                share.append("\(watched.name) \(pct(used)) (\(String(format: "%.0f", used / Double(counted) * 1e6)) µs/msg)")
                if watched.name == "rabbitmq" {
                    figures.append(Figure(name: "broker CPU µs/message", value: String(format: "%.1f", used / Double(counted) * 1e6)))
                }
            }
            share.append("driver \(pct(done.driverCPU - warm.driverCPU))")
            let other = machineBusy - known / capacity * 100
            share.append(String(format: "everything else %.0f %%", max(0, other)))
            notes.append(String(format: "Counted window %.1f s; the machine was %.0f %% busy (of %d cores): ", window, machineBusy,
                                ProcessInfo.processInfo.activeProcessorCount) + share.joined(separator: ", ") + ".")
            if let originStats {
                notes.append("Slow origin: \(originStats.requests) requests on \(originStats.connections) connections, at most \(originStats.maxInFlight) in flight at once.")
            }
            if scenario.name == "soak" {
                figures += soakFigures(jobs: jobs)
            }
        }
        notes.append(options.consumeDuringRun
            ? "Results were consumed by the driver during the run (the broker's CPU includes delivering them)."
            : "Results were only counted by polling the queue depth every 20 ms during the run, and consumed after it.")
        notes.append(String(format: "Publishing the %d jobs (with confirms, before the worker started) took %.1f s (%.0f/s).",
                            jobs, publishSeconds, Double(jobs) / publishSeconds))
        notes.append("Whole run \(Int(Date().timeIntervalSince(started))) s.")

        let loadAtEnd = ProcStats.loadAverage()
        report(figures: figures, notes: notes, jobs: jobs, warmup: warmup, loadAtStart: loadAtStart, loadAtEnd: loadAtEnd)
        return failure == nil && exitStatus == 0 ? 0 : 1
    }

    private func jpegBytes() -> Int {
        (try? FileManager.default.attributesOfItem(atPath: options.jpeg)[.size] as? Int) ?? 3 * 1_048_576
    }

    /// Flatness of RSS over the soak: the last 10 % of the once-a-second samples (after the
    /// warm-up) within 5 % of the median of all of them, and no growth from the first 10 % to the last.
    private func soakFigures(jobs: Int) -> [Figure] {
        let series = samples.withLock { $0.rssSeries }
        guard series.count >= 10 else {
            return [Figure(name: "RSS flat", value: "too short a run (\(series.count) samples) to judge", target: "flat (#6)", met: "?")]
        }
        let values = series.map { Double($0.1) / 1_048_576 }
        let median = values.sorted()[values.count / 2]
        let tenth = max(1, values.count / 10)
        let last = values.suffix(tenth)
        let first = values.prefix(tenth)
        let worst = last.map { abs($0 - median) / median * 100 }.max() ?? 0
        let growth = (last.reduce(0, +) / Double(last.count)) / (first.reduce(0, +) / Double(first.count)) * 100 - 100
        let flat = worst <= 5 && growth <= 5
        return [
            Figure(name: "RSS median (1 s samples after warm-up)", value: String(format: "%.1f MB over %d samples", median, values.count)),
            Figure(name: "last 10 %: largest distance from the median", value: String(format: "%.1f %%", worst),
                   target: "≤ 5 % (#6)", met: yes(worst <= 5)),
            Figure(name: "growth, mean of last 10 % vs first 10 %", value: String(format: "%+.1f %%", growth),
                   target: "no growth (≤ 5 %)", met: yes(growth <= 5)),
            Figure(name: "RSS flat", value: flat ? "flat" : "not flat", target: "flat (#6)", met: yes(flat)),
        ]
    }

    /// Polls the results queue's depth every 20 ms on a connection of its own, and marks the
    /// warm-up boundary and the end by it (the `--results after` mode).
    private func startPoller(configuration: WorkerConfiguration, jobs: Int, warmup: Int, polled: SharedCount,
                             mark: @escaping @Sendable (ResultCounter.Mark) -> Void) throws {
        let connection = try AMQPConnection()
        try connection.open(url: configuration.amqp.urls[0], tls: .init(), heartbeat: 0, connectionName: "bench results poller")
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

    // MARK: - Output

    private func report(figures: [Figure], notes: [String], jobs: Int, warmup: Int, loadAtStart: String, loadAtEnd: String) {
        let scenario = options.scenario
        let date = ISO8601DateFormatter().string(from: Date())
        let cores = ProcessInfo.processInfo.activeProcessorCount
        print("")
        print("== \(scenario.name): \(scenario.title)")
        print("   \(cores) cores; load average \(loadAtStart) at start, \(loadAtEnd) at end; \(jobs) jobs (\(warmup) warm-up)")
        for figure in figures {
            print("   \(figure.name.padding(toLength: 46, withPad: " ", startingAt: 0)) \(figure.value)  [target \(figure.target): \(figure.met)]")
        }
        for note in notes { print("   \(note)") }

        if let rowsFile = options.rowsFile {
            var rows = ""
            for figure in figures {
                rows += [scenario.name, figure.name, figure.value, figure.target, figure.met].joined(separator: "\t") + "\n"
            }
            append(rows, to: rowsFile)
        }
        if let markdownFile = options.markdownFile {
            var md = "### \(scenario.name): \(scenario.title)\n\n"
            md += "Measured \(date) with `\(options.command)`: \(grouped(Double(jobs))) jobs, the first \(grouped(Double(warmup))) a warm-up that is not counted. "
            md += "\(cores) cores; load average (1, 5, 15 min) \(loadAtStart) at the start, \(loadAtEnd) at the end.\n\n"
            md += "| figure | value | target | met |\n|---|---|---|---|\n"
            for figure in figures {
                md += "| \(figure.name) | \(figure.value.replacingOccurrences(of: "|", with: "\\|")) | \(figure.target) | \(figure.met) |\n"
            }
            md += "\n"
            for note in notes { md += "\(note)\n" }
            if !options.versions.isEmpty { md += "\nVersions: \(options.versions).\n" }
            md += "\n"
            try? md.write(toFile: markdownFile, atomically: true, encoding: .utf8)
        }
    }

    private func append(_ text: String, to path: String) {
        if let handle = FileHandle(forWritingAtPath: path) {
            handle.seekToEndOfFile()
            handle.write(Data(text.utf8))
            try? handle.close()
        } else {
            _ = FileManager.default.createFile(atPath: path, contents: Data(text.utf8))
        }
    }
}

/// A logger that keeps the library's info lines (connected, …) out of the benchmark's output.
func quietLogger(_ label: String) -> Logger {
    var logger = Logger(label: label)
    logger.logLevel = .warning
    return logger
}

/// A count shared between threads.
final class SharedCount: Sendable {
    let value = Atomic<Int>(0)
}

/// Hands a non-Sendable value to the one thread that uses it from then on.
struct UncheckedBox<T>: @unchecked Sendable {
    let value: T
    init(_ value: T) { self.value = value }
}

func yes(_ condition: Bool) -> String { condition ? "yes" : "no" }

/// 6512.3 → "6,512".
func grouped(_ value: Double) -> String {
    let digits = String(Int(value.rounded()))
    var out = ""
    for (i, c) in digits.reversed().enumerated() {
        if i > 0, i % 3 == 0 { out.append(",") }
        out.append(c)
    }
    return String(out.reversed())
}

struct BenchError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
