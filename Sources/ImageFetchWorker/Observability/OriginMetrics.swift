import Prometheus

/// The origin scheduler's metrics, without a label per host: known and paused origins,
/// deferrals, limit cuts, overload responses by status, and the spread of the origins' limits.
package final class OriginMetrics: Sendable {
    let active: Gauge
    let paused: Gauge
    private let deferralsPaused: Counter
    private let deferralsSlow: Counter
    let limitCuts: Counter
    private let tooManyRequests: Counter
    private let unavailable: Counter

    /// The limit histogram's bounds: an origin's limit is at most the concurrency.
    static let limitBuckets = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]

    package init(registry: PrometheusCollectorRegistry) {
        active = registry.makeGauge(
            name: "image_fetch_origins_active",
            help: "Origins the scheduler keeps state for (recently active).")
        paused = registry.makeGauge(
            name: "image_fetch_origins_paused",
            help: "Origins paused right now, by a Retry-After or after a refusal without one.")
        let deferralHelp = "Jobs republished to a delay queue, by reason: their origin was paused, or slow."
        deferralsPaused = registry.makeCounter(
            name: "image_fetch_deferrals_total", labels: [("reason", "paused")],
            help: deferralHelp)
        deferralsSlow = registry.makeCounter(
            name: "image_fetch_deferrals_total", labels: [("reason", "slow")],
            help: deferralHelp)
        limitCuts = registry.makeCounter(
            name: "image_fetch_origin_limit_cuts_total",
            help: "Times an origin's concurrency limit was cut on an overload signal.")
        let help = "Responses 429 and 503 from origins, by status."
        tooManyRequests = registry.makeCounter(
            name: "image_fetch_origin_overload_responses_total",
            labels: [("status", "429")], help: help)
        unavailable = registry.makeCounter(
            name: "image_fetch_origin_overload_responses_total",
            labels: [("status", "503")], help: help)
    }

    /// A job left the window, for the scheduler's reason.
    func deferred<Element>(_ reason: OriginScheduler<Element>.DeferralReason) {
        switch reason {
        case .paused: deferralsPaused.increment()
        case .slow: deferralsSlow.increment()
        }
    }

    func overloadResponse(status: Int) {
        (status == 429 ? tooManyRequests : unavailable).increment()
    }

    /// `image_fetch_origin_limit`: how many known origins have a limit up to each bound, as of now
    /// (a snapshot: read it with `histogram_quantile` directly, not over `rate`).
    /// `limits`: how many origins have each limit (the scheduler counts them as limits change).
    static func limitHistogram(_ limits: [(limit: Int, origins: Int)]) -> [UInt8] {
        var text = "# HELP image_fetch_origin_limit Concurrency limits of the known origins, as of the scrape.\n"
        text += "# TYPE image_fetch_origin_limit histogram\n"
        for bound in limitBuckets {
            let count = limits.reduce(0) { $0 + ($1.limit <= bound ? $1.origins : 0) }
            text += "image_fetch_origin_limit_bucket{le=\"\(bound)\"} \(count)\n"
        }
        let count = limits.reduce(0) { $0 + $1.origins }
        text += "image_fetch_origin_limit_bucket{le=\"+Inf\"} \(count)\n"
        text += "image_fetch_origin_limit_sum \(limits.reduce(0) { $0 + $1.limit * $1.origins })\n"
        text += "image_fetch_origin_limit_count \(count)\n"
        return Array(text.utf8)
    }
}
