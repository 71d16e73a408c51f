import Foundation
import Testing

@testable import ImageFetchWorker

/// `run --help`, `config` and the argument split come from the key table; the licence and the
/// changelog agree with the build's version.
@Suite("Configuration help and the user's surface")
struct ConfigurationHelpTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
        .deletingLastPathComponent()

    @Test func helpListsEveryKeyWithFlagVariableDefaultAndMeaning() {
        let help = ConfigurationHelp.keys
        for key in ConfigurationKey.all {
            #expect(help.contains("  \(key.flag) <"), "\(key.name)")
            #expect(help.contains(", \(key.variable)\n"), "\(key.name)")
            #expect(help.contains("      \(key.help)\n"), "\(key.name)")
            #expect(help.contains("Default: \(key.defaultText)."), "\(key.name)")
        }
        #expect(help.contains("Default: 2 × worker.concurrency."))
        #expect(help.contains("Default: 16."))
        #expect(!help.contains("guest:guest"))
    }

    @Test func everyKeyIsDocumented() throws {
        let docs = try String(contentsOf: Self.root.appendingPathComponent("docs/configuration.md"), encoding: .utf8)
        let readme = try String(contentsOf: Self.root.appendingPathComponent("README.md"), encoding: .utf8)
        for key in ConfigurationKey.all {
            #expect(docs.contains("`\(key.name)`"), "docs/configuration.md lacks \(key.name)")
            #expect(readme.contains("`\(key.name)`"), "README.md lacks \(key.name)")
        }
    }

    @Test func configReportShowsSourcesAndNoSecret() throws {
        let secret = try TempConfigFile(contents: #"{"queue": {"type": "quorum"}}"#)
        let resolved = try ConfigurationLoader.resolve(
            arguments: ["--log-format", "json", "--config", secret.path],
            environment: [
                "WORKER_CONCURRENCY": "8", "AMQP_URL": "amqp://app:hunter2@broker/",
                "STORAGE_KIND": "s3", "S3_BUCKET": "images", "AWS_ACCESS_KEY_ID": "AK",
                "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI", "S3_SESSION_TOKEN": "tok3n",
            ])
        let report = ConfigurationHelp.report(resolved)
        let lines = report.split(separator: "\n").map {
            $0.split(separator: " ", omittingEmptySubsequences: true).map(String.init)
        }
        #expect(lines.count == ConfigurationKey.all.count)
        func row(_ key: String) -> [String] { lines.first { $0.first == key } ?? [] }
        #expect(row("worker.concurrency") == ["worker.concurrency", "8", "env", "WORKER_CONCURRENCY"])
        #expect(row("log.format") == ["log.format", "json", "flag", "--log-format"])
        #expect(row("queue.type") == ["queue.type", "quorum", "file", secret.path])
        #expect(row("amqp.prefetch") == ["amqp.prefetch", "16", "default"])
        #expect(row("amqp.url") == ["amqp.url", "amqp://app:***@broker:5672/%2F", "env", "AMQP_URL"])
        #expect(row("s3.secret_access_key") == ["s3.secret_access_key", "<redacted>", "env", "AWS_SECRET_ACCESS_KEY"])
        #expect(row("s3.session_token") == ["s3.session_token", "<redacted>", "env", "S3_SESSION_TOKEN"])
        for secret in ["hunter2", "wJalrXUtnFEMI", "tok3n"] {
            #expect(!report.contains(secret))
        }
    }

    @Test func partitionKeepsEachFlagsValue() {
        let (configuration, operands) = ConfigurationLoader.partition([
            "http://a/1.png", "--amqp-url", "amqp://u:p@h/", "http://a/2.png", "--queue-declare", "http://a/3.png",
            "--storage-fsync", "no", "--worker-concurrency=4", "--fetch-max_bytes", "9", "--config", "w.yaml",
            "--unknown", "http://a/4.png",
        ])
        #expect(
            configuration == [
                "--amqp-url", "amqp://u:p@h/", "--queue-declare", "--storage-fsync", "no", "--worker-concurrency=4",
                "--fetch-max_bytes", "9", "--config", "w.yaml", "--unknown",
            ])
        #expect(operands == ["http://a/1.png", "http://a/2.png", "http://a/3.png", "http://a/4.png"])
    }

    @Test func licenceAndChangelog() throws {
        let license = try String(contentsOf: Self.root.appendingPathComponent("LICENSE"), encoding: .utf8)
        #expect(license.contains("Apache License\n                           Version 2.0, January 2004"))
        #expect(license.contains("END OF TERMS AND CONDITIONS"))
        let changelog = try String(contentsOf: Self.root.appendingPathComponent("CHANGELOG.md"), encoding: .utf8)
        #expect(changelog.contains("## [Unreleased]"))
        let released = changelog.split(separator: "\n").first {
            $0.hasPrefix("## [") && !$0.hasPrefix("## [Unreleased]")
        }
        #expect(
            released?.hasPrefix("## [\(BuildInfo.version)] - ") == true,
            "CHANGELOG.md's latest release is not \(BuildInfo.version)")
        #expect(BuildInfo.description == "\(BuildInfo.version) (revision \(BuildInfo.revision))")
    }
}
