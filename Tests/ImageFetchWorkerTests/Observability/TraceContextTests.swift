import Dispatch
import Foundation
import Synchronization
import Testing
import Tracing

@testable import ImageFetchWorker

@Suite struct TraceContextTests {
    static let parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

    @Test func parsesAndFormatsTheSpecificationsExample() throws {
        let context = try #require(TraceContext(traceparent: Self.parent, tracestate: "congo=t61rcWkgMzE"))
        #expect(context.traceID.hex == "4bf92f3577b34da6a3ce929d0e0e4736")
        #expect(context.spanIDHex == "00f067aa0ba902b7")
        #expect(context.isSampled)
        #expect(context.traceState == "congo=t61rcWkgMzE")
        #expect(context.traceparent == Self.parent)
        #expect(
            TraceContext(traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00")?.isSampled == false)
    }

    @Test(arguments: [
        "",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",  // no flags
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",  // upper case
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",  // zero trace id
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",  // zero span id
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",  // version ff
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",  // version 00 is exactly 55
        "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",  // separator
        "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",  // not hex
        "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x",  // later version, no '-' after flags
    ])
    func rejectsInvalidTraceparents(_ value: String) {
        #expect(TraceContext(traceparent: value) == nil)
    }

    @Test func acceptsALaterVersionWithMoreFields() throws {
        let context = try #require(
            TraceContext(traceparent: "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-the-future-holds"))
        #expect(context.traceparent == Self.parent)
    }

    @Test func dropsAnInvalidTracestate() {
        #expect(
            TraceContext(traceparent: Self.parent, tracestate: String(repeating: "a", count: 513))?.traceState == nil)
        #expect(TraceContext(traceparent: Self.parent, tracestate: "a=\u{7f}")?.traceState == nil)
        #expect(TraceContext(traceparent: Self.parent, tracestate: "  ")?.traceState == nil)
    }

    @Test func headersRoundTrip() throws {
        let headers: [String: AMQPFieldValue] = [
            "traceparent": .string(Self.parent), "tracestate": .string("a=1"),
            "x-attempt": .int(2),
        ]
        let context = try #require(TraceHeaders.extract(headers))
        let child = context.child(spanID: 0x1234)
        var out = headers
        TraceHeaders.inject(child, into: &out)
        #expect(out["traceparent"] == .string("00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000001234-01"))
        #expect(out["tracestate"] == .string("a=1"))
        #expect(out["x-attempt"] == .int(2))
        // A context without tracestate removes a stale one.
        var bare = child
        bare.traceState = nil
        var stale = headers
        TraceHeaders.inject(bare, into: &stale)
        #expect(stale["tracestate"] == nil && stale["x-attempt"] == .int(2) && stale.count == 2)
        // A result's headers start empty and get the context alone.
        var fresh: [String: AMQPFieldValue] = [:]
        TraceHeaders.inject(child, into: &fresh)
        #expect(fresh == ["traceparent": .string(child.traceparent), "tracestate": .string("a=1")])
        TraceHeaders.inject(bare, into: &fresh)
        #expect(fresh == ["traceparent": .string(bare.traceparent)])
        #expect(TraceHeaders.extract(["traceparent": .int(1)]) == nil)
        #expect(TraceHeaders.extract([:]) == nil)
    }

    @Test func withoutATracerAJobPassesItsContextOnOrStartsATrace() throws {
        let continued = JobTrace(
            headers: ["traceparent": .string(Self.parent)], queue: "jobs", messageID: nil, bodySize: 10,
            tracer: nil)
        #expect(continued.context.traceparent == Self.parent)
        var headers: [String: AMQPFieldValue] = [:]
        continued.carry(in: &headers)
        #expect(headers == ["traceparent": .string(Self.parent)])
        #expect(continued.logMetadata["trace_id"] == "4bf92f3577b34da6a3ce929d0e0e4736")
        #expect(continued.stage("fetch").isRecording == false)

        let fresh = JobTrace(headers: [:], queue: "jobs", messageID: nil, bodySize: 10, tracer: nil)
        #expect(fresh.context.traceID != continued.context.traceID)
        let other = JobTrace(
            headers: ["traceparent": .string("garbage")], queue: "jobs", messageID: nil, bodySize: 1, tracer: nil)
        #expect(fresh.context.traceID != other.context.traceID)
        #expect(TraceContext(traceparent: fresh.context.traceparent) == fresh.context)
    }

    /// Spans collected from an ``OTLPTracer``.
    final class Collected: Sendable {
        let spans = Mutex([FinishedSpan]())
        var all: [FinishedSpan] { spans.withLock { $0 } }
    }

    @Test func withATracerTheJobSpanIsTheChildOfTheMessagesSpanAndTheParentOfItsStages() throws {
        let collected = Collected()
        let tracer = OTLPTracer { span in collected.spans.withLock { $0.append(span) } }
        let trace = JobTrace(
            headers: ["traceparent": .string(Self.parent), "tracestate": .string("k=v")], queue: "jobs",
            messageID: "m-1", bodySize: 42, tracer: tracer)
        #expect(trace.context.traceID.hex == "4bf92f3577b34da6a3ce929d0e0e4736")
        #expect(trace.context.spanID != 0x00f067aa0ba902b7)
        #expect(trace.context.traceState == "k=v")
        // Stages need the process-wide tracer; start one directly from the job span's context instead.
        let stage = tracer.startSpan("fetch", context: trace.span.context, ofKind: .client)
        stage.attributes["http.response.status_code"] = 200
        stage.end()
        trace.end(errorCode: "http_error")
        let spans = collected.all
        #expect(spans.map(\.name) == ["fetch", "process jobs"])
        let job = try #require(spans.last)
        #expect(job.parentSpanID == 0x00f067aa0ba902b7)
        #expect(job.trace == trace.context)
        #expect(job.kind == .consumer)
        #expect(job.status == SpanStatus(code: .error, message: "http_error"))
        #expect(job.attributes.contains { $0.0 == "messaging.destination.name" && $0.1 == .string("jobs") })
        #expect(job.attributes.contains { $0.0 == "messaging.message.id" && $0.1 == .string("m-1") })
        #expect(spans[0].parentSpanID == trace.context.spanID)
        #expect(spans[0].trace.traceID == trace.context.traceID)
        #expect(spans[0].attributes.contains { $0.0 == "http.response.status_code" && $0.1 == .int64(200) })
    }

    @Test func anUnsampledParentRecordsNothingButStillPropagates() {
        let collected = Collected()
        let tracer = OTLPTracer { span in collected.spans.withLock { $0.append(span) } }
        let trace = JobTrace(
            headers: ["traceparent": .string("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00")],
            queue: "jobs", messageID: nil, bodySize: 1, tracer: tracer)
        trace.end()
        #expect(collected.all.isEmpty)
        #expect(trace.context.traceID.hex == "4bf92f3577b34da6a3ce929d0e0e4736")
        #expect(!trace.context.isSampled)
        // A root span under always_off is not recorded either.
        let off = OTLPTracer(sampler: .alwaysOff) { span in collected.spans.withLock { $0.append(span) } }
        JobTrace(headers: [:], queue: "jobs", messageID: nil, bodySize: 1, tracer: off).end()
        #expect(collected.all.isEmpty)
    }

    @Test(arguments: [
        (
            "https://user:pw@example.com:8443/a/b.png?token=secret#frag", "https://example.com:8443/a/b.png",
            "example.com"
        ),
        ("http://example.com/x.png", "http://example.com/x.png", "example.com"),
        ("http://[::1]:8080/x?y", "http://[::1]:8080/x", "::1"),
        ("http://example.com?q=1", "http://example.com", "example.com"),
    ])
    func urlsLoseCredentialsQueryAndFragment(_ url: String, _ expected: String, _ host: String) {
        let redacted = URLPolicy.redacted(url)
        #expect(redacted.url == expected)
        #expect(redacted.host == host)
    }

    @Test func fetchSpansCarryTheHTTPAttributes() throws {
        let collected = Collected()
        let tracer = OTLPTracer { span in collected.spans.withLock { $0.append(span) } }
        let trace = JobTrace(headers: [:], queue: "jobs", messageID: nil, bodySize: 1, tracer: tracer)
        let span = tracer.startSpan("fetch", context: trace.span.context, ofKind: .client)
        JobTrace.endFetch(span, httpStatus: 503, errorCode: nil)
        let failed = tracer.startSpan("fetch", context: trace.span.context, ofKind: .client)
        JobTrace.endFetch(failed, httpStatus: nil, errorCode: "timeout")
        let spans = collected.all
        #expect(spans.count == 2)
        #expect(spans[0].attributes.contains { $0.0 == "http.response.status_code" && $0.1 == .int64(503) })
        #expect(spans[0].attributes.contains { $0.0 == "error.type" && $0.1 == .string("503") })
        #expect(spans[1].status == SpanStatus(code: .error, message: "timeout"))
    }

    @Test func encodesOTLPJSON() throws {
        let trace = try #require(TraceContext(traceparent: Self.parent, tracestate: "k=v"))
        let span = FinishedSpan(
            name: "fetch", kind: .client, trace: trace.child(spanID: 0xabc), parentSpanID: trace.spanID,
            start: 1_700_000_000_000_000_000, end: 1_700_000_000_500_000_000,
            attributes: [
                ("http.request.method", .string("GET")), ("http.response.status_code", .int64(404)),
                ("ok", .bool(false)),
            ],
            status: SpanStatus(code: .error, message: "http_error"), events: [])
        let bytes = OTLPJSON.encode([span], resource: [("service.name", "ifw")])
        let root = try #require(try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any])
        let resourceSpans = try #require((root["resourceSpans"] as? [[String: Any]])?.first)
        let resource = try #require((resourceSpans["resource"] as? [String: Any])?["attributes"] as? [[String: Any]])
        #expect(resource.first?["key"] as? String == "service.name")
        let spans = try #require(
            ((resourceSpans["scopeSpans"] as? [[String: Any]])?.first?["spans"]) as? [[String: Any]])
        let encoded = try #require(spans.first)
        #expect(encoded["traceId"] as? String == "4bf92f3577b34da6a3ce929d0e0e4736")
        #expect(encoded["spanId"] as? String == "0000000000000abc")
        #expect(encoded["parentSpanId"] as? String == "00f067aa0ba902b7")
        #expect(encoded["traceState"] as? String == "k=v")
        #expect(encoded["kind"] as? Int == 3)
        #expect(encoded["startTimeUnixNano"] as? String == "1700000000000000000")
        #expect(encoded["endTimeUnixNano"] as? String == "1700000000500000000")
        let status = try #require(encoded["status"] as? [String: Any])
        #expect(status["code"] as? Int == 2)
        let attributes = try #require(encoded["attributes"] as? [[String: Any]])
        #expect((attributes[1]["value"] as? [String: Any])?["intValue"] as? String == "404")
        #expect((attributes[2]["value"] as? [String: Any])?["boolValue"] as? Bool == false)
    }

    /// The "tracing on" line names the collector's host only: an endpoint may carry a token in its
    /// query or credentials before its host (issue 33).
    @Test func theLoggedEndpointHostCarriesNoSecret() {
        #expect(TracingSetup.host("https://collector.example.com?api_key=SECRET") == "collector.example.com")
        #expect(TracingSetup.host("https://c?token=SECRET/v1/traces") == "c")
        #expect(TracingSetup.host("https://c#SECRET") == "c")
        #expect(TracingSetup.host("http://user:SECRET@collector:4318/v1/traces") == "collector")
        #expect(!TracingSetup.host("https://user:SE/CRET@collector/v1/traces").contains("SE"))
        #expect(TracingSetup.host("http://[::1]:4318/v1/traces") == "::1")
    }

    /// Issue 33: a delay of a microsecond made the export timer spin a core; a CR LF in a header
    /// value added a header of its own to every export request; a bad name went out as it was.
    @Test(arguments: [
        ["OTEL_BSP_SCHEDULE_DELAY": "0.000001"],
        ["OTEL_BSP_SCHEDULE_DELAY": "1e-300"],
        ["OTEL_EXPORTER_OTLP_TIMEOUT": "0.5"],
        ["OTEL_EXPORTER_OTLP_HEADERS": "Authorization=Bearer%20s%0D%0AX-Injected:%20yes"],
        ["OTEL_EXPORTER_OTLP_HEADERS": "Bad Name=x"],
        ["OTEL_EXPORTER_OTLP_TRACES_HEADERS": "a=x%0Ay"],
        // Endpoints libcurl refuses on every export, and one whose password held an unencoded
        // `/` (its host, logged, was a piece of the password).
        ["OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:99999"],
        ["OTEL_EXPORTER_OTLP_ENDPOINT": "http://"],
        ["OTEL_EXPORTER_OTLP_ENDPOINT": "http://coll ector:4318"],
        ["OTEL_EXPORTER_OTLP_ENDPOINT": "http://:abc/def@collector:4318"],
        ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://tok/en@host/v1/traces"],
        // Headers that frame the request: every export would break.
        ["OTEL_EXPORTER_OTLP_HEADERS": "content-length=1"],
        ["OTEL_EXPORTER_OTLP_HEADERS": "Host=elsewhere"],
        ["OTEL_EXPORTER_OTLP_HEADERS": "Transfer-Encoding=chunked"],
        // An attribute without its value was dropped without a word.
        ["OTEL_RESOURCE_ATTRIBUTES": "deployment.environment"],
    ])
    func badTracingSettingsStopTheStart(_ settings: [String: String]) {
        var environment = ["OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"]
        environment.merge(settings) { _, new in new }
        #expect(throws: ConfigurationError.self) { try TracingSetup.configuration(environment: environment) }
    }

    @Test func tracingIsOffUnlessAnEndpointIsSet() throws {
        #expect(try TracingSetup.configuration(environment: [:]) == nil)
        #expect(try TracingSetup.configuration(environment: ["OTEL_EXPORTER_OTLP_ENDPOINT": ""]) == nil)
        #expect(
            try TracingSetup.configuration(environment: [
                "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318",
                "OTEL_SDK_DISABLED": "true",
            ]) == nil)
        #expect(
            try TracingSetup.configuration(environment: [
                "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318",
                "OTEL_TRACES_EXPORTER": "none",
            ]) == nil)
        let (exporter, sampler) = try #require(
            try TracingSetup.configuration(environment: [
                "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318/", "OTEL_SERVICE_NAME": "thumbs",
                "OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer%20abc,x-tenant=7", "OTEL_BSP_SCHEDULE_DELAY": "200",
                "OTEL_RESOURCE_ATTRIBUTES": "deployment.environment=prod,service.name=ignored",
            ]))
        #expect(exporter.endpoint == "http://collector:4318/v1/traces")
        #expect(exporter.headers == ["authorization: Bearer abc", "x-tenant: 7"])
        #expect(exporter.scheduleDelay == 0.2)
        #expect(exporter.resource.contains { $0 == ("service.name", "thumbs") })
        #expect(exporter.resource.contains { $0 == ("deployment.environment", "prod") })
        #expect(sampler == .parentBasedAlwaysOn)
        #expect(
            try TracingSetup.configuration(environment: ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/custom"])?
                .exporter.endpoint == "http://c:4318/custom")
    }

    @Test func generatedIdsAreDistinctAcrossThreadsAndSpreadOverTheBits() {
        let perThread = 20_000
        let batches = Mutex<[[UInt64]]>([])
        DispatchQueue.concurrentPerform(iterations: 4) { _ in
            let ids = (0..<perThread).map { _ in TraceIDGenerator.next() }
            batches.withLock { $0.append(ids) }
        }
        let all = batches.withLock { $0.flatMap { $0 } }
        #expect(Set(all).count == all.count)
        // Every bit is set in about half of the ids, as in random ones.
        for bit in 0..<64 {
            let share = Double(all.filter { $0 >> bit & 1 == 1 }.count) / Double(all.count)
            #expect(abs(share - 0.5) < 0.02, "bit \(bit): \(share)")
        }
    }

    @Test func theRatioSamplerKeepsItsShareOfTracesByTraceID() throws {
        // Trace ids spread over the whole range, as random ones are, but the same every run.
        let ids = (1...10_000).map { TraceContext.TraceID(high: UInt64($0), low: UInt64($0) &* 0x9E37_79B9_7F4A_7C15) }
        func share(_ sampler: OTLPTracer.Sampler) -> Double {
            Double(ids.filter { sampler.sample(parent: nil, traceID: $0) }.count) / Double(ids.count)
        }
        #expect(abs(share(.traceIDRatio(0.25)) - 0.25) < 0.02)
        #expect(share(.traceIDRatio(0)) == 0)
        #expect(share(.traceIDRatio(1)) == 1)
        // A lower ratio keeps a subset of what a higher one keeps: services with different
        // ratios still agree on the traces both keep.
        #expect(
            ids.allSatisfy {
                !OTLPTracer.Sampler.traceIDRatio(0.1).sample(parent: nil, traceID: $0)
                    || OTLPTracer.Sampler.traceIDRatio(0.5).sample(parent: nil, traceID: $0)
            })
        // Parent-based: a job's traceparent decides, whatever the ratio.
        let sampledParent = try #require(TraceContext(traceparent: Self.parent, tracestate: nil))
        var unsampledParent = sampledParent
        unsampledParent.flags = 0
        let parentBased = OTLPTracer.Sampler.parentBased(root: .traceIDRatio(0))
        #expect(parentBased.sample(parent: sampledParent, traceID: sampledParent.traceID))
        #expect(
            !OTLPTracer.Sampler.parentBased(root: .alwaysOn).sample(
                parent: unsampledParent, traceID: sampledParent.traceID))
        #expect(share(parentBased) == 0)

        let (_, sampler) = try #require(
            try TracingSetup.configuration(environment: [
                "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
                "OTEL_TRACES_SAMPLER_ARG": "0.1",
            ]))
        #expect(sampler == .parentBased(root: .traceIDRatio(0.1)))
        #expect(
            try TracingSetup.configuration(environment: [
                "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_SAMPLER": "traceidratio",
            ])?.sampler == .traceIDRatio(1))
    }

    @Test func theProtocolIsProtobufUnlessJSONIsAskedFor() throws {
        let endpoint = ["OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"]
        #expect(try TracingSetup.configuration(environment: endpoint)?.exporter.encoding == .protobuf)
        #expect(
            try TracingSetup.configuration(
                environment: endpoint.merging(["OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"]) { $1 })?
                .exporter.encoding == .json)
        // The traces variable wins over the general one.
        #expect(
            try TracingSetup.configuration(
                environment: endpoint.merging([
                    "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
                ]) { $1 })?.exporter.encoding == .protobuf)
        #expect(OTLPEncoding.protobuf.contentType == "application/x-protobuf")
    }

    @Test(arguments: [
        ["OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4318"],
        ["OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"],
        ["OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/xml"],
        ["OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_SAMPLER": "ratio"],
        [
            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_SAMPLER": "traceidratio",
            "OTEL_TRACES_SAMPLER_ARG": "1.5",
        ],
        [
            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
            "OTEL_TRACES_SAMPLER_ARG": "tenth",
        ],
        ["OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_BSP_SCHEDULE_DELAY": "soon"],
        ["OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_HEADERS": "secret-token"],
        ["OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "zipkin"],
    ])
    func invalidSettingsAreConfigurationErrors(_ environment: [String: String]) {
        #expect(throws: ConfigurationError.self) { try TracingSetup.configuration(environment: environment) }
        do {
            _ = try TracingSetup.configuration(environment: environment)
        } catch {
            #expect(!"\(error)".contains("secret-token"))
        }
    }
}
