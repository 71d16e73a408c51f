import Foundation
import Testing

@testable import ImageFetchWorker

/// The `--config` file itself (issue 33): a key given twice, and a file that is not a small
/// regular file, stop the start with an error about `config` instead of taking one value
/// silently or reading without end.
@Suite("The config file")
struct ConfigFileTests {
    private func problem(_ contents: String) throws -> String {
        let file = try TempConfigFile(contents: contents)
        return ConfigurationLoader.problem(["--config", file.path])
    }

    @Test(arguments: [
        (#"{"worker": {"concurrency": 8}, "worker": {"concurrency": 9}}"#, "worker"),
        (#"{"worker": {"concurrency": 8, "concurrency": 9}}"#, "worker.concurrency"),
        (#"{"worker.concurrency": 8, "worker": {"concurrency": 9}}"#, "worker.concurrency"),
        (#"{"worker": {"concurrency": 9}, "worker.concurrency": 8}"#, "worker.concurrency"),
        (#"{"fetch": {"tls": {"ca_file": "/a"}}, "fetch.tls": {"ca_file": "/b"}}"#, "fetch.tls.ca_file"),
        (#"{"a\u002eb": 1, "a": {"b": 2}}"#, "a.b"),
        (#"{"retry": {"delays": ["1s"]}, "retry.delays": "2s"}"#, "retry.delays"),
    ])
    func aKeyGivenTwiceIsRefused(json: String, key: String) throws {
        let line = try problem(json)
        #expect(line.hasPrefix("configuration error: config: "), "\(line)")
        #expect(line.contains("gives \(key) twice"), "\(line)")
    }

    @Test(arguments: [
        ("worker:\n  concurrency: 8\nworker.concurrency: 9\n", "worker.concurrency"),
        ("worker.concurrency: 9\nworker:\n  concurrency: 8\n", "worker.concurrency"),
        ("fetch:\n  tls:\n    ca_file: /a\nfetch.tls:\n  ca_file: /b\n", "fetch.tls.ca_file"),
        ("retry:\n  delays: [1s]\nretry.delays: 2s\n", "retry.delays"),
    ])
    func aYAMLKeyGivenNestedAndDottedIsRefused(yaml: String, key: String) throws {
        let file = try ConfigurationLoaderTests.TempFile(extension: "yaml", contents: yaml)
        let line = ConfigurationLoader.problem(["--config", file.path])
        #expect(line.hasPrefix("configuration error: config: "), "\(line)")
        #expect(line.contains("gives \(key) twice"), "\(line)")
    }

    /// The configuration reader expands every alias: ten anchors of ten aliases each were 10^10
    /// values, and the start ran without end. Nesting the YAML reader stops at 1,000 levels
    /// (a guard: it passed before). Each is one configuration line.
    @Test(arguments: [
        ("a: " + String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000), "is not valid YAML"),
        ("a:\n" + String(repeating: "- ", count: 100_000) + "x\n", "is not valid YAML"),
        (
            (0..<10).map { level in
                let inner = level == 0 ? "x" : "*a\(level - 1)"
                return "a\(level): &a\(level) {" + (0..<10).map { "k\($0): \(inner)" }.joined(separator: ", ") + "}"
            }.joined(separator: "\n") + "\n",
            "holds more than"
        ),
    ])
    func aYAMLFileTooDeepOrTooLargeOnceExpandedIsRefused(yaml: String, problem: String) throws {
        let file = try ConfigurationLoaderTests.TempFile(extension: "yaml", contents: yaml)
        let line = ConfigurationLoader.problem(["--config", file.path])
        #expect(line.hasPrefix("configuration error: config: "), "\(line.prefix(300))")
        #expect(line.contains(problem), "\(line.prefix(300))")
    }

    /// What real files hold still loads: anchors and aliases, flow lists, nesting, brackets and
    /// hashes in quoted values and comments.
    @Test func aYAMLFileWithAliasesAndFlowListsLoads() throws {
        let yaml = """
            defaults: &timeouts {timeout: 30s}
            notes:
              list: ["a [1", 'b {2']  # [not {closed
              hosts: [a.example, b.example]
            x: *timeouts
            y: {z: [1, 2], w: {v: {u: 4}}}

            """
        let file = try ConfigurationLoaderTests.TempFile(extension: "yaml", contents: yaml)
        #expect(ConfigurationLoader.problem(["--config", file.path]) == "loaded")
    }

    /// A long list without aliases is no bomb, however many values it holds.
    @Test func aYAMLFileWithALongListLoads() throws {
        let yaml = "fetch:\n  denied_hosts:\n" + (0..<20_000).map { "    - h\($0).example\n" }.joined()
        let file = try ConfigurationLoaderTests.TempFile(extension: "yaml", contents: yaml)
        #expect(ConfigurationLoader.problem(["--config", file.path]) == "loaded")
    }

    @Test func yamlKeysThatOnlyLookAlikeAreFine() throws {
        let yaml = "worker:\n  concurrency: 8\nx:\n  a:\n    b: 1\n  c:\n    b: 2\nlog.format: json\n"
        let file = try ConfigurationLoaderTests.TempFile(extension: "yaml", contents: yaml)
        #expect(ConfigurationLoader.problem(["--config", file.path]) == "loaded")
    }

    @Test func keysThatOnlyLookAlikeAreFine() throws {
        // The same name in two different objects, and names inside strings.
        let json = #"""
            {"worker": {"concurrency": 8}, "x": {"a": {"b": 1}, "c": {"b": 2}},
             "fetch": {"headers": ["X-A: }", "X-B: {\"concurrency\": 1, \"worker\": {"]},
             "note": "\"worker\": {\"concurrency\": 9} ] \\", "log": {"format": "json"}}
            """#
        #expect(try problem(json) == "loaded")
    }

    /// JSON's `true` is no number and `1.5` no boolean. `JSONSerialization` hands both out as
    /// numbers, so `{"amqp": {"prefetch": true}}` ran with a prefetch of 1 and `"declare": 2` read
    /// as true. A boolean is now refused for any key but a boolean one (text keys took "true"),
    /// and a number is read by a boolean key as its text. A value of no type the key reads is an
    /// error too, not the default.
    @Test(arguments: [
        (#"{"amqp": {"prefetch": true}}"#, #"amqp.prefetch: takes no true or false"#),
        (#"{"fetch": {"max_redirects": false}}"#, #"fetch.max_redirects: takes no true or false"#),
        (#"{"fetch.timeout": true}"#, #"fetch.timeout: takes no true or false"#),
        (#"{"queue": {"jobs": true}}"#, #"queue.jobs: takes no true or false"#),
        (#"{"s3": {"bucket": false}}"#, #"s3.bucket: takes no true or false"#),
        (#"{"amqp": {"prefetch": [true]}}"#, #"amqp.prefetch: takes no true or false"#),
        (#"{"retry": {"delays": [1, true]}}"#, #"retry.delays: takes no true or false"#),
        (#"{"queue": {"declare": 2}}"#, #"queue.declare: must be true or false (or 1/0, yes/no), got "2""#),
        (#"{"queue": {"declare": 1.5}}"#, #"queue.declare: must be true or false (or 1/0, yes/no), got "1.5""#),
        (#"{"queue": {"declare": 1.0}}"#, #"queue.declare: must be true or false (or 1/0, yes/no), got "1.0""#),
        (#"{"queue": {"declare": 0.9999999999999999}}"#, #"queue.declare: must be true or false"#),
        (#"{"fetch": {"headers": 5}}"#, #"fetch.headers: has a value of a type this key does not take"#),
    ])
    func aBooleanIsNoNumberAndANumberNoBoolean(json: String, expected: String) throws {
        let line = try problem(json)
        #expect(line.hasPrefix("configuration error: " + expected), "\(line)")
    }

    @Test func nativeValuesOfTheKeysOwnTypeStillLoad() throws {
        let json =
            #"{"amqp": {"prefetch": 64}, "queue": {"declare": false}, "storage": {"fsync": 1},"#
            + #" "fetch": {"timeout": 2.5, "max_redirects": 2.0}, "retry": {"delays": [1, 2]}}"#
        let file = try TempConfigFile(contents: json)
        let configuration = try ConfigurationLoader.load(arguments: ["--config", file.path], environment: [:])
        #expect(configuration.amqp.prefetch == 64)
        #expect(configuration.queue.declare == false)
        #expect(configuration.storage.fsync == true)
        #expect(configuration.fetch.timeout == 2.5)
        #expect(configuration.fetch.maxRedirects == 2)
        #expect(configuration.retry.delays == [1, 2])
    }

    @Test func aFileThatIsNotASmallRegularFileIsRefused() throws {
        let large = try TempConfigFile(contents: "{\"x\": \"" + String(repeating: "a", count: 2 << 20) + "\"}")
        let tooLarge = Result { try ConfigurationLoader.load(arguments: ["--config", large.path], environment: [:]) }
        #expect("\(tooLarge)".contains("is larger than 1 MiB"), "\(String("\(tooLarge)".prefix(300)))")

        // A FIFO would block the start for good on its open.
        let fifo = FileManager.default.temporaryDirectory.appendingPathComponent("fifo-\(UUID().uuidString).json").path
        #expect(mkfifo(fifo, 0o600) == 0)
        defer { unlink(fifo) }
        let notRegular = Result { try ConfigurationLoader.load(arguments: ["--config", fifo], environment: [:]) }
        #expect("\(notRegular)".contains("is not a regular file"), "\(notRegular)")
    }
}
