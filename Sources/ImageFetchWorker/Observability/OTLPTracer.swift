import Tracing

/// A swift-distributed-tracing tracer that records W3C-identified spans and hands finished ones
/// to an ``OTLPExporter``. Sampling is parent-based: a span follows its parent's sampled flag, and a
/// root span follows ``Sampler``. Propagation (extract/inject) uses `traceparent` and `tracestate`.
package final class OTLPTracer: Tracer {
    package typealias Span = OTLPSpan

    /// Which root spans are recorded (OTEL_TRACES_SAMPLER).
    package enum Sampler: String, Sendable {
        case alwaysOn = "always_on"
        case alwaysOff = "always_off"
        case parentBasedAlwaysOn = "parentbased_always_on"
        case parentBasedAlwaysOff = "parentbased_always_off"

        func sample(parent: TraceContext?) -> Bool {
            switch self {
            case .alwaysOn: true
            case .alwaysOff: false
            case .parentBasedAlwaysOn: parent?.isSampled ?? true
            case .parentBasedAlwaysOff: parent?.isSampled ?? false
            }
        }
    }

    private let sampler: Sampler
    private let sink: @Sendable (FinishedSpan) -> Void

    /// `sink` receives every sampled span once it ended (the exporter's queue).
    package init(sampler: Sampler = .parentBasedAlwaysOn, sink: @escaping @Sendable (FinishedSpan) -> Void) {
        self.sampler = sampler
        self.sink = sink
    }

    package func startSpan<Instant: TracerInstant>(
        _ operationName: String, context: @autoclosure () -> InstrumentationContext, ofKind kind: SpanKind,
        at instant: @autoclosure () -> Instant, function: String, file fileID: String, line: UInt
    ) -> OTLPSpan {
        var spanContext = context()
        let parent = spanContext.traceContext
        let sampled = sampler.sample(parent: parent)
        let own = TraceContext(traceID: parent?.traceID ?? .random(), spanID: TraceContext.randomSpanID(),
                               flags: sampled ? (parent?.flags ?? 0) | 1 : (parent?.flags ?? 0) & ~1,
                               traceState: parent?.traceState)
        spanContext.traceContext = own
        return OTLPSpan(name: operationName, kind: kind, context: spanContext, trace: own, parentSpanID: parent?.spanID,
                        start: instant().nanosecondsSinceEpoch, sink: sampled ? sink : nil)
    }

    package func startAnySpan<Instant: TracerInstant>(
        _ operationName: String, context: @autoclosure () -> InstrumentationContext, ofKind kind: SpanKind,
        at instant: @autoclosure () -> Instant, function: String, file fileID: String, line: UInt
    ) -> any Tracing.Span {
        startSpan(operationName, context: context(), ofKind: kind, at: instant(), function: function, file: fileID, line: line)
    }

    package func forceFlush() {}

    package func extract<Carrier, Extract: Extractor>(_ carrier: Carrier, into context: inout InstrumentationContext,
                                                       using extractor: Extract) where Extract.Carrier == Carrier {
        guard let parent = extractor.extract(key: TraceHeaders.traceparent, from: carrier) else { return }
        context.traceContext = TraceContext(traceparent: parent,
                                            tracestate: extractor.extract(key: TraceHeaders.tracestate, from: carrier))
    }

    package func inject<Carrier, Inject: Injector>(_ context: InstrumentationContext, into carrier: inout Carrier,
                                                    using injector: Inject) where Inject.Carrier == Carrier {
        guard let trace = context.traceContext else { return }
        injector.inject(trace.traceparent, forKey: TraceHeaders.traceparent, into: &carrier)
        if let state = trace.traceState { injector.inject(state, forKey: TraceHeaders.tracestate, into: &carrier) }
    }
}

/// A span's record once it ended: what the exporter encodes.
package struct FinishedSpan: Sendable {
    package var name: String
    package var kind: SpanKind
    package var trace: TraceContext
    package var parentSpanID: UInt64?
    package var start: UInt64
    package var end: UInt64
    package var attributes: [(String, SpanAttribute)]
    package var status: SpanStatus?
    package var events: [SpanEvent]
}

/// One span of ``OTLPTracer``. Thread-safe: stages end on other queues than they started on.
package final class OTLPSpan: Tracing.Span {
    package let context: InstrumentationContext
    private let state: NSLockedValue<State>
    private let sink: (@Sendable (FinishedSpan) -> Void)?

    private struct State {
        var record: FinishedSpan
        var ended = false
    }

    init(name: String, kind: SpanKind, context: InstrumentationContext, trace: TraceContext, parentSpanID: UInt64?,
         start: UInt64, sink: (@Sendable (FinishedSpan) -> Void)?) {
        self.context = context
        self.sink = sink
        state = NSLockedValue(State(record: FinishedSpan(name: name, kind: kind, trace: trace, parentSpanID: parentSpanID,
                                                         start: start, end: start, attributes: [], status: nil,
                                                         events: [])))
    }

    /// False for spans that are not sampled: callers skip building attributes for them.
    package var isRecording: Bool { sink != nil && !state.withLock { $0.ended } }

    package var operationName: String {
        get { state.withLock { $0.record.name } }
        set { state.withLock { $0.record.name = newValue } }
    }

    package var attributes: SpanAttributes {
        get {
            state.withLock { state in
                var attributes = SpanAttributes()
                for (key, value) in state.record.attributes { attributes.set(key, value: value) }
                return attributes
            }
        }
        set {
            var pairs: [(String, SpanAttribute)] = []
            newValue.forEach { pairs.append(($0, $1)) }
            state.withLock { $0.record.attributes = pairs }
        }
    }

    package func setStatus(_ status: SpanStatus) { state.withLock { $0.record.status = status } }

    package func addEvent(_ event: SpanEvent) { state.withLock { $0.record.events.append(event) } }

    package func recordError<Instant: TracerInstant>(_ error: any Error, attributes: SpanAttributes,
                                                    at instant: @autoclosure () -> Instant) {
        var attributes = attributes
        attributes["exception.type"] = "\(type(of: error))"
        attributes["exception.message"] = "\(error)"
        addEvent(SpanEvent(name: "exception", at: instant(), attributes: attributes))
    }

    package func addLink(_ link: SpanLink) {}

    package func end<Instant: TracerInstant>(at instant: @autoclosure () -> Instant) {
        let finished: FinishedSpan? = state.withLock { state in
            guard !state.ended else { return nil }
            state.ended = true
            state.record.end = instant().nanosecondsSinceEpoch
            return state.record
        }
        if let finished { sink?(finished) }
    }
}
