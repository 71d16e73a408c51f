import Prometheus

/// Jobs ended by an origin's opt-out signals, and the robots.txt fetches (docs/operations.md).
package final class OptOutMetrics: Sendable {
    private let optedOut: [String: Counter]
    private let robotsFetches: [RobotsFetchOutcome: Counter]

    /// How a robots.txt fetch ended, the `outcome` label of `image_fetch_robots_fetches_total`.
    package enum RobotsFetchOutcome: String, Sendable, CaseIterable {
        /// 2xx: parsed.
        case ok
        /// 4xx: allow all.
        case missing
        /// 5xx, or no answer (connect, DNS, TLS, timeout, too many redirects): disallow all.
        case unreachable
        /// Aborted at the drain's deadline.
        case aborted
    }

    package init(registry: PrometheusCollectorRegistry) {
        let help = "Jobs that ended opted_out, by the signal: x_robots_tag, tdm_reservation or robots_txt."
        var optedOut: [String: Counter] = [:]
        for signal in ["x_robots_tag", "tdm_reservation", "robots_txt"] {
            optedOut[signal] = registry.makeCounter(
                name: "image_fetch_opted_out_total", labels: [("signal", signal)], help: help)
        }
        self.optedOut = optedOut
        let fetchHelp =
            "robots.txt fetches (fetch.robots=respect), by outcome: ok, missing (4xx), unreachable, aborted."
        var fetches: [RobotsFetchOutcome: Counter] = [:]
        for outcome in RobotsFetchOutcome.allCases {
            fetches[outcome] = registry.makeCounter(
                name: "image_fetch_robots_fetches_total", labels: [("outcome", outcome.rawValue)], help: fetchHelp)
        }
        self.robotsFetches = fetches
    }

    /// Counts a job that ended for `signal`.
    package func optedOut(_ signal: OptOutSignal) {
        optedOut[signal.metricLabel]?.increment()
    }

    /// Counts the header signal of a fetch that stopped for one, if it did.
    package func record(_ response: FetchResponse) {
        if case .optedOut(let signal)? = response.failure { optedOut(signal) }
    }

    package func robotsFetched(_ outcome: RobotsFetchOutcome) {
        robotsFetches[outcome]?.increment()
    }
}
