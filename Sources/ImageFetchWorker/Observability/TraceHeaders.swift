import Logging
import Tracing

/// W3C Trace Context in AMQP message headers: `traceparent` and `tracestate`, as string
/// headers, the way OpenTelemetry's messaging instrumentations carry them.
package enum TraceHeaders {
    package static let traceparent = "traceparent"
    package static let tracestate = "tracestate"

    /// The context a message carries; nil when it has none or an invalid one.
    package static func extract(_ headers: [String: AMQPFieldValue]) -> TraceContext? {
        guard let parent = headers[traceparent]?.stringValue else { return nil }
        return TraceContext(traceparent: parent, tracestate: headers[tracestate]?.stringValue)
    }

    /// Sets `context` as the headers' trace context; a `tracestate` the context lacks is removed.
    package static func inject(_ context: TraceContext, into headers: inout [String: AMQPFieldValue]) {
        // A copy's headers are shared with its delivery: copied once, with room for both entries,
        // rather than copied and then grown. A result's empty headers need no reserve.
        if !headers.isEmpty { headers.reserveCapacity(headers.count + 2) }
        if let state = context.traceState {
            headers[tracestate] = .string(state)
        } else if !headers.isEmpty {
            headers[tracestate] = nil
        }
        headers[traceparent] = .string(context.traceparent)
    }
}
