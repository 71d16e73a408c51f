import Tracing

/// An `ExportTraceServiceRequest` in OTLP's JSON encoding (`http/json`): ids in hex, 64-bit
/// integers and times as decimal strings, enums as numbers.
package enum OTLPJSON {
    package static func encode(_ spans: [FinishedSpan], resource: [(String, String)]) -> [UInt8] {
        var json = JSONWriter(capacity: 512 * spans.count + 256)
        json.beginObject()
        json.key("resourceSpans")
        json.beginArray()
        json.beginObject()
        json.key("resource")
        json.beginObject()
        json.key("attributes")
        json.beginArray()
        for (key, value) in resource { attribute(&json, key, .string(value)) }
        json.endArray()
        json.endObject()
        json.key("scopeSpans")
        json.beginArray()
        json.beginObject()
        json.key("scope")
        json.beginObject()
        json.field("name", "image-fetch-worker")
        json.field("version", WorkerVersion.current)
        json.endObject()
        json.key("spans")
        json.beginArray()
        for span in spans { encode(span, into: &json) }
        json.endArray()
        json.endObject()
        json.endArray()
        json.endObject()
        json.endArray()
        json.endObject()
        return json.takeBytes()
    }

    private static func encode(_ span: FinishedSpan, into json: inout JSONWriter) {
        json.beginObject()
        json.field("traceId", span.trace.traceID.hex)
        json.field("spanId", span.trace.spanIDHex)
        if let parent = span.parentSpanID { json.field("parentSpanId", TraceContext.hex(parent)) }
        json.field("traceState", span.trace.traceState)
        json.field("name", span.name)
        json.field("kind", OTLPEncoding.kindNumber(span.kind))
        json.field("startTimeUnixNano", String(span.start))
        json.field("endTimeUnixNano", String(span.end))
        json.key("attributes")
        json.beginArray()
        for (key, value) in span.attributes { attribute(&json, key, value) }
        json.endArray()
        if !span.events.isEmpty {
            json.key("events")
            json.beginArray()
            for event in span.events {
                json.beginObject()
                json.field("timeUnixNano", String(event.nanosecondsSinceEpoch))
                json.field("name", event.name)
                json.key("attributes")
                json.beginArray()
                event.attributes.forEach { attribute(&json, $0, $1) }
                json.endArray()
                json.endObject()
            }
            json.endArray()
        }
        if let status = span.status {
            json.key("status")
            json.beginObject()
            json.field("code", status.code == .ok ? 1 : 2)
            json.field("message", status.message)
            json.endObject()
        }
        json.endObject()
    }

    private static func attribute(_ json: inout JSONWriter, _ key: String, _ value: SpanAttribute) {
        json.beginObject()
        json.field("key", key)
        json.key("value")
        json.beginObject()
        switch value {
        case .int32(let number): json.field("intValue", String(number))
        case .int64(let number): json.field("intValue", String(number))
        case .double(let number): json.field("doubleValue", decimal: number)
        case .bool(let flag): json.field("boolValue", flag)
        case .string(let text): json.field("stringValue", text)
        case .stringConvertible(let value): json.field("stringValue", "\(value)")
        default: json.field("stringValue", "\(value)")
        }
        json.endObject()
        json.endObject()
    }
}
