import Foundation
import ImageFetchWorker
import Testing

/// Issue 20 end to end: `/metrics` of a worker that processed jobs (HELP, process metrics,
/// build_info, and the dashboard's and rules' metric names), and traces exported over OTLP/HTTP to a
/// receiver on loopback with the job's W3C context continued into its result.
@Suite(.enabled(if: TestBroker.isAvailable, "needs the RabbitMQ that `make test` starts"), .serialized)
struct ObservabilityTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path

    /// Runs `python3 scripts/check-metric-names.py PAGE`; its exit status and output.
    static func checkMetricNames(page: String) throws -> (Int32, String) {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent(
            "ifw-metrics-\(getpid())-\(UUID()).txt")
        try Data(page.utf8).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", root + "/scripts/check-metric-names.py", file.path]
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return (process.terminationStatus, output)
    }

    /// VmRSS of a process, in bytes.
    static func residentBytes(pid: Int32) -> Double? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
            let kib = Double(line.split(separator: " ")[1])
        else { return nil }
        return kib * 1024
    }

    @Test(.timeLimit(.minutes(3)))
    func metricsAfterARunHaveHelpProcessMetricsAndBuildInfo() async throws {
        let origin = try await TestOrigin.start()
        defer { Task { try? await origin.shutdown() } }
        let configuration = try TestBroker.configuration("observability-metrics")
        defer { TestBroker.cleanUp(configuration) }
        var bodies: [[UInt8]] = []
        for index in 0..<6 {
            bodies.append(JobPublisher.jobBody(id: "ok\(index)", url: origin.url("/ok.png?n=\(index)")))
        }
        for index in 0..<2 {
            bodies.append(JobPublisher.jobBody(id: "nf\(index)", url: origin.url("/status/404?n=\(index)")))
        }
        #expect(try TestBroker.publish(configuration, bodies: bodies) == bodies.count)
        let started = Date().timeIntervalSince1970
        let (worker, endpoint) = try OperationsTests.startWorker(configuration)
        // Every job answered, and the queue depth sampled (every second here).
        let answered = await eventuallyAsync(timeout: 60) {
            let metrics = await endpoint.metrics()
            return metrics.series("image_fetch_results_total").values.reduce(0, +) == Double(bodies.count)
                && !metrics.series("image_fetch_queue_ready_messages").isEmpty
        }
        #expect(answered, "worker log:\n\(worker.log.suffix(3000))")

        let (status, page) = await endpoint.get("/metrics")
        let rss = Self.residentBytes(pid: worker.process.processIdentifier)
        #expect(status == 200)
        var typed = Set<String>(), helped = Set<String>()
        for line in page.split(separator: "\n") where line.hasPrefix("# ") {
            let parts = line.split(separator: " ", maxSplits: 3)
            if parts.count >= 3, parts[1] == "TYPE" { typed.insert(String(parts[2])) }
            if parts.count == 4, parts[1] == "HELP" { helped.insert(String(parts[2])) }
        }
        #expect(typed.contains("image_fetch_results_total") && typed.contains("process_cpu_seconds_total"))
        #expect(typed.subtracting(helped).isEmpty, "families without # HELP: \(typed.subtracting(helped).sorted())")

        let samples = PrometheusSamples(text: page)
        let resident = try #require(samples["process_resident_memory_bytes"])
        let procRSS = try #require(rss)
        #expect(
            abs(resident - procRSS) <= 0.1 * procRSS,
            "process_resident_memory_bytes \(resident), /proc VmRSS \(procRSS)")
        #expect(try #require(samples["process_virtual_memory_bytes"]) > resident)
        #expect(try #require(samples["process_cpu_seconds_total"]) > 0)
        let open = try #require(samples["process_open_fds"])
        #expect(open >= 5 && open < (samples["process_max_fds"] ?? 0))
        let start = try #require(samples["process_start_time_seconds"])
        #expect(abs(start - started) < 30, "start time \(start), test started the worker at \(started)")
        let build = samples.series("image_fetch_build_info")
        #expect(build.count == 1 && build.values.first == 1)
        #expect(build.keys.first?.contains(#"version="\#(WorkerVersion.current)""#) == true)

        // The dashboard and the alert rules name only metrics this page has (or the listed others).
        let (checked, output) = try Self.checkMetricNames(page: page)
        #expect(checked == 0, "check-metric-names.py:\n\(output)")
        // ... and the check does fail for a page without them.
        let (failed, _) = try Self.checkMetricNames(
            page: "# TYPE image_fetch_concurrency gauge\nimage_fetch_concurrency 1\n")
        #expect(failed == 1)
        _ = await worker.stop()
    }

    /// scripts/build-info.sh writes the file that release builds compile with -DIFW_GENERATED_BUILD_INFO.
    @Test func buildInfoScriptBakesTheRevision() throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("ifw-build-info-\(getpid()).swift")
        defer { try? FileManager.default.removeItem(at: file) }
        func run(_ revision: String) throws -> Int32 {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: Self.root + "/scripts/build-info.sh")
            process.arguments = [file.path]
            process.environment = ProcessInfo.processInfo.environment.merging(["IFW_REVISION": revision]) { $1 }
            process.standardError = FileHandle.nullDevice
            try process.run()
            process.waitUntilExit()
            return process.terminationStatus
        }
        #expect(try run("1a2b3c4d5e6f") == 0)
        let text = try String(contentsOf: file, encoding: .utf8)
        #expect(text.contains("#if IFW_GENERATED_BUILD_INFO"))
        #expect(text.contains(#"static let revision = "1a2b3c4d5e6f""#))
        #expect(text.contains(#"static let swift = "6."#))
        // A revision that would need escaping in a Swift literal is refused.
        #expect(try run(#"x"; exit(1) //"#) != 0)
    }

    static let parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"

    /// Once with the default encoding (protobuf, read by opentelemetry-proto's decoder) and once
    /// with `http/json`.
    @Test(.timeLimit(.minutes(3)), arguments: [nil, "http/json"] as [String?])
    func spansReachAnOTLPReceiverAndResultsCarryTheContext(protocol: String?) async throws {
        let origin = try await TestOrigin.start()
        let receiver = try await OTLPReceiver.start()
        defer {
            Task {
                try? await origin.shutdown()
                try? await receiver.shutdown()
            }
        }
        let configuration = try TestBroker.configuration("observability-traces")
        defer { TestBroker.cleanUp(configuration) }
        let publisher = try JobPublisher(configuration: configuration, logger: .init(label: "test.publisher"))
        #expect(
            publisher.publish(
                bodies: [JobPublisher.jobBody(id: "traced", url: origin.url("/ok.png?token=secret"))],
                headers: ["traceparent": .string(Self.parent), "tracestate": .string("vendor=x1")]) == 1)
        #expect(publisher.publish(bodies: [JobPublisher.jobBody(id: "fresh", url: origin.url("/status/404"))]) == 1)
        publisher.close()
        // The publisher declared the topology, results queue included.
        let results = try QueueCollector(configuration, queue: configuration.queue.results)
        defer { results.close() }

        var settings = [
            "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint, "OTEL_BSP_SCHEDULE_DELAY": "100",
            "OTEL_SERVICE_NAME": "ifw-test", "LOG_LEVEL": "debug", "LOG_FORMAT": "json",
        ]
        if let `protocol` { settings["OTEL_EXPORTER_OTLP_PROTOCOL"] = `protocol` }
        let (worker, _) = try OperationsTests.startWorker(configuration, extra: settings)
        let delivered = await results.wait(for: 2, timeout: 60)
        #expect(delivered.count == 2, "worker log:\n\(worker.log.suffix(3000))")

        // The result of the traced job continues its trace, with the worker's job span as parent.
        let traced = try #require(
            delivered.first { String(decoding: $0.body, as: UTF8.self).contains(#""id":"traced""#) })
        let resultContext = try #require(TraceHeaders.extract(traced.properties.headers))
        #expect(resultContext.traceID.hex == "0af7651916cd43dd8448eb211c80319c")
        #expect(resultContext.spanIDHex != "b7ad6b7169203331")
        #expect(resultContext.traceState == "vendor=x1")

        // Both jobs' spans: they can come in different export batches, in either order.
        #expect(
            await eventually(timeout: 20) {
                let processes = receiver.spans.filter { $0.name.hasPrefix("process ") }
                return processes.contains { $0.traceID != resultContext.traceID.hex }
                    && processes.contains { $0.traceID == resultContext.traceID.hex }
            })
        let spans = receiver.spans
        let inTrace = spans.filter { $0.traceID == "0af7651916cd43dd8448eb211c80319c" }
        let job = try #require(inTrace.first { $0.name.hasPrefix("process ") }, "spans: \(spans.map(\.name))")
        #expect(job.parentSpanID == "b7ad6b7169203331")
        #expect(job.spanID == resultContext.spanIDHex)
        #expect(job.kind == 5)
        #expect(job.serviceName == "ifw-test")
        #expect(job.attributes["messaging.system"] == "rabbitmq")
        #expect(job.attributes["messaging.destination.name"] == configuration.queue.jobs)
        let stages = inTrace.filter { $0.parentSpanID == job.spanID }
        #expect(
            Set(stages.map(\.name)).isSuperset(of: ["fetch", "validate", "store", "publish"]),
            "stages: \(stages.map(\.name))")
        let fetch = try #require(stages.first { $0.name == "fetch" })
        #expect(fetch.kind == 3)
        #expect(fetch.attributes["http.request.method"] == "GET")
        #expect(fetch.attributes["http.response.status_code"] == "200")
        #expect(fetch.attributes["url.full"] == origin.url("/ok.png"), "query strings may hold secrets")
        #expect(!spans.contains { $0.attributes.values.contains { $0.contains("secret") } })
        #expect(receiver.rejected == 0)
        let contentType = `protocol` == "http/json" ? "application/json" : "application/x-protobuf"
        #expect(!receiver.contentTypes.isEmpty && receiver.contentTypes.allSatisfy { $0 == contentType })

        // The job without a context started a trace of its own; its result names it.
        let fresh = try #require(
            delivered.first { String(decoding: $0.body, as: UTF8.self).contains(#""id":"fresh""#) })
        let freshContext = try #require(TraceHeaders.extract(fresh.properties.headers))
        #expect(freshContext.traceID != resultContext.traceID)
        let freshJob = try #require(
            spans.first { $0.traceID == freshContext.traceID.hex && $0.name.hasPrefix("process ") })
        #expect(freshJob.parentSpanID == nil || freshJob.parentSpanID == "")
        #expect(freshJob.statusCode == 2)

        // Log lines of the job name its trace.
        #expect(worker.log.contains(#""trace_id":"0af7651916cd43dd8448eb211c80319c""#))
        _ = await worker.stop()
    }

    /// A job still waiting for a permit when a drain hands it back ends its span, failed as
    /// `aborted`, like a fetch aborted at the drain deadline. It was nacked with its span never
    /// ended, so the trace of its first delivery never reached the receiver.
    @Test(.timeLimit(.minutes(3)))
    func aJobHandedBackByADrainEndsItsSpan() async throws {
        let origin = try await TestOrigin.start()
        let receiver = try await OTLPReceiver.start()
        defer {
            Task {
                try? await origin.shutdown()
                try? await receiver.shutdown()
            }
        }
        let configuration = try TestBroker.configuration("observability-drain-traces")
        defer { TestBroker.cleanUp(configuration) }
        // Concurrency 1 and the default prefetch of 2: the first job fetches, the second waits.
        let traces = ["1111111111111111aaaaaaaaaaaaaaaa", "2222222222222222bbbbbbbbbbbbbbbb"]
        let publisher = try JobPublisher(configuration: configuration, logger: .init(label: "test.publisher"))
        for (index, trace) in traces.enumerated() {
            #expect(
                publisher.publish(
                    bodies: [JobPublisher.jobBody(id: "drain-\(index)", url: origin.url("/slow?ms=2000&n=\(index)"))],
                    headers: ["traceparent": .string("00-\(trace)-b7ad6b7169203331-01")]) == 1)
        }
        publisher.close()

        let (worker, endpoint) = try OperationsTests.startWorker(
            configuration,
            extra: [
                "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint, "OTEL_BSP_SCHEDULE_DELAY": "100",
                "WORKER_CONCURRENCY": "1",
            ])
        #expect(await eventually(timeout: 30) { origin.stats.inFlight == 1 }, "worker log:\n\(worker.log.suffix(3000))")
        #expect(
            await eventuallyAsync(timeout: 10) { await endpoint.metrics()["image_fetch_jobs_waiting_admission"] == 1 })
        #expect(await worker.stop() == 0)

        #expect(
            await eventually(timeout: 20) {
                receiver.spans.contains { $0.traceID == traces[1] && $0.name.hasPrefix("process ") }
            },
            "spans: \(receiver.spans.map { "\($0.traceID) \($0.name)" })")
        let handedBack = try #require(receiver.spans.first { $0.traceID == traces[1] && $0.name.hasPrefix("process ") })
        #expect(handedBack.statusCode == 2)
        #expect(handedBack.attributes["error.type"] == "aborted")
        #expect(!receiver.spans.contains { $0.traceID == traces[1] && $0.name == "fetch" })
        #expect(
            await eventually(timeout: 5) {
                receiver.spans.contains { $0.traceID == traces[0] && $0.name.hasPrefix("process ") }
            })
        let finished = try #require(receiver.spans.first { $0.traceID == traces[0] && $0.name.hasPrefix("process ") })
        #expect(finished.statusCode != 2)
        #expect(try TestBroker.ready(configuration, queue: configuration.queue.jobs) == 1)
    }
}
