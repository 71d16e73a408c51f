import Foundation
import ImageFetchWorker
import Testing

/// `publish --jsonl` as a user runs it, against the test broker: bad lines are reported with their
/// numbers and not sent, and `--resume` sends each line once across interrupted runs.
@Suite(.enabled(if: TestBroker.isAvailable, "needs the RabbitMQ that `make test` starts"))
struct PublishJSONLTests {
    private func run(_ arguments: [String]) async throws -> (status: Int32?, output: String) {
        let process = try WorkerProcess(arguments: arguments, environment: [:])
        let status = await process.waitForExit(timeout: 60)
        return (status, process.log)
    }

    private func arguments(_ configuration: WorkerConfiguration) throws -> [String] {
        [
            "--amqp-url", try #require(TestBroker.url), "--queue-jobs", configuration.queue.jobs,
            "--queue-results", configuration.queue.results, "--queue-dead", configuration.queue.dead,
        ]
    }

    private func write(_ lines: [String]) throws -> String {
        let path = TestScratch.path("jobs-\(UUID().uuidString).jsonl")
        try Data(lines.joined(separator: "\n").utf8).write(to: URL(fileURLWithPath: path))
        return path
    }

    /// The jobs queue's messages, by id (the body's, else `message_id`).
    private func jobIDs(_ configuration: WorkerConfiguration, count: Int) async throws -> [String] {
        let jobs = try QueueCollector(configuration, queue: configuration.queue.jobs)
        defer { jobs.close() }
        return await jobs.wait(for: count, timeout: 30).map { delivery in
            let object = (try? JSONSerialization.jsonObject(with: Data(delivery.body))) as? [String: Any]
            return object?["id"] as? String ?? delivery.properties.messageID ?? "?"
        }
    }

    @Test(.timeLimit(.minutes(2)))
    func badLinesAreReportedByNumberAndOnlyTheGoodOnesArrive() async throws {
        let configuration = try TestBroker.configuration("jsonl-bad")
        defer { TestBroker.cleanUp(configuration) }
        let path = try write([
            #"{"id":"g1","url":"http://origin.test/1.png"}"#,
            #"{not json"#,
            #"{"id":"no-url"}"#,
            #"{"id":"bad-url","url":"ftp://origin.test/1.png"}"#,
            "",
            #"{"url":"http://origin.test/2.png","key":"k/2.png","etag":"\"v1\""}"#,
            #"{"id":"big","url":"http://origin.test/3.png","pad":""# + String(repeating: "x", count: 2000) + #""}"#,
            #"{"id":"g4","url":"http://origin.test/4.png"}"#,
        ])
        let result = try await run(
            ["publish", "--jsonl", path, "--queue-max-job-bytes", "1024"]
                + arguments(configuration))
        #expect(result.status == 65, "\(result.output)")
        let reported = result.output.split(separator: "\n").filter { $0.hasPrefix("line ") }.map(String.init)
        #expect(reported.count == 4, "\(result.output)")
        #expect(reported.contains { $0.hasPrefix("line 2: invalid_job: the body is not a JSON object") })
        #expect(reported.contains { $0.hasPrefix("line 3: invalid_job: the job has no url") })
        #expect(reported.contains { $0.hasPrefix("line 4: unsupported_scheme:") })
        #expect(reported.contains { $0.hasPrefix("line 7: job_too_large:") })
        #expect(result.output.contains("3 sent, 3 confirmed, 4 invalid, 1 skipped"), "\(result.output)")
        #expect(try TestBroker.ready(configuration, queue: configuration.queue.jobs) == 3)
        let ids = try await jobIDs(configuration, count: 3)
        #expect(ids.count == 3)
        #expect(ids.first == "g1")
        #expect(ids.last == "g4")
        // The line without an id went out with a fresh message_id, as the worker reads it.
        #expect(ids.dropFirst().first.map { $0.count == 36 } == true, "\(ids)")
    }

    /// Failed before the fix: a file that cannot be read (here a directory: `open` succeeds, `read`
    /// fails) ended the run as if it were empty, "0 sent" and exit 0.
    @Test(.timeLimit(.minutes(2)))
    func aFileThatCannotBeReadExits74() async throws {
        let configuration = try TestBroker.configuration("jsonl-unreadable")
        defer { TestBroker.cleanUp(configuration) }
        let directory = TestScratch.path("jobs-dir-\(UUID().uuidString)")
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let result = try await run(["publish", "--jsonl", directory] + arguments(configuration))
        #expect(result.status == 74, "\(result.output)")
        #expect(result.output.contains("reading stopped at line 0"), "\(result.output)")
        #expect(try TestBroker.ready(configuration, queue: configuration.queue.jobs) == 0)
    }

    @Test(.timeLimit(.minutes(3)))
    func resumeSendsEachLineOnceAcrossInterruptedRuns() async throws {
        let configuration = try TestBroker.configuration("jsonl-resume")
        defer { TestBroker.cleanUp(configuration) }
        var lines = (1...10).map { #"{"id":"r\#($0)","url":"http://origin.test/\#($0).png"}"# }
        lines.insert(#"{"id":"broken""#, at: 6)  // line 7
        let path = try write(lines)
        let broker = try arguments(configuration)

        // Not routable (no such queue, not declared): the broker returns line 1, and the run stops
        // there without recording it.
        var missing = configuration
        missing.queue.jobs += ".missing"
        let unroutable = try await run(["publish", "--jsonl", path, "--queue-declare", "false"] + arguments(missing))
        #expect(unroutable.status == 1, "\(unroutable.output)")
        #expect(unroutable.output.contains("line 1 was not confirmed"), "\(unroutable.output)")
        #expect(try PublishProgress.read(PublishProgress.defaultPath(for: path)) == 0)

        // A line budget stops the next run after line 4, as an interruption would.
        let first = try await run(["publish", "--jsonl", path, "--max-lines", "4"] + broker)
        #expect(first.status == 0, "\(first.output)")
        #expect(first.output.contains("4 sent, 4 confirmed, 0 invalid, 0 skipped"), "\(first.output)")
        #expect(try PublishProgress.read(PublishProgress.defaultPath(for: path)) == 4)
        #expect(try TestBroker.ready(configuration, queue: configuration.queue.jobs) == 4)

        let second = try await run(["publish", "--jsonl", path, "--resume"] + broker)
        #expect(second.status == 65, "\(second.output)")
        #expect(second.output.contains("line 7: invalid_job"), "\(second.output)")
        #expect(second.output.contains("6 sent, 6 confirmed, 1 invalid, 4 skipped"), "\(second.output)")
        #expect(try PublishProgress.read(PublishProgress.defaultPath(for: path)) == 11)

        // Everything is done: a third run sends nothing.
        let third = try await run(["publish", "--jsonl", path, "--resume"] + broker)
        #expect(third.status == 0, "\(third.output)")
        #expect(third.output.contains("0 sent, 0 confirmed, 0 invalid, 11 skipped"), "\(third.output)")

        #expect(try TestBroker.ready(configuration, queue: configuration.queue.jobs) == 10)
        let ids = try await jobIDs(configuration, count: 10)
        #expect(ids == (1...10).map { "r\($0)" })

        // What cannot be resumed says so.
        let stdin = try await run(["publish", "--jsonl", "-", "--resume"] + broker)
        #expect(stdin.status == 64)
        #expect(stdin.output.contains("standard input cannot be read again"), "\(stdin.output)")
        let none = try await run(["publish", "--jsonl", path, "--resume", "--resume-file", path + ".none"] + broker)
        #expect(none.status == 66)
        #expect(none.output.contains("nothing to resume"), "\(none.output)")
    }
}
