import Foundation

/// The internet scenario's own figures (issue 31): the rate against Little's law, deferrals, and
/// the outcomes against what the origins were set to answer.
extension Runner {
    func internetRate(
        rate: Double, cpuMicros: Double, jobs: InternetJobs, counted: Range<Int>,
        endMetrics: String?
    ) -> [Figure] {
        let concurrency = options.scenario.concurrency
        let delay = jobs.meanDelay(counted)
        let ideal = Double(concurrency) / max(delay, 0.001)
        let reached = rate / ideal * 100
        let targeted = !options.scenario.runsAYardstick && concurrency == 64
        var figures = [
            Figure(name: "messages/s", value: grouped(rate)),
            Figure(
                name:
                    "of Little's law (\(concurrency) ÷ \(String(format: "%.1f", delay * 1000)) ms = \(grouped(ideal))/s)",
                value: String(format: "%.1f %%", reached),
                target: targeted ? "≥ 90 % (#31)" : "—", met: targeted ? yes(reached >= 90) : "—"),
            Figure(name: "worker CPU µs/message", value: String(format: "%.1f", cpuMicros)),
        ]
        if let endMetrics {
            // Every sample of the counter, whatever its labels (a reason label may come).
            let deferrals = OriginScenarios.sum(endMetrics, "image_fetch_deferrals_total") ?? 0
            let perHundred = deferrals / Double(options.jobs) * 100
            figures.append(
                Figure(
                    name: "deferrals (whole run, /metrics)",
                    value: "\(grouped(deferrals)) (\(String(format: "%.1f", perHundred)) per 100 jobs)",
                    target: "≤ 1 per 100 jobs (#31)", met: yes(perHundred <= 1)))
            // Where a permit's time goes: the fetch against the whole hold (Little's law read
            // backwards), to set beside the origins' own time from their access log.
            if let sum = OriginScenarios.sum(endMetrics, "image_fetch_fetch_duration_seconds_sum"),
                let count = OriginScenarios.sum(endMetrics, "image_fetch_fetch_duration_seconds_count"), count > 0,
                rate > 0
            {
                figures.append(
                    Figure(
                        name: "fetch, mean (whole run, /metrics); a permit held (concurrency ÷ rate)",
                        value: String(format: "%.1f ms; %.1f ms", sum / count * 1000, Double(concurrency) / rate * 1000)
                    ))
            }
        }
        return figures
    }

    /// One result per job, and the outcomes the origins' answers call for: `ok` for the images,
    /// `http_error` for the 404s, `not_an_image` for the HTML pages. A cut JPEG is served whole
    /// with its own Content-Length, so its outcome is the contender's call (listed, not judged).
    func internetResults(_ run: RunMeasurements, _ jobs: InternetJobs) -> [Figure] {
        let final = run.final
        let kinds = jobs.kindCounts
        let codes = run.results.codes
        let complete = run.failure == nil && final.distinct == run.jobs && final.duplicates == 0 && run.exitStatus == 0
        let images = kinds["image", default: 0], missing = kinds["missing", default: 0]
        let pages = kinds["html", default: 0], cut = kinds["cut", default: 0]
        let listed = ["ok": final.ok].merging(codes) { $0 + $1 }.sorted { $0.value > $1.value }
            .map { "\($0.key) \($0.value)" }.joined(separator: ", ")
        let expected =
            final.ok >= images && final.ok <= images + cut && codes["http_error", default: 0] == missing
            && codes["not_an_image", default: 0] == pages
        return [
            Figure(
                name: "results",
                value:
                    "\(final.distinct) of \(run.jobs), \(final.duplicates) duplicate; jobs left \(run.leftover.map(String.init) ?? "?"); exit \(run.exitStatus) after SIGTERM in \(String(format: "%.2f", run.drainSeconds)) s",
                target: "one per job, exit 0", met: yes(complete)),
            Figure(
                name: "outcomes", value: listed,
                target: "ok \(images) (+ up to \(cut) cut JPEGs), http_error \(missing), not_an_image \(pages)",
                met: yes(expected)),
        ]
    }
}
