import CoreMetrics
import Prometheus

/// The `# HELP` text of the metric families recorded through swift-metrics (``WorkerMetrics``) and
/// of the process metrics. `/metrics` is a contract with dashboards and alert rules
/// (docs/operations.md); a family missing here is exported without HELP, which
/// `MetricsExpositionTests` and `ObservabilityTests` catch. (``OriginMetrics`` registers its
/// families with their help directly.)
package enum MetricCatalogue {
    package static let help: [String: String] = [
        // Jobs and results
        "image_fetch_jobs_received_total": "Job deliveries received from the jobs queue.",
        "image_fetch_results_total":
            "Results published, by status (ok, not_modified, failed) and error code (none unless failed).",
        "image_fetch_retries_total": "Jobs republished to the retry queue after a transient failure.",
        "image_fetch_dead_lettered_total":
            "Jobs sent to the dead-letter queue (invalid or too large, final failures, origin_busy, poison).",
        "image_fetch_jobs_requeued_total": "Deliveries handed back to the broker unprocessed (drain, reconnect).",
        "image_fetch_jobs_in_flight": "Jobs admitted and not yet acknowledged.",
        "image_fetch_jobs_waiting_admission": "Jobs received and waiting for a concurrency slot.",
        "image_fetch_concurrency": "The configured worker.concurrency: the most jobs fetched at once.",
        // Fetching and latency
        "image_fetch_fetched_bytes_total": "Response body bytes fetched from origins.",
        "image_fetch_fetch_duration_seconds": "Time of one HTTP fetch, redirects included.",
        "image_fetch_delivery_to_ack_seconds": "Time from a job's delivery to its acknowledgement.",
        "image_fetch_publish_confirm_seconds": "Time from publishing a result to the broker's confirm.",
        // Broker connection
        "image_fetch_broker_connected": "1 while connected to the broker, 0 otherwise.",
        "image_fetch_broker_blocked": "1 while the broker blocks publishing (connection.blocked), 0 otherwise.",
        "image_fetch_broker_connection_state": "1 for the connection's current state, 0 for the other states.",
        "image_fetch_reconnects_total": "Reconnections to the broker after a lost connection.",
        // Queue depth samples
        "image_fetch_queue_ready_messages": "Ready messages in a queue, sampled every metrics.depth_interval.",
        "image_fetch_queue_consumers": "Consumers of a queue, sampled every metrics.depth_interval.",
        // Build
        "image_fetch_build_info": "Always 1; the labels name the worker's version, source revision and Swift compiler.",
        // Process (the names every Prometheus client library uses)
        "process_cpu_seconds_total": "Total user and system CPU time spent in seconds.",
        "process_resident_memory_bytes": "Resident memory size in bytes.",
        "process_virtual_memory_bytes": "Virtual memory size in bytes.",
        "process_open_fds": "Number of open file descriptors.",
        "process_max_fds": "Maximum number of open file descriptors.",
        "process_start_time_seconds": "Start time of the process since unix epoch in seconds.",
    ]

    /// The help text of `name`; empty (no `# HELP` line) for a name not in the catalogue.
    package static func help(for name: String) -> String { help[name] ?? "" }
}

/// A swift-metrics factory over a swift-prometheus registry that gives each family its
/// ``MetricCatalogue`` help text. swift-prometheus's own factory registers every family without
/// help, and the registry refuses a second registration of a name with different help.
package struct DocumentedMetricsFactory: CoreMetrics.MetricsFactory {
    package let registry: PrometheusCollectorRegistry
    package var defaultDurationHistogramBuckets: [Duration]
    package var defaultValueHistogramBuckets: [Double]
    package var valueHistogramBuckets: [String: [Double]] = [:]

    package init(registry: PrometheusCollectorRegistry, durationBuckets: [Duration], valueBuckets: [Double]) {
        self.registry = registry
        defaultDurationHistogramBuckets = durationBuckets
        defaultValueHistogramBuckets = valueBuckets
    }

    package func makeCounter(label: String, dimensions: [(String, String)]) -> any CounterHandler {
        registry.makeCounter(name: label, labels: dimensions, help: MetricCatalogue.help(for: label))
    }

    package func makeFloatingPointCounter(
        label: String, dimensions: [(String, String)]
    ) -> any FloatingPointCounterHandler {
        registry.makeCounter(name: label, labels: dimensions, help: MetricCatalogue.help(for: label))
    }

    package func makeRecorder(label: String, dimensions: [(String, String)], aggregate: Bool) -> any RecorderHandler {
        guard aggregate else {
            return registry.makeGauge(name: label, labels: dimensions, help: MetricCatalogue.help(for: label))
        }
        return registry.makeValueHistogram(
            name: label, labels: dimensions,
            buckets: valueHistogramBuckets[label] ?? defaultValueHistogramBuckets,
            help: MetricCatalogue.help(for: label))
    }

    package func makeMeter(label: String, dimensions: [(String, String)]) -> any MeterHandler {
        registry.makeGauge(name: label, labels: dimensions, help: MetricCatalogue.help(for: label))
    }

    package func makeTimer(label: String, dimensions: [(String, String)]) -> any TimerHandler {
        registry.makeDurationHistogram(
            name: label, labels: dimensions, buckets: defaultDurationHistogramBuckets,
            help: MetricCatalogue.help(for: label))
    }

    package func destroyCounter(_ handler: any CounterHandler) {
        if let counter = handler as? Prometheus.Counter { registry.unregisterCounter(counter) }
    }

    package func destroyFloatingPointCounter(_ handler: any FloatingPointCounterHandler) {
        if let counter = handler as? Prometheus.Counter { registry.unregisterCounter(counter) }
    }

    package func destroyRecorder(_ handler: any RecorderHandler) {
        switch handler {
        case let gauge as Prometheus.Gauge: registry.unregisterGauge(gauge)
        case let histogram as Histogram<Double>: registry.unregisterValueHistogram(histogram)
        default: break
        }
    }

    package func destroyMeter(_ handler: any MeterHandler) {
        if let gauge = handler as? Prometheus.Gauge { registry.unregisterGauge(gauge) }
    }

    package func destroyTimer(_ handler: any TimerHandler) {
        if let histogram = handler as? Histogram<Duration> { registry.unregisterDurationHistogram(histogram) }
    }
}
