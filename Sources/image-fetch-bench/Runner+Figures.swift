import Foundation
import Synchronization

/// What one run measured, for its figures.
struct RunMeasurements {
    var jobs: Int
    var warmup: Int
    var results: ResultCounter
    /// The results' counts once the worker stopped and late duplicates had their moment.
    var final: (distinct: Int, ok: Int, failed: Int, duplicates: Int, foreign: Int, firstFailure: String?)
    /// Jobs still ready in the jobs queue at the end.
    var leftover: Int?
    var failure: String?
    var exitStatus: Int32
    var drainSeconds: Double
    var workerStatus: ProcStats.Status?
    /// `/metrics` just before SIGTERM.
    var endMetrics: String?
    var originStats: (requests: Int, inFlight: Int, maxInFlight: Int, connections: Int, refused: Int)?
    var publishSeconds: Double
    var started: Date
    var internetJobs: InternetJobs?
}

extension Runner {
    /// The summary's figures and notes: throughput, CPU, memory, latency, and where the CPU went,
    /// between the warm-up boundary and the last result.
    func figures(of run: RunMeasurements) -> (figures: [Figure], notes: [String]) {
        let scenario = options.scenario
        let (jobs, warmup, results, final) = (run.jobs, run.warmup, run.results, run.final)
        let (failure, status, endMetrics, originStats) = (
            run.failure, run.workerStatus, run.endMetrics, run.originStats
        )
        let (leftover, exitStatus, drainSeconds) = (run.leftover, run.exitStatus, run.drainSeconds)
        let (publishSeconds, started) = (run.publishSeconds, run.started)
        let (warm, done) = marks.withLock { ($0.warmup, $0.done) }
        var figures: [Figure] = []
        let counted = jobs - warmup
        if let internetJobs = run.internetJobs {
            figures += internetResults(run, internetJobs)
        } else {
            figures.append(
                Figure(
                    name: "results",
                    value:
                        "\(final.ok) ok, \(final.failed) failed, \(final.duplicates) duplicate, \(jobs - final.distinct) missing; jobs left \(leftover.map(String.init) ?? "?"); exit \(exitStatus) after SIGTERM in \(String(format: "%.2f", drainSeconds)) s",
                    target: "all ok, none lost, exit 0",
                    met: yes(failure == nil && final.ok == jobs && final.duplicates == 0 && exitStatus == 0)))
        }
        if let failure { figures.append(Figure(name: "failure", value: failure, met: "no")) }
        if run.internetJobs == nil, let first = final.firstFailure {
            figures.append(Figure(name: "first failed result", value: "`\(first.prefix(300))`"))
        }

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
                figures.append(
                    Figure(
                        name: "messages/s", value: grouped(rate), target: "≥ 6,000 (#2); ≥ 7,000 (#6)",
                        met: "#2 \(yes(rate >= 6000)); #6 \(yes(rate >= 7000))"))
                figures.append(
                    Figure(
                        name: "worker CPU µs/message", value: String(format: "%.1f", cpuMicros),
                        target: "≤ 110 (#2); ≤ 90 (#6)",
                        met: "#2 \(yes(cpuMicros <= 110)); #6 \(yes(cpuMicros <= 90))"))
            case "soak", "png32-files", "floor32", "python32", "png32-decode", "jpeg16-decode":
                figures.append(Figure(name: "messages/s", value: grouped(rate)))
                figures.append(Figure(name: "worker CPU µs/message", value: String(format: "%.1f", cpuMicros)))
            case "slow256", "slow1024", "floor1024":
                let ideal = scenario.idealRate ?? 1
                let efficiency = rate / ideal * 100
                // The issues' targets: efficiency at 256, messages/s at 1,024; none for a yardstick.
                let targets = !scenario.runsAYardstick
                let rateTarget = targets && scenario.concurrency == 1024
                let efficiencyTarget = targets && scenario.concurrency == 256
                figures.append(
                    Figure(
                        name: "messages/s", value: grouped(rate),
                        target: rateTarget ? "≥ 6,000 (#6)" : "—", met: rateTarget ? yes(rate >= 6000) : "—"))
                figures.append(
                    Figure(
                        name: "efficiency (÷ \(grouped(ideal))/s)", value: String(format: "%.1f %%", efficiency),
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
                    figures.append(
                        Figure(
                            name:
                                "of the origin alone (\(String(format: "%.0f", originRate))/s, \(options.originTool))",
                            value: String(format: "%.1f %%", ratio), target: target,
                            met: targeted ? yes(ratio >= 80) : "—"))
                } else {
                    figures.append(
                        Figure(
                            name: "of the origin alone", value: "not measured", target: target,
                            met: targeted ? "?" : "—"))
                }
                figures.append(Figure(name: "worker CPU µs/message", value: String(format: "%.1f", cpuMicros)))
            default:
                if let internetJobs = run.internetJobs {
                    figures += internetRate(
                        rate: rate, cpuMicros: cpuMicros, jobs: internetJobs, counted: warmup..<jobs,
                        endMetrics: endMetrics)
                }
            }
            let faults = (done.workerFaults - warm.workerFaults) / Double(counted)
            figures.append(Figure(name: "worker page faults/message", value: String(format: "%.2f", faults)))
            // Peak RSS: issue 2 wants < 64 MB for (a) and (b); issue 6 ≤ 48 MB at concurrency 1,024.
            var rssTarget = "—", rssMet = "—"
            if scenario.name == "png32" || scenario.name == "slow256" {
                rssTarget = "< 64 MB (#2)"
                rssMet = yes(peakMB < 64)
            } else if scenario.concurrency == 1024, !scenario.runsAYardstick {
                rssTarget = "≤ 48 MB (#6)"
                rssMet = yes(peakMB <= 48)
            }
            figures.append(
                Figure(
                    name: "peak RSS (VmHWM)", value: String(format: "%.1f MB", peakMB), target: rssTarget, met: rssMet))
            let threadsTarget = scenario.concurrency == 1024 && !scenario.runsAYardstick
            figures.append(
                Figure(
                    name: "threads (max sampled)", value: "\(threads)",
                    target: threadsTarget ? "far below 1,024 (#6)" : "—",
                    met: threadsTarget ? yes(threads < 100) : "—"))

            // Latency.
            if let before = warm.histogram, let after = endMetrics {
                let name = "image_fetch_delivery_to_ack_seconds"
                let delta = Histogram(text: after, name: name).minus(Histogram(text: before, name: name))
                if let p50 = delta.quantile(0.5), let p99 = delta.quantile(0.99) {
                    figures.append(
                        Figure(
                            name: "delivery→ack p50 / p99 (histogram)",
                            value: String(format: "%.1f / %.1f ms", p50 * 1000, p99 * 1000), target: "reported (#6)",
                            met: "yes"))
                }
            }
            let durations = results.sortedDurations()
            if !durations.isEmpty {
                let p50 = durations[durations.count / 2]
                let p99 = durations[min(durations.count - 1, durations.count * 99 / 100)]
                figures.append(
                    Figure(
                        name: "admission→result p50 / p99 (results)",
                        value: String(format: "%.2f / %.2f ms", p50, p99)))
            }
            if let means = results.phaseMeans() {
                figures.append(
                    Figure(
                        name: "first byte; transfer; admission→result, means (results)",
                        value: String(
                            format: "%.1f; %.1f; %.1f ms", means.ttfb, means.total, means.admissionToResult)))
            }
            // Where the CPU went.
            let window = seconds
            var share: [String] = []
            let capacity = window * Double(ProcessInfo.processInfo.activeProcessorCount)
            func pct(_ cpu: Double) -> String { String(format: "%.0f %%", cpu / capacity * 100) }
            let machineBusy =
                (done.machine.busy - warm.machine.busy) / max(1, done.machine.total - warm.machine.total) * 100
            var known = done.workerCPU - warm.workerCPU + done.driverCPU - warm.driverCPU
            share.append("worker \(pct(done.workerCPU - warm.workerCPU))")
            for (i, watched) in options.watch.enumerated() where i < warm.watchedCPU.count {
                let used = done.watchedCPU[i] - warm.watchedCPU[i]
                known += used
                share.append(
                    "\(watched.name) \(pct(used)) (\(String(format: "%.0f", used / Double(counted) * 1e6)) µs/msg)")
                if watched.name == "rabbitmq" {
                    figures.append(
                        Figure(
                            name: "broker CPU µs/message", value: String(format: "%.1f", used / Double(counted) * 1e6)))
                }
                if watched.name == "nginx", run.internetJobs != nil {
                    figures.append(
                        Figure(
                            name: "origin (nginx) CPU µs/message",
                            value: String(format: "%.0f", used / Double(counted) * 1e6)))
                }
            }
            share.append("driver \(pct(done.driverCPU - warm.driverCPU))")
            let other = machineBusy - known / capacity * 100
            share.append(String(format: "everything else %.0f %%", max(0, other)))
            notes.append(
                String(
                    format: "Counted window %.1f s; the machine was %.0f %% busy (of %d cores): ", window, machineBusy,
                    ProcessInfo.processInfo.activeProcessorCount) + share.joined(separator: ", ") + ".")
            if let originStats {
                notes.append(
                    "Slow origin: \(originStats.requests) requests on \(originStats.connections) connections, at most \(originStats.maxInFlight) in flight at once."
                )
            }
            if scenario.name == "soak" {
                figures += soakFigures(jobs: jobs)
            }
        }
        notes.append(
            options.consumeDuringRun
                ? "Results were consumed by the driver during the run (the broker's CPU includes delivering them)."
                : "Results were only counted by polling the queue depth every 20 ms during the run, and consumed after it."
        )
        notes.append(
            String(
                format: "Publishing the %d jobs (with confirms, before the worker started) took %.1f s (%.0f/s).",
                jobs, publishSeconds, Double(jobs) / publishSeconds))
        notes.append("Whole run \(Int(Date().timeIntervalSince(started))) s.")
        return (figures, notes)
    }

    private func jpegBytes() -> Int {
        (try? FileManager.default.attributesOfItem(atPath: options.jpeg)[.size] as? Int) ?? 3 * 1_048_576
    }

    /// Flatness of RSS over the soak: the last 10 % of the once-a-second samples (after the
    /// warm-up) within 5 % of the median of all of them, and no growth from the first 10 % to the last.
    private func soakFigures(jobs: Int) -> [Figure] {
        let series = samples.withLock { $0.rssSeries }
        guard series.count >= 10 else {
            return [
                Figure(
                    name: "RSS flat", value: "too short a run (\(series.count) samples) to judge", target: "flat (#6)",
                    met: "?")
            ]
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
            Figure(
                name: "RSS median (1 s samples after warm-up)",
                value: String(format: "%.1f MB over %d samples", median, values.count)),
            Figure(
                name: "last 10 %: largest distance from the median", value: String(format: "%.1f %%", worst),
                target: "≤ 5 % (#6)", met: yes(worst <= 5)),
            Figure(
                name: "growth, mean of last 10 % vs first 10 %", value: String(format: "%+.1f %%", growth),
                target: "no growth (≤ 5 %)", met: yes(growth <= 5)),
            Figure(name: "RSS flat", value: flat ? "flat" : "not flat", target: "flat (#6)", met: yes(flat)),
        ]
    }
}
