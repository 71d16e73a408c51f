import Prometheus
import Synchronization

/// The fetch engine's connection, TLS, HTTP-version and DNS metrics, without a label per host.
///
/// Per-fetch figures come from each response (``record(_:)``, any thread); the engine-wide TLS
/// counts, which OpenSSL callbacks keep in C, are added at each scrape (``collect(tls:)``).
package final class FetchMetrics: Sendable {
    private let fetches: [FetchResponse.HTTPVersion: Counter]
    private let connectionsOpened: Counter
    private let connectionsReused: Counter
    private let dnsFailures: Counter
    private let handshakes: Counter
    private let resumed: Counter
    private let caStoreLoads: Counter
    /// The TLS counts already added, so each scrape adds only what is new.
    private let collected = Mutex(FetchTLSCounts())

    package init(registry: PrometheusCollectorRegistry) {
        let versionHelp = "HTTP fetches of origins, by the HTTP version of the last response (none: no response)."
        var fetches: [FetchResponse.HTTPVersion: Counter] = [:]
        for version in [FetchResponse.HTTPVersion.none, .http10, .http11, .http2, .http3] {
            fetches[version] = registry.makeCounter(
                name: "image_fetch_fetches_total", labels: [("http_version", version.rawValue)], help: versionHelp)
        }
        self.fetches = fetches
        connectionsOpened = registry.makeCounter(
            name: "image_fetch_connections_opened_total",
            help: "Connections opened to origins (redirect hops included).")
        connectionsReused = registry.makeCounter(
            name: "image_fetch_connections_reused_total",
            help: "Fetches that got a response over a connection already open (kept alive or multiplexed).")
        dnsFailures = registry.makeCounter(
            name: "image_fetch_dns_failures_total",
            help: "Fetches that failed because the origin's host name did not resolve.")
        handshakes = registry.makeCounter(
            name: "image_fetch_tls_handshakes_total", help: "TLS handshakes completed with origins.")
        resumed = registry.makeCounter(
            name: "image_fetch_tls_resumed_total",
            help: "TLS handshakes with origins that resumed an earlier session.")
        caStoreLoads = registry.makeCounter(
            name: "image_fetch_ca_store_loads_total",
            help: "Times the CA bundle was parsed into a certificate store; about once per process.")
    }

    /// Counts one finished fetch.
    package func record(_ response: FetchResponse) {
        fetches[response.httpVersion]?.increment()
        if response.connectionsOpened > 0 {
            connectionsOpened.increment(by: Int64(response.connectionsOpened))
        } else if response.httpStatus != nil {
            connectionsReused.increment()
        }
        if response.failure == .dnsFailure { dnsFailures.increment() }
    }

    /// Adds what the engine's TLS counters gained since the last call.
    package func collect(tls counts: FetchTLSCounts) {
        let previous = collected.withLock { last in
            defer { last = counts }
            return last
        }
        handshakes.increment(by: Int64(max(counts.handshakes - previous.handshakes, 0)))
        resumed.increment(by: Int64(max(counts.resumedSessions - previous.resumedSessions, 0)))
        caStoreLoads.increment(by: Int64(max(counts.caStoreLoads - previous.caStoreLoads, 0)))
    }
}
