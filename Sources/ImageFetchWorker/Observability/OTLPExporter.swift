import Dispatch
import Foundation
import Logging
import Synchronization
import Tracing

/// Sends finished spans to an OpenTelemetry collector over OTLP/HTTP, protobuf or JSON
/// (`POST <endpoint>/v1/traces`), in batches, from a queue of
/// its own through the worker's libcurl engine. A full queue drops spans (counted in the log)
/// rather than slowing jobs down; a failed export is logged and dropped, as the OTLP
/// specification allows for a best-effort exporter.
package final class OTLPExporter: Sendable {
    package struct Configuration: Sendable, Equatable {
        /// The full traces URL, e.g. `http://collector:4318/v1/traces`.
        package var endpoint: String
        /// The body's encoding (OTEL_EXPORTER_OTLP_PROTOCOL, default http/protobuf).
        package var encoding: OTLPEncoding = .protobuf
        /// Extra request headers, `Name: value` (OTEL_EXPORTER_OTLP_HEADERS).
        package var headers: [String] = []
        /// `service.name` and the other resource attributes.
        package var resource: [(String, String)] = []
        /// Seconds between exports (OTEL_BSP_SCHEDULE_DELAY, default 5 s).
        package var scheduleDelay: Double = 5
        /// Spans kept while waiting for an export (OTEL_BSP_MAX_QUEUE_SIZE, default 2048).
        package var maxQueueSize: Int = 2048
        /// Spans per request (OTEL_BSP_MAX_EXPORT_BATCH_SIZE, default 512).
        package var maxBatchSize: Int = 512
        /// Seconds per export request (OTEL_EXPORTER_OTLP_TIMEOUT, default 10 s).
        package var timeout: Double = 10

        package init(endpoint: String) { self.endpoint = endpoint }

        package static func == (lhs: Self, rhs: Self) -> Bool {
            lhs.endpoint == rhs.endpoint && lhs.encoding == rhs.encoding && lhs.headers == rhs.headers
                && lhs.scheduleDelay == rhs.scheduleDelay
                && lhs.maxQueueSize == rhs.maxQueueSize && lhs.maxBatchSize == rhs.maxBatchSize
                && lhs.timeout == rhs.timeout && lhs.resource.elementsEqual(rhs.resource, by: ==)
        }
    }

    private let configuration: Configuration
    private let engine: FetchEngine
    private let logger: Logger
    private let queue = DispatchQueue(label: "image-fetch-worker.otlp")
    private let pending = Mutex(Pending())

    private struct Pending {
        var spans: [FinishedSpan] = []
        var dropped = 0
        var exporting = 0
    }

    package init(configuration: Configuration, logger: Logger) throws {
        self.configuration = configuration
        self.logger = logger
        var limits = WorkerConfiguration.Fetch()
        limits.timeout = configuration.timeout
        limits.connectTimeout = min(configuration.timeout, 5)
        limits.maxBytes = 1 << 20
        do {
            engine = try FetchEngine(
                configuration: limits, addressPolicy: nil, maxConnections: Self.maxExportsInFlight)
        } catch {
            throw StartupError("the trace exporter could not start: \(error.message)")
        }
        scheduleExport()
    }

    /// Export requests that may be in flight at once, as many as the engine's connections.
    package static let maxExportsInFlight = 2

    /// Export requests started and not yet answered.
    package var exportsInFlight: Int { pending.withLock { $0.exporting } }

    /// Spans waiting for an export.
    package var queuedSpans: Int { pending.withLock { $0.spans.count } }

    /// Exports every `scheduleDelay` seconds while the exporter exists.
    private func scheduleExport() {
        queue.asyncAfter(deadline: .now() + configuration.scheduleDelay) { [weak self] in
            guard let self else { return }
            self.export()
            self.scheduleExport()
        }
    }

    /// Queues a finished span; exports at once when a batch is full.
    package func enqueue(_ span: FinishedSpan) {
        let full = pending.withLock { pending -> Bool in
            guard pending.spans.count < configuration.maxQueueSize else {
                pending.dropped += 1
                return false
            }
            pending.spans.append(span)
            return pending.spans.count == configuration.maxBatchSize
        }
        if full { queue.async { self.export() } }
    }

    /// Exports everything queued and waits up to `timeout` seconds for the requests to finish
    /// (before the process exits).
    package func flush(timeout: Double) {
        let deadline = Date().addingTimeInterval(timeout)
        repeat {
            queue.sync { export() }
            if pending.withLock({ $0.spans.isEmpty && $0.exporting == 0 }) { return }
            usleep(10_000)
        } while Date() < deadline
    }

    /// Runs on `queue`. Starts at most ``maxExportsInFlight`` requests: while a collector is slow,
    /// spans wait in the queue, whose size bounds them (the rest are dropped and counted), instead
    /// of each batch holding a request of its own until the timeout.
    private func export() {
        while true {
            let (batch, dropped) = pending.withLock { pending -> ([FinishedSpan], Int) in
                guard pending.exporting < Self.maxExportsInFlight else { return ([], 0) }
                let batch = Array(pending.spans.prefix(configuration.maxBatchSize))
                pending.spans.removeFirst(batch.count)
                defer { pending.dropped = 0 }
                if !batch.isEmpty { pending.exporting += 1 }
                return (batch, pending.dropped)
            }
            if dropped > 0 {
                logger.warning("trace export queue full; spans dropped", metadata: ["count": "\(dropped)"])
            }
            guard !batch.isEmpty else { return }
            var request = FetchRequest(url: configuration.endpoint)
            request.method = .post
            request.headers = ["Content-Type: \(configuration.encoding.contentType)"] + configuration.headers
            request.uploadBody = configuration.encoding.encode(batch, resource: configuration.resource)
            request.checkAddresses = false
            // Weak: a fetch in flight must not keep the exporter (and its engine) alive.
            engine.fetch(request) { [logger, weak self] response in
                if let self {
                    let batchWaits = pending.withLock { pending -> Bool in
                        pending.exporting -= 1
                        return pending.spans.count >= configuration.maxBatchSize
                    }
                    if batchWaits { queue.async { self.export() } }
                }
                guard let status = response.httpStatus, (200..<300).contains(status) else {
                    logger.warning(
                        "trace export failed; spans dropped",
                        metadata: [
                            "count": "\(batch.count)",
                            "error": "\(response.failure.map(\.message) ?? "HTTP \(response.httpStatus ?? 0)")",
                        ])
                    return
                }
            }
        }
    }
}
