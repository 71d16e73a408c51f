import Foundation
import Logging
import Synchronization
import Tracing

/// Turns tracing on from the standard OpenTelemetry environment variables, or leaves it off.
///
/// Off unless `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or `OTEL_EXPORTER_OTLP_ENDPOINT` is set and not
/// empty, or when `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none`: then no tracer exists and
/// jobs create no spans. Jobs still carry a W3C context into their results either way.
package enum TracingSetup {
    /// What the environment asks for: nil when tracing stays off.
    package static func configuration(
        environment: [String: String]
    ) throws(ConfigurationError)
        -> (exporter: OTLPExporter.Configuration, sampler: OTLPTracer.Sampler)?
    {
        func value(_ name: String) -> String? {
            guard let value = environment[name].map(ConfigText.trimmed), !value.isEmpty else { return nil }
            return value
        }
        func invalid(_ name: String, _ problem: String) -> ConfigurationError {
            ConfigurationError(key: name, problem: problem, source: "environment variable \(name)")
        }
        if value("OTEL_SDK_DISABLED")?.lowercased() == "true" { return nil }
        if let exporter = value("OTEL_TRACES_EXPORTER") {
            if exporter == "none" { return nil }
            guard exporter == "otlp" else {
                throw invalid("OTEL_TRACES_EXPORTER", "must be otlp or none, got \"\(exporter)\"")
            }
        }
        let endpoint: String
        if let traces = value("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") {
            endpoint = traces
        } else if let base = value("OTEL_EXPORTER_OTLP_ENDPOINT") {
            endpoint = (base.hasSuffix("/") ? String(base.dropLast()) : base) + "/v1/traces"
        } else {
            return nil
        }
        // Checked as given: `http://` plus `/v1/traces` would read as host `v1`.
        let endpointName =
            value("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != nil
            ? "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT" : "OTEL_EXPORTER_OTLP_ENDPOINT"
        if let problem = endpointProblem(value(endpointName) ?? endpoint) {
            throw invalid(endpointName, problem)
        }
        var exporter = OTLPExporter.Configuration(endpoint: endpoint)
        // The traces variable wins over the general one, as for the endpoint.
        for name in ["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"] {
            guard let proto = value(name) else { continue }
            guard let encoding = OTLPEncoding(rawValue: proto) else {
                throw invalid(name, "must be http/protobuf or http/json (grpc is not supported), got \"\(proto)\"")
            }
            exporter.encoding = encoding
            break
        }
        let headersName =
            value("OTEL_EXPORTER_OTLP_TRACES_HEADERS") != nil
            ? "OTEL_EXPORTER_OTLP_TRACES_HEADERS" : "OTEL_EXPORTER_OTLP_HEADERS"
        if let headers = value(headersName) {
            for pair in headers.split(separator: ",") {
                let parts = pair.split(separator: "=", maxSplits: 1)
                // The value may be a credential: never echoed.
                let name = parts.count == 2 ? ConfigText.trimmed(parts[0]) : ""
                guard RequestHeaders.isValidName(name) else {
                    throw invalid(headersName, "must be a list of name=value pairs with HTTP header names")
                }
                // Framing and the body's type are the exporter's: a `content-length=1` broke
                // every export.
                let lower = name.lowercased()
                guard !RequestHeaders.reservedNames.contains(lower), lower != "content-type" else {
                    throw invalid(headersName, "names \(name), a header the exporter sets itself")
                }
                let headerValue = ConfigText.trimmed(ConfigText.percentDecoded(String(parts[1])) ?? String(parts[1]))
                // Decoded, a value could end the header and start another.
                if let problem = RequestHeaders.valueProblem(headerValue) {
                    throw invalid(headersName, "the value of \(name) \(problem)")
                }
                exporter.headers.append("\(name): \(headerValue)")
            }
        }
        var resource: [(String, String)] = [
            ("service.name", value("OTEL_SERVICE_NAME") ?? "image-fetch-worker"),
            ("service.version", WorkerVersion.current),
        ]
        for pair in (value("OTEL_RESOURCE_ATTRIBUTES") ?? "").split(separator: ",") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                .map(ConfigText.trimmed)
            if parts.count == 1, parts[0].isEmpty { continue }  // `a=1, ,b=2`
            guard parts.count == 2, !parts[0].isEmpty else {
                throw invalid("OTEL_RESOURCE_ATTRIBUTES", "must be a list of key=value pairs")
            }
            if parts[0] == "service.name", value("OTEL_SERVICE_NAME") != nil { continue }
            resource.removeAll { $0.0 == parts[0] }
            resource.append((parts[0], ConfigText.percentDecoded(parts[1]) ?? parts[1]))
        }
        exporter.resource = resource
        func milliseconds(
            _ name: String, into keyPath: WritableKeyPath<OTLPExporter.Configuration, Double>
        ) throws(ConfigurationError) {
            guard let text = value(name) else { return }
            // Whole milliseconds, as the specification has them: a fraction of one made the export
            // timer spin.
            guard let number = Int(text), (1...600_000).contains(number) else {
                throw invalid(name, "must be a whole number of milliseconds between 1 and 600000, got \"\(text)\"")
            }
            exporter[keyPath: keyPath] = Double(number) / 1000
        }
        try milliseconds("OTEL_BSP_SCHEDULE_DELAY", into: \.scheduleDelay)
        try milliseconds("OTEL_EXPORTER_OTLP_TIMEOUT", into: \.timeout)
        try milliseconds("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", into: \.timeout)
        for (name, keyPath) in [
            ("OTEL_BSP_MAX_QUEUE_SIZE", \OTLPExporter.Configuration.maxQueueSize),
            ("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", \OTLPExporter.Configuration.maxBatchSize),
        ] {
            guard let text = value(name) else { continue }
            guard let number = Int(text), number >= 1, number <= 1_000_000 else {
                throw invalid(name, "must be an integer between 1 and 1000000, got \"\(text)\"")
            }
            exporter[keyPath: keyPath] = number
        }
        exporter.maxBatchSize = min(exporter.maxBatchSize, exporter.maxQueueSize)
        var sampler = OTLPTracer.Sampler.parentBasedAlwaysOn
        if let name = value("OTEL_TRACES_SAMPLER") {
            var ratio = 1.0
            if let text = value("OTEL_TRACES_SAMPLER_ARG"), name.hasSuffix("traceidratio") {
                guard let number = Double(text), number >= 0, number <= 1 else {
                    throw invalid("OTEL_TRACES_SAMPLER_ARG", "must be a number between 0 and 1, got \"\(text)\"")
                }
                ratio = number
            }
            guard let chosen = OTLPTracer.Sampler(name: name, ratio: ratio) else {
                throw invalid(
                    "OTEL_TRACES_SAMPLER",
                    "must be always_on, always_off, traceidratio, parentbased_always_on, "
                        + "parentbased_always_off or parentbased_traceidratio, got \"\(name)\"")
            }
            sampler = chosen
        }
        return (exporter, sampler)
    }

    /// The running exporter, for ``flush(timeout:)``.
    private static let exporter = Mutex<OTLPExporter?>(nil)

    /// Reads the environment and, when it asks for tracing, starts the exporter and installs the
    /// tracer (for ``JobTrace`` and swift-distributed-tracing's `InstrumentationSystem`). Call once,
    /// before the worker starts. Throws a ``ConfigurationError`` for invalid `OTEL_*` values.
    package static func bootstrap(environment: [String: String], logger: Logger) throws {
        guard let (configuration, sampler) = try configuration(environment: environment) else { return }
        let exporter = try OTLPExporter(configuration: configuration, logger: logger)
        let tracer = OTLPTracer(sampler: sampler) { exporter.enqueue($0) }
        Self.exporter.withLock { $0 = exporter }
        TracerHolder.shared.withLock { $0 = tracer }
        InstrumentationSystem.bootstrap(tracer)
        logger.info(
            "tracing on",
            metadata: [
                "endpoint_host": "\(Self.host(configuration.endpoint))",
                "sampler": "\(sampler)",
            ])
    }

    /// Exports the spans still queued, waiting up to `timeout` seconds; a no-op when tracing is off.
    package static func flush(timeout: Double = 2) {
        exporter.withLock { $0 }?.flush(timeout: timeout)
    }

    /// Why libcurl could not send to `endpoint`, or why its host would not be its own; nil when
    /// it is fine. The endpoint may hold a credential, so the problem never quotes it.
    static func endpointProblem(_ endpoint: String) -> String? {
        guard let components = URLComponents(string: endpoint),
            let scheme = components.scheme?.lowercased(), scheme == "http" || scheme == "https",
            let host = components.host, !host.isEmpty
        else {
            return "must be an http:// or https:// URL with a host"
        }
        if let port = components.port, !(1...65535).contains(port) {
            return "has a port outside 1-65535"
        }
        // The "tracing on" line logs the host.
        return URLPolicy.atAfterHostProblem(components)
    }

    /// The host of a URL, for logs: the URL itself may carry credentials, and a token in its query
    /// or fragment.
    static func host(_ url: String) -> String {
        URLPolicy.redacted(url).host ?? ""
    }
}
