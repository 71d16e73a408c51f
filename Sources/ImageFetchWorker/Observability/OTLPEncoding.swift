import Tracing

/// The two encodings of OTLP/HTTP (`OTEL_EXPORTER_OTLP_PROTOCOL`): protobuf, the specification's
/// default that every collector and Jaeger accept, and JSON.
package enum OTLPEncoding: String, Sendable, Equatable, CaseIterable {
    case protobuf = "http/protobuf"
    case json = "http/json"

    package var contentType: String {
        switch self {
        case .protobuf: "application/x-protobuf"
        case .json: "application/json"
        }
    }

    package func encode(_ spans: [FinishedSpan], resource: [(String, String)]) -> [UInt8] {
        switch self {
        case .protobuf: OTLPProtobuf.encode(spans, resource: resource)
        case .json: OTLPJSON.encode(spans, resource: resource)
        }
    }

    /// The `SpanKind` enum of trace.proto: INTERNAL 1, SERVER 2, CLIENT 3, PRODUCER 4, CONSUMER 5.
    package static func kindNumber(_ kind: SpanKind) -> Int {
        switch kind {
        case .internal: 1
        case .server: 2
        case .client: 3
        case .producer: 4
        case .consumer: 5
        }
    }
}
