import Synchronization
import Tracing

/// A swift-distributed-tracing tracer that records W3C-identified spans and hands finished ones
/// to an ``OTLPExporter``. Sampling is parent-based: a span follows its parent's sampled flag, and a
/// root span follows ``Sampler``. Propagation (extract/inject) uses `traceparent` and `tracestate`.
package final class OTLPTracer: Tracer {
    package typealias Span = OTLPSpan

    /// Which spans are recorded (OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG).
    package enum Sampler: Sendable, Equatable, CustomStringConvertible {
        case alwaysOn
        case alwaysOff
        /// A share of the traces, chosen by trace id, so every service that uses the same ratio
        /// keeps or drops the same traces whole.
        case traceIDRatio(Double)
        /// A span follows its parent's sampled flag; a root span follows `root`.
        indirect case parentBased(root: Sampler)

        static let parentBasedAlwaysOn = Sampler.parentBased(root: .alwaysOn)

        /// The sampler an `OTEL_TRACES_SAMPLER` name selects; `ratio` is OTEL_TRACES_SAMPLER_ARG.
        init?(name: String, ratio: Double) {
            switch name {
            case "always_on": self = .alwaysOn
            case "always_off": self = .alwaysOff
            case "traceidratio": self = .traceIDRatio(ratio)
            case "parentbased_always_on": self = .parentBased(root: .alwaysOn)
            case "parentbased_always_off": self = .parentBased(root: .alwaysOff)
            case "parentbased_traceidratio": self = .parentBased(root: .traceIDRatio(ratio))
            default: return nil
            }
        }

        func sample(parent: TraceContext?, traceID: TraceContext.TraceID) -> Bool {
            switch self {
            case .alwaysOn: true
            case .alwaysOff: false
            case .traceIDRatio(let ratio):
                // The low 63 bits of the id against the ratio's share of them, as OpenTelemetry's SDKs do.
                ratio >= 1 || (ratio > 0 && traceID.low & (UInt64.max >> 1) < UInt64(ratio * 0x1p63))
            case .parentBased(let root): parent.map(\.isSampled) ?? root.sample(parent: nil, traceID: traceID)
            }
        }

        package var description: String {
            switch self {
            case .alwaysOn: "always_on"
            case .alwaysOff: "always_off"
            case .traceIDRatio(let ratio): "traceidratio(\(ratio))"
            case .parentBased(let root): "parentbased_\(root)"
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
        let traceID = parent?.traceID ?? .random()
        let sampled = sampler.sample(parent: parent, traceID: traceID)
        let own = TraceContext(
            traceID: traceID, spanID: TraceContext.randomSpanID(),
            flags: sampled ? (parent?.flags ?? 0) | 1 : (parent?.flags ?? 0) & ~1,
            traceState: parent?.traceState)
        spanContext.traceContext = own
        return OTLPSpan(
            name: operationName, kind: kind, context: spanContext, trace: own, parentSpanID: parent?.spanID,
            start: instant().nanosecondsSinceEpoch, sink: sampled ? sink : nil)
    }

    package func startAnySpan<Instant: TracerInstant>(
        _ operationName: String, context: @autoclosure () -> InstrumentationContext, ofKind kind: SpanKind,
        at instant: @autoclosure () -> Instant, function: String, file fileID: String, line: UInt
    ) -> any Tracing.Span {
        startSpan(
            operationName, context: context(), ofKind: kind, at: instant(), function: function, file: fileID, line: line
        )
    }

    package func forceFlush() {}

    package func extract<Carrier, Extract: Extractor>(
        _ carrier: Carrier, into context: inout InstrumentationContext,
        using extractor: Extract
    ) where Extract.Carrier == Carrier {
        guard let parent = extractor.extract(key: TraceHeaders.traceparent, from: carrier) else { return }
        context.traceContext = TraceContext(
            traceparent: parent,
            tracestate: extractor.extract(key: TraceHeaders.tracestate, from: carrier))
    }

    package func inject<Carrier, Inject: Injector>(
        _ context: InstrumentationContext, into carrier: inout Carrier,
        using injector: Inject
    ) where Inject.Carrier == Carrier {
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
    private let state: Mutex<State>
    private let sink: (@Sendable (FinishedSpan) -> Void)?

    private struct State {
        var record: FinishedSpan
        var ended = false
    }

    init(
        name: String, kind: SpanKind, context: InstrumentationContext, trace: TraceContext, parentSpanID: UInt64?,
        start: UInt64, sink: (@Sendable (FinishedSpan) -> Void)?
    ) {
        self.context = context
        self.sink = sink
        state = Mutex(
            State(
                record: FinishedSpan(
                    name: name, kind: kind, trace: trace, parentSpanID: parentSpanID,
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

    package func recordError<Instant: TracerInstant>(
        _ error: any Error, attributes: SpanAttributes,
        at instant: @autoclosure () -> Instant
    ) {
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
