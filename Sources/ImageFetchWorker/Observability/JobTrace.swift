import Logging
import Synchronization
import Tracing

/// A job's trace: the context it arrived with, its own span, and the context that its result, retry
/// and dead-letter copies carry on. Without a tracer (tracing off) the job still has a context for
/// its messages and logs: the incoming one passed on unchanged, or a new trace when it had none.
///
/// A value stored in the job's context, not an object of its own: one allocation fewer for every
/// prefetched job (2,048 at concurrency 1,024).
package struct JobTrace: Sendable {
    /// The job's context: its trace id and the span downstream consumers see as their parent.
    package let context: TraceContext
    /// The job's span (a no-op span when tracing is off or the trace is not sampled).
    package let span: any Span

    /// Starts the job's span as a consumer of `queue`, continuing the message's context.
    package init(
        headers: [String: AMQPFieldValue], queue: String, messageID: String?, bodySize: Int,
        tracer: (any Tracer)? = JobTrace.tracer
    ) {
        // A local, not a stored property: nothing reads it later, and a stored copy would sit in
        // every prefetched job's context.
        let incoming = TraceHeaders.extract(headers)
        guard let tracer else {
            span = Tracing.NoOpTracer.NoOpSpan(context: .topLevel)
            context = incoming ?? TraceContext(traceID: .random(), spanID: TraceContext.randomSpanID())
            return
        }
        var parent = InstrumentationContext.topLevel
        parent.traceContext = incoming
        var attributes = SpanAttributes()
        attributes["messaging.system"] = "rabbitmq"
        attributes["messaging.operation.type"] = "process"
        attributes["messaging.operation.name"] = "deliver"
        attributes["messaging.destination.name"] = queue
        attributes["messaging.message.body.size"] = bodySize
        if let messageID { attributes["messaging.message.id"] = messageID }
        let span = tracer.startAnySpan(
            "process \(queue)", context: parent, ofKind: .consumer,
            at: DefaultTracerClock.now, function: #function, file: #fileID, line: #line)
        span.attributes = attributes
        self.span = span
        // A tracer of this module records the span's context; another one (or none) leaves the
        // job with the incoming context, as without tracing.
        context =
            span.context.traceContext
            ?? incoming ?? TraceContext(traceID: .random(), spanID: TraceContext.randomSpanID())
    }

    /// The trace of a delivery from `queue`.
    package init(delivery: Delivery, queue: String) {
        self.init(
            headers: delivery.properties.headers, queue: queue, messageID: delivery.properties.messageID,
            bodySize: delivery.body.count)
    }

    /// The tracer that jobs use; nil (the default) turns span recording off. Set once at start-up
    /// by ``TracingSetup``.
    package static var tracer: (any Tracer)? { TracerHolder.shared.withLock { $0 } }

    /// Starts a stage of the job (fetch, validate, store, publish) as a child of the job's span.
    package func stage(_ name: String, kind: SpanKind = .internal, attributes: SpanAttributes = [:]) -> any Span {
        guard span.isRecording, let tracer = Self.tracer else { return Tracing.NoOpTracer.NoOpSpan(context: .topLevel) }
        let child = tracer.startAnySpan(
            name, context: span.context, ofKind: kind, at: DefaultTracerClock.now,
            function: #function, file: #fileID, line: #line)
        if !attributes.isEmpty { child.attributes = attributes }
        return child
    }

    /// Puts the job's context into `headers`: of the result and the retry and dead-letter copies.
    package func carry(in headers: inout [String: AMQPFieldValue]) {
        TraceHeaders.inject(context, into: &headers)
    }

    /// `trace_id` and `span_id` for the job's log lines.
    package var logMetadata: Logger.Metadata {
        ["trace_id": "\(context.traceID.hex)", "span_id": "\(context.spanIDHex)"]
    }

    // MARK: - Stages

    /// The `fetch` stage: an HTTP client span for `url` (without credentials, query or fragment).
    package func fetch(url: String, method: String = "GET") -> any Span {
        guard span.isRecording else { return Tracing.NoOpTracer.NoOpSpan(context: .topLevel) }
        var attributes = SpanAttributes()
        attributes["http.request.method"] = method
        let redacted = URLPolicy.redacted(url)
        attributes["url.full"] = redacted.url
        if let host = redacted.host { attributes["server.address"] = host }
        return stage("fetch", kind: .client, attributes: attributes)
    }

    /// The `error.type` of a span whose job went back to the broker unanswered (its fetch was
    /// aborted at the drain's deadline, a drain or a lost channel handed it back): a trace's word,
    /// not a result code, since no result or dead-letter copy ever carries it.
    package static let handedBack = "aborted"

    /// Ends a `fetch` span with the response's status, or the error code of a failed transfer.
    package static func endFetch(_ span: any Span, httpStatus: Int?, errorCode: String?) {
        guard span.isRecording else { return }
        if let httpStatus { span.attributes["http.response.status_code"] = httpStatus }
        if let errorCode {
            span.attributes["error.type"] = errorCode
            span.setStatus(SpanStatus(code: .error, message: errorCode))
        } else if let httpStatus, httpStatus >= 400 {
            span.attributes["error.type"] = String(httpStatus)
            span.setStatus(SpanStatus(code: .error))
        }
        span.end()
    }

    /// Ends a `validate` span with what the header says.
    package static func endValidate(_ span: any Span, info: ImageInfo) {
        guard span.isRecording else { return }
        span.attributes["image_fetch.image.format"] = info.format.rawValue
        span.attributes["image_fetch.image.width"] = info.width
        span.attributes["image_fetch.image.height"] = info.height
        span.end()
    }

    /// Ends a `store` span, failed with the error's code when the sink failed.
    package static func endStore<Stored>(_ span: any Span, _ result: Result<Stored, JobError>) {
        guard span.isRecording else { return }
        if case .failure(let error) = result {
            span.attributes["error.type"] = error.code.rawValue
            span.setStatus(SpanStatus(code: .error, message: error.code.rawValue))
        }
        span.end()
    }

    /// Ends a `publish` span once every message was confirmed, or failed with `failure`.
    package static func endPublish(_ span: any Span, failure: String?) {
        guard span.isRecording else { return }
        if let failure {
            span.attributes["error.type"] = failure
            span.setStatus(SpanStatus(code: .error, message: failure))
        }
        span.end()
    }

    /// The `publish` stage: a producer span until the broker confirmed the message to `destination`.
    package func publish(to destination: String) -> any Span {
        guard span.isRecording else { return Tracing.NoOpTracer.NoOpSpan(context: .topLevel) }
        var attributes = SpanAttributes()
        attributes["messaging.system"] = "rabbitmq"
        attributes["messaging.operation.type"] = "send"
        attributes["messaging.destination.name"] = destination
        return stage("publish", kind: .producer, attributes: attributes)
    }

    /// Ends the job's span; `errorCode` marks it failed with that code.
    package func end(errorCode: String? = nil) {
        guard span.isRecording else { return }
        if let errorCode {
            span.attributes["error.type"] = errorCode
            span.setStatus(SpanStatus(code: .error, message: errorCode))
        }
        span.end()
    }
}

/// The process-wide tracer of ``JobTrace``, written once by ``TracingSetup``.
enum TracerHolder {
    static let shared = Mutex<(any Tracer)?>(nil)
}

/// Where this module's tracer keeps a span's W3C context in an `InstrumentationContext`.
enum TraceContextKey: InstrumentationContextKey {
    typealias Value = TraceContext
    static var nameOverride: String? { "w3c-trace-context" }
}

extension InstrumentationContext {
    /// The W3C context of the current span, when this module's tracer made it.
    package var traceContext: TraceContext? {
        get { self[TraceContextKey.self] }
        set { self[TraceContextKey.self] = newValue }
    }
}

extension OutcomePolicy.Outcome {
    /// The error code a job span ends with: the final failure's, nil for ok, retried and deferred
    /// jobs (a retried job's failing stage carries its error).
    package var errorCode: String? {
        switch self {
        case .failed(let code), .failedFinal(let code), .deadLettered(let code): code.rawValue
        case .ok, .notModified, .retry, .deferred: nil
        }
    }
}
