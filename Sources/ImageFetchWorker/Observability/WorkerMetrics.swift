import CoreMetrics
import Foundation
import Prometheus
import Synchronization

/// The worker's Prometheus metrics, recorded through swift-metrics into a swift-prometheus
/// registry that `/metrics` renders. Names follow Prometheus conventions: the `image_fetch_`
/// prefix, base units, `_total` on counters and `_seconds` on durations. Every family's `# HELP`
/// text comes from ``MetricCatalogue``; add a new family's there too.
package final class WorkerMetrics: Sendable {
    /// The registry `/metrics` renders.
    package let registry: PrometheusCollectorRegistry
    private let factory: DocumentedMetricsFactory
    private let process: ProcessMetrics

    let jobsReceived: CoreMetrics.Counter
    let retries: CoreMetrics.Counter
    let deadLettered: CoreMetrics.Counter
    let handedBack: CoreMetrics.Counter
    let reconnects: CoreMetrics.Counter
    let fetchedBytes: CoreMetrics.Counter
    let fetchDuration: CoreMetrics.Timer
    let ackLatency: CoreMetrics.Timer
    let confirmLatency: CoreMetrics.Timer
    let inFlight: CoreMetrics.Gauge
    let waiting: CoreMetrics.Gauge
    let concurrency: CoreMetrics.Gauge
    let connected: CoreMetrics.Gauge
    let blocked: CoreMetrics.Gauge
    /// One gauge per ``connectionStates`` value: 1 for the current state, 0 for the others.
    private let stateGauges: [String: CoreMetrics.Gauge]
    private let results = Mutex([String: CoreMetrics.Counter]())
    private let depthGauges = Mutex([String: (ready: CoreMetrics.Gauge, consumers: CoreMetrics.Gauge)]())

    package init(registry: PrometheusCollectorRegistry = PrometheusCollectorRegistry(), concurrency: Int) {
        self.registry = registry
        let latencyBuckets: [Duration] = [
            .milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10), .milliseconds(25),
            .milliseconds(50), .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1),
            .milliseconds(2500), .seconds(5), .seconds(10), .seconds(30), .seconds(60),
        ]
        let factory = DocumentedMetricsFactory(
            registry: registry, durationBuckets: latencyBuckets,
            valueBuckets: [1, 2, 4, 8, 16, 32, 64, 128, 256])
        self.factory = factory
        process = ProcessMetrics(registry: registry)
        registry.makeGauge(
            name: "image_fetch_build_info", labels: BuildInfo.labels,
            help: MetricCatalogue.help(for: "image_fetch_build_info")
        ).set(Int64(1))
        jobsReceived = CoreMetrics.Counter(label: "image_fetch_jobs_received_total", factory: factory)
        retries = CoreMetrics.Counter(label: "image_fetch_retries_total", factory: factory)
        deadLettered = CoreMetrics.Counter(label: "image_fetch_dead_lettered_total", factory: factory)
        handedBack = CoreMetrics.Counter(label: "image_fetch_jobs_requeued_total", factory: factory)
        reconnects = CoreMetrics.Counter(label: "image_fetch_reconnects_total", factory: factory)
        fetchedBytes = CoreMetrics.Counter(label: "image_fetch_fetched_bytes_total", factory: factory)
        fetchDuration = CoreMetrics.Timer(label: "image_fetch_fetch_duration_seconds", factory: factory)
        ackLatency = CoreMetrics.Timer(label: "image_fetch_delivery_to_ack_seconds", factory: factory)
        confirmLatency = CoreMetrics.Timer(label: "image_fetch_publish_confirm_seconds", factory: factory)
        inFlight = CoreMetrics.Gauge(label: "image_fetch_jobs_in_flight", factory: factory)
        waiting = CoreMetrics.Gauge(label: "image_fetch_jobs_waiting_admission", factory: factory)
        self.concurrency = CoreMetrics.Gauge(label: "image_fetch_concurrency", factory: factory)
        connected = CoreMetrics.Gauge(label: "image_fetch_broker_connected", factory: factory)
        blocked = CoreMetrics.Gauge(label: "image_fetch_broker_blocked", factory: factory)
        stateGauges = Dictionary(
            uniqueKeysWithValues: Self.connectionStates.map { state in
                (
                    state,
                    CoreMetrics.Gauge(
                        label: "image_fetch_broker_connection_state", dimensions: [("state", state)],
                        factory: factory)
                )
            })
        self.concurrency.record(concurrency)
        connected.record(0)
        blocked.record(0)
        connectionState("idle")
    }

    /// The values of the `state` label of `image_fetch_broker_connection_state`, as
    /// ``BrokerSession/stateName`` spells them.
    package static let connectionStates = [
        "idle", "connecting", "consuming", "blocked", "draining", "reconnecting", "closed",
    ]

    /// Sets `image_fetch_broker_connection_state`: 1 for `state`, 0 for every other state.
    func connectionState(_ state: String) {
        for (name, gauge) in stateGauges { gauge.record(name == state ? 1 : 0) }
    }

    /// Counts one published result.
    func result(status: JobResult.Status, code: JobError.Code?) {
        let key = "\(status.rawValue)|\(code?.rawValue ?? "")"
        let counter = results.withLock { cache -> CoreMetrics.Counter in
            if let counter = cache[key] { return counter }
            let counter = CoreMetrics.Counter(
                label: "image_fetch_results_total",
                dimensions: [("status", status.rawValue), ("code", code?.rawValue ?? "none")],
                factory: factory)
            cache[key] = counter
            return counter
        }
        counter.increment()
    }

    /// Records one queue-depth sample.
    func depth(queue: String, ready: Int, consumers: Int) {
        let gauges = depthGauges.withLock { cache -> (ready: CoreMetrics.Gauge, consumers: CoreMetrics.Gauge) in
            if let gauges = cache[queue] { return gauges }
            let gauges = (
                ready: CoreMetrics.Gauge(
                    label: "image_fetch_queue_ready_messages", dimensions: [("queue", queue)], factory: factory),
                consumers: CoreMetrics.Gauge(
                    label: "image_fetch_queue_consumers", dimensions: [("queue", queue)], factory: factory)
            )
            cache[queue] = gauges
            return gauges
        }
        gauges.ready.record(ready)
        gauges.consumers.record(consumers)
    }

    /// The Prometheus text exposition.
    package func render() -> [UInt8] {
        process.update()
        var buffer: [UInt8] = []
        registry.emit(into: &buffer)
        return buffer
    }
}
