import Foundation
import Testing

@testable import ImageFetchWorker

/// Every key of the table, at every layer: flag > environment > config file > default.
@Suite("Configuration precedence, every key")
struct ConfigurationPrecedenceTests {
    /// Three valid values for each key: for the flag, the variable and the config file. Each
    /// differs from the next layer's (the file's from the default), so the winner shows.
    static let samples: [String: [String]] = [
        "amqp.url": ["amqp://u:p@flag/", "amqp://u:p@env/", "amqp://u:p@file/"],
        "amqp.prefetch": ["3", "4", "5"],
        "amqp.heartbeat": ["1", "2", "3"],
        "amqp.confirm_timeout": ["5", "10", "15"],
        // Real PEM files: each is read and checked at load.
        "amqp.tls.ca_file": ["f", "e", "c"].map(TestPEMFiles.paths.certificate),
        "amqp.tls.cert_file": ["f", "e", "c"].map(TestPEMFiles.paths.certificate),
        "amqp.tls.key_file": ["f", "e", "c"].map(TestPEMFiles.paths.key),
        "amqp.tls.verify": ["no", "true", "false"],
        "queue.jobs": ["jf", "je", "jc"],
        "queue.results": ["rf", "re", "rc"],
        "queue.dead": ["df", "de", "dc"],
        "queue.declare": ["0", "yes", "false"],
        "queue.type": ["quorum", "classic", "Quorum"],
        "queue.delivery_limit": ["7", "8", "9"],
        "worker.concurrency": ["7", "8", "9"],
        "worker.drain_timeout": ["1", "2s", "3000ms"],
        "fetch.timeout": ["1", "2", "1m"],
        "fetch.connect_timeout": ["1", "2", "3"],
        "fetch.max_bytes": ["1", "2", "3"],
        "fetch.max_redirects": ["1", "2", "3"],
        "fetch.max_pixels": ["1", "2", "3"],
        "fetch.user_agent": ["a/1", "a/2", "a/3 (x, y)"],
        "fetch.allow_private_networks": ["yes", "0", "true"],
        "fetch.allowed_networks": ["10.0.0.0/8,fd00::/8", "10.1.0.0/16", "10.2.0.0/16, 10.3.0.1"],
        "fetch.low_speed_limit": ["1", "2", "3"],
        "fetch.low_speed_time": ["1", "2", "3"],
        "queue.max_job_bytes": ["1000", "2000", "3000"],
        "fetch.headers": ["X-F: 1", "X-E: 2", "X-C: 3"],
        "fetch.job_headers": ["referer", "x-e", "x-c"],
        "fetch.allowed_hosts": ["f.example", "*.e.example", "c.example"],
        "fetch.denied_hosts": ["f.example", "e.example", "*.c.example"],
        "fetch.resolve": ["f.test:443:127.0.0.1", "e.test:80:127.0.0.2", "c.test:8080:127.0.0.3"],
        "fetch.tls.ca_file": ["f", "e", "c"].map(TestPEMFiles.paths.certificate),
        "image.verify": ["decode", "structure", "Decode"],
        "fetch.robots": ["respect", "off", "Respect"],
        "fetch.opt_out.directives": ["noai", "noml,noindex", "NoImageAI"],
        "fetch.opt_out.tdm_reservation": ["no", "true", "false"],
        "fetch.opt_out.user_agent": ["f-bot", "e-bot", "c_bot"],
        "fetch.opt_out.robots_ttl": ["1", "2", "3"],
        "fetch.opt_out.robots_error_ttl": ["1", "2", "3"],
        "fetch.opt_out.robots_max_origins": ["1", "2", "3"],
        "retry.max_attempts": ["1", "2", "3"],
        "retry.delays": ["1s", "2s,3s", "1m,1h"],
        "scheduler.adaptive": ["no", "true", "false"],
        "scheduler.min_limit": ["1", "2", "3"],
        "scheduler.max_limit": ["4", "5", "6"],
        "scheduler.initial_limit": ["2", "3", "4"],
        "scheduler.max_wait": ["2", "3", "4"],
        "scheduler.max_retry_after": ["1", "2", "0"],
        "scheduler.overload_pause": ["1", "2", "0"],
        "scheduler.max_overload_pause": ["1", "2", "3"],
        "scheduler.probe_interval": ["1", "2", "3"],
        "scheduler.defer_delays": ["1s", "2s,3s", "1m"],
        "scheduler.defer_budget": ["1", "2", "3"],
        "scheduler.tenant_header": ["x-tenant", "tenant", "x-customer"],
        "scheduler.tenant_limit": ["1", "2", "3"],
        "scheduler.tenant_limits": ["f=1", "e=2,c=3", "c=4"],
        "storage.kind": ["none", "s3", "none"],
        "storage.path": ["/f", "/e", "/c"],
        "storage.fsync": ["no", "1", "false"],
        "s3.endpoint": ["http://f:9000", "http://e:9000", "https://c"],
        "s3.bucket": ["bucket-f", "bucket-e", "bucket-c"],
        "s3.region": ["eu-f", "eu-e", "eu-c"],
        "s3.prefix": ["f/", "e/", "c/"],
        "s3.path_style": ["true", "false", "true"],
        "s3.access_key_id": ["AKF", "AKE", "AKC"],
        "s3.secret_access_key": ["sf", "se", "sc"],
        "s3.session_token": ["tf", "te", "tc"],
        "http.port": ["1", "2", "3"],
        "http.host": ["127.0.0.1", "::1", "localhost"],
        "log.level": ["debug", "error", "warning"],
        "log.format": ["json", "text", "JSON"],
        "log.summary_interval": ["1", "2", "3"],
        "metrics.depth_interval": ["1", "2", "3"],
        "metrics.tenants": ["1", "2", "3"],
    ]

    /// Other keys a key needs to be valid, set in the environment of every case.
    static let companions: [String: [String: String]] = [
        "amqp.tls.cert_file": ["AMQP_TLS_KEY_FILE": TestPEMFiles.paths.key("k")],
        "amqp.tls.key_file": ["AMQP_TLS_CERT_FILE": TestPEMFiles.paths.certificate("k")],
        "storage.kind": ["S3_BUCKET": "images", "AWS_ACCESS_KEY_ID": "AK", "AWS_SECRET_ACCESS_KEY": "SK"],
    ]

    enum Layer: CaseIterable {
        case flag, env, file, `default`
    }

    @Test func everyKeyHasSamples() {
        for key in ConfigurationKey.all {
            #expect(Self.samples[key.name]?.count == 3, "add three sample values for \(key.name)")
        }
        #expect(Set(ConfigurationKey.all.map(\.name)).count == ConfigurationKey.all.count)
    }

    @Test(arguments: ConfigurationKey.all.map(\.name), [Layer.flag, .env, .file, .default])
    func highestLayerWins(_ name: String, _ winner: Layer) throws {
        let key = try #require(ConfigurationKey.named(name))
        let values = try #require(Self.samples[name])
        // Companions only where the key is set: a TLS certificate without its key is invalid.
        func companions(_ layer: Layer) -> [String: String] {
            layer == .default ? [:] : Self.companions[name] ?? [:]
        }
        // The winner's layer and every lower one are set.
        let layers = Layer.allCases.drop(while: { $0 != winner })
        var arguments: [String] = []
        var environment = companions(winner)
        var file: TempConfigFile?
        if layers.contains(.flag) {
            arguments += ["\(key.flag)=\(values[0])"]
        }
        if layers.contains(.env) {
            environment[key.variable] = values[1]
        }
        if layers.contains(.file) {
            let json = try JSONSerialization.data(withJSONObject: [name: values[2]])
            file = try TempConfigFile(contents: String(decoding: json, as: UTF8.self))
            arguments += ["--config", file!.path]
        }
        let resolved = try ConfigurationLoader.resolve(arguments: arguments, environment: environment)

        /// The configuration with only `layer`'s value set, through a variable.
        func only(_ layer: Layer) throws -> WorkerConfiguration {
            var reference = companions(layer)
            switch layer {
            case .flag: reference[key.variable] = values[0]
            case .env: reference[key.variable] = values[1]
            case .file: reference[key.variable] = values[2]
            case .default: break
            }
            return try ConfigurationLoader.load(arguments: [], environment: reference)
        }
        #expect(resolved.configuration == (try only(winner)))
        if let next = layers.dropFirst().first {
            #expect(try only(winner) != (try only(next)), "the samples for \(name) must differ layer to layer")
        }
        let layer: ConfigurationSource.Layer =
            switch winner {
            case .flag: .flag
            case .env: .env
            case .file: .file
            case .default: .default
            }
        #expect((resolved.sources[name] ?? .default).layer == layer)
        withExtendedLifetime(file) {}
    }

    /// The flag's two spellings and the `--flag value` form reach the same key.
    @Test(arguments: ConfigurationKey.all.map(\.name))
    func flagSpellings(_ name: String) throws {
        let key = try #require(ConfigurationKey.named(name))
        let value = try #require(Self.samples[name]?[0])
        let companions = Self.companions[name] ?? [:]
        let library = "--" + name.replacingOccurrences(of: ".", with: "-")
        let expected = try ConfigurationLoader.load(arguments: ["\(key.flag)=\(value)"], environment: companions)
        #expect(try ConfigurationLoader.load(arguments: [key.flag, value], environment: companions) == expected)
        #expect(try ConfigurationLoader.load(arguments: [library, value], environment: companions) == expected)
    }
}

/// A JSON config file that is removed when the test ends.
final class TempConfigFile {
    let path: String

    init(contents: String) throws {
        path =
            FileManager.default.temporaryDirectory.appendingPathComponent("precedence-\(UUID().uuidString).json").path
        try contents.write(toFile: path, atomically: true, encoding: .utf8)
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }
}
