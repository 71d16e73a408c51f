import Tracing

/// An `ExportTraceServiceRequest` in protobuf, OTLP/HTTP's default encoding
/// (`application/x-protobuf`). Written by hand from the field numbers of opentelemetry-proto's
/// `trace.proto`, `resource.proto` and `common.proto` (v1): the worker sends a handful of message
/// types, and swift-protobuf's generated code and plugin would cost every build more than this.
package enum OTLPProtobuf {
    package static func encode(_ spans: [FinishedSpan], resource: [(String, String)]) -> [UInt8] {
        var request = ProtobufWriter(capacity: 256 * spans.count + 256)
        // ExportTraceServiceRequest.resource_spans = 1
        request.message(1) { resourceSpans in
            // ResourceSpans.resource = 1; Resource.attributes = 1
            resourceSpans.message(1) { resourceMessage in
                for (key, value) in resource { attribute(&resourceMessage, field: 1, key, .string(value)) }
            }
            // ResourceSpans.scope_spans = 2
            resourceSpans.message(2) { scopeSpans in
                // ScopeSpans.scope = 1: InstrumentationScope.name = 1, version = 2
                scopeSpans.message(1) { scope in
                    scope.string(1, "image-fetch-worker")
                    scope.string(2, WorkerVersion.current)
                }
                // ScopeSpans.spans = 2
                for span in spans { scopeSpans.message(2) { encode(span, into: &$0) } }
            }
        }
        return request.bytes
    }

    private static func encode(_ span: FinishedSpan, into message: inout ProtobufWriter) {
        message.bytes(1, traceIDBytes(span.trace.traceID))  // trace_id
        message.bytes(2, bigEndianBytes(span.trace.spanID))  // span_id
        if let state = span.trace.traceState { message.string(3, state) }  // trace_state
        if let parent = span.parentSpanID { message.bytes(4, bigEndianBytes(parent)) }  // parent_span_id
        message.string(5, span.name)  // name
        message.varint(6, UInt64(OTLPEncoding.kindNumber(span.kind)))  // kind
        message.fixed64(7, span.start)  // start_time_unix_nano
        message.fixed64(8, span.end)  // end_time_unix_nano
        for (key, value) in span.attributes { attribute(&message, field: 9, key, value) }  // attributes
        for event in span.events {  // events = 11
            message.message(11) { eventMessage in
                eventMessage.fixed64(1, event.nanosecondsSinceEpoch)  // time_unix_nano
                eventMessage.string(2, event.name)  // name
                event.attributes.forEach { attribute(&eventMessage, field: 3, $0, $1) }  // attributes
            }
        }
        if let status = span.status {  // status = 15: message = 2, code = 3 (OK 1, ERROR 2)
            message.message(15) { statusMessage in
                if let text = status.message { statusMessage.string(2, text) }
                statusMessage.varint(3, status.code == .ok ? 1 : 2)
            }
        }
        message.fixed32(16, UInt32(span.trace.flags))  // flags: the W3C trace flags in bits 0–7
    }

    /// A `KeyValue` (key = 1, value = 2) whose `AnyValue` is string_value = 1, bool_value = 2,
    /// int_value = 3 or double_value = 4; other attribute kinds go as their text.
    private static func attribute(_ message: inout ProtobufWriter, field: Int, _ key: String, _ value: SpanAttribute) {
        message.message(field) { keyValue in
            keyValue.string(1, key)
            keyValue.message(2) { anyValue in
                switch value {
                case .int32(let number): anyValue.varint(3, UInt64(bitPattern: Int64(number)), always: true)
                case .int64(let number): anyValue.varint(3, UInt64(bitPattern: number), always: true)
                case .double(let number): anyValue.double(4, number)
                case .bool(let flag): anyValue.varint(2, flag ? 1 : 0, always: true)
                case .string(let text): anyValue.string(1, text, always: true)
                case .stringConvertible(let value): anyValue.string(1, "\(value)", always: true)
                default: anyValue.string(1, "\(value)", always: true)
                }
            }
        }
    }

    private static func traceIDBytes(_ id: TraceContext.TraceID) -> [UInt8] {
        bigEndianBytes(id.high) + bigEndianBytes(id.low)
    }

    /// The byte order of the ids' hex form, which is what OTLP's `bytes` ids carry.
    private static func bigEndianBytes(_ value: UInt64) -> [UInt8] {
        (0..<8).map { UInt8(truncatingIfNeeded: value >> (56 - 8 * $0)) }
    }
}

/// Protobuf's wire format, the parts OTLP needs: varints, fixed 32/64-bit values and
/// length-delimited fields. Proto3 leaves fields at their default value out; a oneof member is
/// always written (`always:`), because its presence is what selects it.
package struct ProtobufWriter {
    package private(set) var bytes: [UInt8]

    package init(capacity: Int = 64) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    private enum WireType: UInt8 {
        case varint = 0
        case fixed64 = 1
        case lengthDelimited = 2
        case fixed32 = 5
    }

    private mutating func tag(_ field: Int, _ type: WireType) {
        appendVarint(UInt64(field) << 3 | UInt64(type.rawValue))
    }

    private mutating func appendVarint(_ value: UInt64) {
        var value = value
        while value >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: value) | 0x80)
            value >>= 7
        }
        bytes.append(UInt8(value))
    }

    /// uint32, uint64, enums, bools, and int64 as its two's complement (ten bytes when negative).
    package mutating func varint(_ field: Int, _ value: UInt64, always: Bool = false) {
        guard value != 0 || always else { return }
        tag(field, .varint)
        appendVarint(value)
    }

    package mutating func fixed64(_ field: Int, _ value: UInt64) {
        guard value != 0 else { return }
        tag(field, .fixed64)
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    package mutating func fixed32(_ field: Int, _ value: UInt32) {
        guard value != 0 else { return }
        tag(field, .fixed32)
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    package mutating func double(_ field: Int, _ value: Double) {
        tag(field, .fixed64)
        withUnsafeBytes(of: value.bitPattern.littleEndian) { bytes.append(contentsOf: $0) }
    }

    package mutating func bytes(_ field: Int, _ value: [UInt8]) {
        guard !value.isEmpty else { return }
        tag(field, .lengthDelimited)
        appendVarint(UInt64(value.count))
        bytes.append(contentsOf: value)
    }

    package mutating func string(_ field: Int, _ value: String, always: Bool = false) {
        guard !value.isEmpty || always else { return }
        tag(field, .lengthDelimited)
        appendVarint(UInt64(value.utf8.count))
        bytes.append(contentsOf: value.utf8)
    }

    /// An embedded message, written by `body` into a writer of its own and then length-prefixed;
    /// an empty one is still written, since its presence can mean something (an `AnyValue`).
    package mutating func message(_ field: Int, _ body: (inout ProtobufWriter) -> Void) {
        var inner = ProtobufWriter()
        body(&inner)
        tag(field, .lengthDelimited)
        appendVarint(UInt64(inner.bytes.count))
        bytes.append(contentsOf: inner.bytes)
    }
}
