import CoreMetrics
import Foundation
import Prometheus

/// The worker's Prometheus metrics, recorded through swift-metrics into a swift-prometheus
/// registry that `/metrics` renders. Names follow Prometheus conventions: the `image_fetch_`
/// prefix, base units, `_total` on counters and `_seconds` on durations.
public final class WorkerMetrics: Sendable {
    /// The registry `/metrics` renders.
    public let registry: PrometheusCollectorRegistry
    private let factory: PrometheusMetricsFactory

    let jobsReceived: Counter
    let retries: Counter
    let deadLettered: Counter
    let handedBack: Counter
    let reconnects: Counter
    let fetchedBytes: Counter
    let fetchDuration: Timer
    let ackLatency: Timer
    let confirmLatency: Timer
    let inFlight: Gauge
    let waiting: Gauge
    let concurrency: Gauge
    let connected: Gauge
    let blocked: Gauge
    private let results = NSLockedValue([String: Counter]())
    private let depthGauges = NSLockedValue([String: (ready: Gauge, consumers: Gauge)]())

    public init(registry: PrometheusCollectorRegistry = PrometheusCollectorRegistry(), concurrency: Int) {
        self.registry = registry
        var factory = PrometheusMetricsFactory(registry: registry)
        let latencyBuckets: [Duration] = [
            .milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10), .milliseconds(25),
            .milliseconds(50), .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1),
            .milliseconds(2500), .seconds(5), .seconds(10), .seconds(30), .seconds(60),
        ]
        factory.defaultDurationHistogramBuckets = latencyBuckets
        self.factory = factory
        jobsReceived = Counter(label: "image_fetch_jobs_received_total", factory: factory)
        retries = Counter(label: "image_fetch_retries_total", factory: factory)
        deadLettered = Counter(label: "image_fetch_dead_lettered_total", factory: factory)
        handedBack = Counter(label: "image_fetch_jobs_requeued_total", factory: factory)
        reconnects = Counter(label: "image_fetch_reconnects_total", factory: factory)
        fetchedBytes = Counter(label: "image_fetch_fetched_bytes_total", factory: factory)
        fetchDuration = Timer(label: "image_fetch_fetch_duration_seconds", factory: factory)
        ackLatency = Timer(label: "image_fetch_delivery_to_ack_seconds", factory: factory)
        confirmLatency = Timer(label: "image_fetch_publish_confirm_seconds", factory: factory)
        inFlight = Gauge(label: "image_fetch_jobs_in_flight", factory: factory)
        waiting = Gauge(label: "image_fetch_jobs_waiting_admission", factory: factory)
        self.concurrency = Gauge(label: "image_fetch_concurrency", factory: factory)
        connected = Gauge(label: "image_fetch_broker_connected", factory: factory)
        blocked = Gauge(label: "image_fetch_broker_blocked", factory: factory)
        self.concurrency.record(concurrency)
        connected.record(0)
        blocked.record(0)
    }

    /// Counts one published result.
    func result(status: JobResult.Status, code: JobError.Code?) {
        let key = "\(status.rawValue)|\(code?.rawValue ?? "")"
        let counter = results.withLock { cache -> Counter in
            if let counter = cache[key] { return counter }
            let counter = Counter(label: "image_fetch_results_total",
                                  dimensions: [("status", status.rawValue), ("code", code?.rawValue ?? "none")],
                                  factory: factory)
            cache[key] = counter
            return counter
        }
        counter.increment()
    }

    /// Records one queue-depth sample.
    func depth(queue: String, ready: Int, consumers: Int) {
        let gauges = depthGauges.withLock { cache -> (ready: Gauge, consumers: Gauge) in
            if let gauges = cache[queue] { return gauges }
            let gauges = (
                ready: Gauge(label: "image_fetch_queue_ready_messages", dimensions: [("queue", queue)], factory: factory),
                consumers: Gauge(label: "image_fetch_queue_consumers", dimensions: [("queue", queue)], factory: factory))
            cache[queue] = gauges
            return gauges
        }
        gauges.ready.record(ready)
        gauges.consumers.record(consumers)
    }

    /// The Prometheus text exposition.
    public func render() -> [UInt8] {
        var buffer: [UInt8] = []
        registry.emit(into: &buffer)
        return buffer
    }
}
