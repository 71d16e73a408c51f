import Crypto
import Foundation
import ImageFetchWorker
import Testing

/// docs/schemas/ against real messages: the worker's results of every status and code, and the
/// jobs producers send; and examples/python/ run end to end against the worker. The Python
/// (jsonschema, pika) comes from scripts/python-clients.sh: if it cannot be installed, these fail.
@Suite(.enabled(if: TestBroker.isAvailable, "needs the RabbitMQ that `make test` starts"), .serialized)
struct MessageSchemaTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path

    /// The Python of scripts/python-clients.sh, installed on first use.
    static func python() throws -> String {
        let path = try TestBroker.output(root + "/scripts/python-clients.sh", []).trimmingCharacters(
            in: .whitespacesAndNewlines)
        guard FileManager.default.isExecutableFile(atPath: path) else {
            throw TestFailure("scripts/python-clients.sh could not provide Python with jsonschema and pika")
        }
        return path
    }

    struct TestFailure: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }

    /// Validates JSON lines against a schema; returns the validator's exit status and output.
    static func validate(_ schema: String, _ documents: [[UInt8]]) throws -> (status: Int32, output: String) {
        let file = TestScratch.path("documents-\(UUID().uuidString).jsonl")
        var text = Data()
        for document in documents {
            text.append(contentsOf: document)
            text.append(UInt8(ascii: "\n"))
        }
        try text.write(to: URL(fileURLWithPath: file))
        let log = TestScratch.path("validate-\(UUID().uuidString).log")
        let status = try TestBroker.run(
            try python(), [root + "/scripts/validate-json.py", root + "/docs/schemas/" + schema, file], log: log)
        return (status, (try? String(contentsOfFile: log, encoding: .utf8)) ?? "")
    }

    @Test(.timeLimit(.minutes(3)))
    func resultsOfEveryStatusAndCodeMatchTheSchema() async throws {
        let origin = try await TestOrigin.start(threads: 2)
        let configuration = try TestBroker.configuration("schema")
        defer { TestBroker.cleanUp(configuration) }
        let closedPort = try TestBroker.freePort()
        var jobs = HostileOriginTests.cases.map { JobPublisher.jobBody(id: $0.id, url: origin.url($0.path)) }
        jobs += [
            JobPublisher.jobBody(id: "ok", url: origin.url("/ok.png")),
            JobPublisher.jobBody(id: "ok-redirected", url: origin.url("/redirect/2")),
            JobPublisher.jobBody(id: "blocker", url: origin.url("/ok.png?n=1"), key: "blocker"),
            JobPublisher.jobBody(id: "dns", url: "http://no-such-host.invalid/a.png"),
            JobPublisher.jobBody(id: "refused", url: "http://127.0.0.1:\(closedPort)/a.png"),
            JobPublisher.jobBody(id: "tls", url: "https://127.0.0.1:\(origin.port)/ok.png"),
            // A refetch of the same bytes: not_modified.
            Array(#"{"id":"unchanged","url":""#.utf8) + Array(origin.url("/ok.png?n=3").utf8)
                + Array(#"","sha256":""#.utf8)
                + Array(SHA256.hash(data: TestOrigin.okBody).map { String(format: "%02x", $0) }.joined().utf8)
                + Array(#""}"#.utf8),
        ]
        #expect(try TestBroker.publish(configuration, bodies: jobs) == jobs.count)
        let results = try QueueCollector(configuration, queue: configuration.queue.results)
        defer { results.close() }
        let worker = try WorkerProcess(
            environment: HostileOriginTests.environment(
                configuration,
                [
                    "FETCH_ALLOWED_NETWORKS": "127.0.0.1/32", "FETCH_MAX_BYTES": "1048576",
                    "FETCH_LOW_SPEED_LIMIT": "100",
                    "FETCH_LOW_SPEED_TIME": "2", "FETCH_CONNECT_TIMEOUT": "3",
                ]))
        await results.wait(for: jobs.count, timeout: 90)
        // storage_failed: the key names a folder below the file "blocker", stored above.
        #expect(
            try TestBroker.publish(
                configuration,
                bodies: [
                    JobPublisher.jobBody(id: "unstorable", url: origin.url("/ok.png?n=2"), key: "blocker/a.png")
                ]) == 1)
        let all = await results.wait(for: jobs.count + 1, timeout: 60)
        #expect(all.count == jobs.count + 1, "worker log:\n\(worker.log.suffix(3000))")
        #expect(await worker.stop() == 0)

        let objects = results.objects
        let statuses = Set(objects.compactMap { $0["status"] as? String })
        let codes = Set(objects.compactMap { ($0["error"] as? [String: Any])?["code"] as? String })
        #expect(statuses == ["ok", "not_modified", "failed"])
        #expect(
            codes == [
                "invalid_url", "unsupported_scheme", "forbidden_address", "dns_failure", "connect_failed", "timeout",
                "tls_failure", "too_many_redirects", "http_error", "too_large", "truncated", "not_an_image",
                "too_many_pixels", "storage_failed",
            ], "\(objects.map { ($0["id"] ?? "", ($0["error"] as? [String: Any])?["code"] ?? "ok") })")

        let valid = try Self.validate("result.schema.json", all.map(\.body))
        #expect(valid.status == 0, "\(valid.output)")
        // The schema can say no: a status it does not know, and an ok without its image.
        var wrong = try #require(objects.first { $0["status"] as? String == "ok" })
        wrong["status"] = "done"
        var bare = try #require(objects.first { $0["status"] as? String == "ok" })
        bare["format"] = nil
        // And a not_modified that claims a stored image.
        var stored = try #require(objects.first { $0["status"] as? String == "not_modified" })
        stored["location"] = "file:///data/x.png"
        let invalid = try Self.validate(
            "result.schema.json",
            try [wrong, bare, stored].map {
                Array(try JSONSerialization.data(withJSONObject: $0))
            })
        #expect(invalid.status == 1)
        #expect(invalid.output.split(separator: "\n").count >= 3, "\(invalid.output)")
    }

    @Test func jobsMatchTheSchema() throws {
        let good = [
            JobPublisher.jobBody(id: "a", url: "https://example.com/a.png"),
            JobPublisher.jobBody(id: "b", url: "http://example.com/b.png?x=1", key: "cats/b.png"),
            Array(#"{"id": 7, "url": "https://example.com/c.png", "extra": true}"#.utf8),
            Array(#"{"url": "https://example.com/d.png"}"#.utf8),
            Array(#"{"url": "https://example.com/t.png", "tenant": "acme.eu-1:shop_2"}"#.utf8),
            Array(
                (#"{"url": "https://example.com/e.png", "etag": "W/\"v1\"", "#
                    + #""last_modified": "Sun, 06 Nov 1994 08:49:37 GMT", "#
                    + #""sha256": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"}"#).utf8),
        ]
        let valid = try Self.validate("job.schema.json", good)
        #expect(valid.status == 0, "\(valid.output)")
        let bad = [
            #"{"id": "a"}"#, #"{"id": "a", "url": "ftp://example.com/a.png"}"#,
            #"{"id": "a", "url": "https://example.com/a.png", "key": "../etc/passwd"}"#,
            #"{"id": "a", "url": "https://example.com/a.png", "key": "/abs"}"#, #"["https://example.com/a.png"]"#,
            #"{"id": "a", "url": "https://example.com/a.png", "sha256": "abc"}"#,
            #"{"id": "a", "url": "https://example.com/a.png", "etag": "two words"}"#,
            #"{"id": "a", "url": "https://example.com/a.png", "tenant": "a/b"}"#,
        ]
        let invalid = try Self.validate("job.schema.json", bad.map { Array($0.utf8) })
        #expect(invalid.status == 1)
        #expect(invalid.output.split(separator: "\n").count >= bad.count, "\(invalid.output)")
    }

    /// examples/python/producer.py publishes, the worker fetches, examples/python/consumer.py prints.
    @Test(.timeLimit(.minutes(3)))
    func pythonExamplesEndToEnd() async throws {
        let python = try Self.python()
        let origin = try await TestOrigin.start()
        let configuration = try TestBroker.configuration("examples")
        defer { TestBroker.cleanUp(configuration) }
        let worker = try WorkerProcess(
            environment: TestBroker.environment(configuration, storage: WorkerEndToEndTests.storageFolder()))
        #expect(
            await eventually(timeout: 30) {
                (try? TestBroker.ready(configuration, queue: configuration.queue.jobs)) != nil
            })
        let url = try #require(TestBroker.url)
        let examples = Self.root + "/examples/python/"

        let produced = TestScratch.path("producer-\(UUID().uuidString).log")
        let urls = [origin.url("/ok.png?n=1"), origin.url("/ok.png?n=2"), origin.url("/html")]
        #expect(
            try TestBroker.run(
                python, [examples + "producer.py", "--amqp-url", url, "--queue", configuration.queue.jobs] + urls,
                log: produced) == 0, "\((try? String(contentsOfFile: produced, encoding: .utf8)) ?? "")")
        let ids = ((try? String(contentsOfFile: produced, encoding: .utf8)) ?? "").split(separator: "\n").map {
            String($0.split(separator: " ")[0])
        }
        #expect(ids.count == 3)

        let consumed = TestScratch.path("consumer-\(UUID().uuidString).log")
        #expect(
            try TestBroker.run(
                python,
                [
                    examples + "consumer.py", "--amqp-url", url, "--queue", configuration.queue.results,
                    "--count", "3", "--timeout", "60",
                ], log: consumed) == 0)
        let lines = ((try? String(contentsOfFile: consumed, encoding: .utf8)) ?? "").split(separator: "\n").map {
            $0.split(separator: " ")
        }
        #expect(lines.count == 3, "\(lines)")
        #expect(Set(lines.compactMap { $0.count > 1 ? String($0[1]) : nil }) == Set(ids))
        #expect(
            lines.filter {
                $0.first == "ok" && $0.count == 5 && $0[2] == "png" && $0[3].contains("x")
                    && $0[4].hasPrefix("file:///")
            }.count == 2, "\(lines)")
        #expect(
            lines.filter { $0.first == "failed" && $0.count == 4 && $0[2] == "not_an_image" }.count == 1, "\(lines)")
        #expect(await worker.stop() == 0)
    }
}
