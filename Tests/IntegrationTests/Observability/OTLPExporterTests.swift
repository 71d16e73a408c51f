import Foundation
import Logging
import Testing

@testable import ImageFetchWorker

#if canImport(Glibc)
import Glibc
#endif

/// The trace exporter against a collector that takes connections and never answers: what it holds
/// stays bounded by its configuration, whatever the collector does.
@Suite struct OTLPExporterTests {
    /// A TCP listener on 127.0.0.1 that never accepts: the kernel completes the handshakes and
    /// takes the requests into its buffers, and no response ever comes.
    final class SilentCollector {
        let descriptor: Int32
        let port: Int

        init() throws {
            descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            port = try TestBroker.bindLoopback(descriptor)
            guard listen(descriptor, 64) == 0 else { throw POSIXError(.EADDRINUSE) }
        }

        deinit { close(descriptor) }
    }

    static func span(_ index: Int) -> FinishedSpan {
        let trace = TraceContext(
            traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", tracestate: nil)!
        return FinishedSpan(
            name: "job \(index)", kind: .consumer, trace: trace.child(spanID: UInt64(index + 1)),
            parentSpanID: nil, start: 1, end: 2, attributes: [], status: nil, events: [])
    }

    /// Every full batch used to start a request of its own, each holding its spans and body until
    /// the timeout: a slow collector held spans per second × timeout, far past the queue's size.
    @Test func aCollectorThatNeverAnswersHoldsAtMostTheQueueAndTwoRequests() async throws {
        let collector = try SilentCollector()
        var configuration = OTLPExporter.Configuration(endpoint: "http://127.0.0.1:\(collector.port)/v1/traces")
        configuration.maxBatchSize = 10
        configuration.maxQueueSize = 50
        configuration.scheduleDelay = 60
        configuration.timeout = 30
        let exporter = try OTLPExporter(configuration: configuration, logger: Logger(label: "test"))
        for index in 0..<400 { exporter.enqueue(Self.span(index)) }
        try await Task.sleep(for: .milliseconds(500))
        #expect(exporter.exportsInFlight <= OTLPExporter.maxExportsInFlight, "\(exporter.exportsInFlight) requests")
        #expect(exporter.queuedSpans <= configuration.maxQueueSize)
    }
}
