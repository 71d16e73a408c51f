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

    /// `headers` with `context` as their trace context; a `tracestate` the context lacks is removed.
    package static func inject(_ context: TraceContext, into headers: [String: AMQPFieldValue]) -> [String: AMQPFieldValue] {
        var headers = headers
        headers[traceparent] = .string(context.traceparent)
        headers[tracestate] = context.traceState.map { .string($0) }
        return headers
    }
}
