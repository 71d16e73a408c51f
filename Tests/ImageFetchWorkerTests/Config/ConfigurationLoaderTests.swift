import Foundation
import Testing

@testable import ImageFetchWorker

@Suite("ConfigurationLoader")
struct ConfigurationLoaderTests {
    /// A temporary file that is removed when the test ends.
    final class TempFile {
        let path: String
        init(extension ext: String, contents: String) throws {
            path =
                FileManager.default.temporaryDirectory
                .appendingPathComponent("config-test-\(UUID().uuidString).\(ext)").path
            try contents.write(toFile: path, atomically: true, encoding: .utf8)
        }
        deinit { try? FileManager.default.removeItem(atPath: path) }
    }

    private func load(_ arguments: [String] = [], _ environment: [String: String] = [:]) throws -> WorkerConfiguration {
        try ConfigurationLoader.load(arguments: arguments, environment: environment)
    }

    private func loadError(_ arguments: [String] = [], _ environment: [String: String] = [:]) -> ConfigurationError? {
        #expect(throws: ConfigurationError.self) {
            try ConfigurationLoader.load(arguments: arguments, environment: environment)
        }
    }

    // MARK: Defaults and precedence

    @Test func defaultsEqualWorkerConfiguration() throws {
        #expect(try load() == WorkerConfiguration())
        #expect(try load([], ["HOME": "/root", "PATH": "/bin"]) == WorkerConfiguration())
    }

    @Test func everyKeyHasAFlagAndAVariable() {
        #expect(ConfigurationLoader.flagName(forKey: "fetch.max_bytes") == "--fetch-max-bytes")
        #expect(ConfigurationLoader.flagName(forKey: "amqp.tls.ca_file") == "--amqp-tls-ca-file")
        #expect(ConfigurationLoader.environmentVariableName(forKey: "fetch.max_bytes") == "FETCH_MAX_BYTES")
        #expect(ConfigurationLoader.environmentVariableName(forKey: "worker.concurrency") == "WORKER_CONCURRENCY")
        #expect(ConfigurationLoader.environmentVariableName(forKey: "amqp.tls.ca_file") == "AMQP_TLS_CA_FILE")
        #expect(Set(ConfigurationLoader.keys).count == ConfigurationLoader.keys.count)
    }

    @Test(arguments: ["yaml", "yml", "json"])
    func precedenceFlagThenEnvironmentThenFileThenDefault(_ ext: String) throws {
        let contents =
            ext == "json"
            ? """
            {"worker": {"concurrency": 3, "drain_timeout": 7.5},
             "fetch": {"max_bytes": 100, "max_redirects": 2, "allow_private_networks": true},
             "log": {"format": "json"},
             "retry.delays": ["1s", "10s"],
             "some": {"unknown": "key"}}
            """
            : """
            worker:
              concurrency: 3
              drain_timeout: 7.5
            fetch:
              max_bytes: 100
              max_redirects: 2
              allow_private_networks: yes
            log:
              format: json
            retry:
              delays: [1s, 10s]
            some:
              unknown: key
            """
        let file = try TempFile(extension: ext, contents: contents)
        let config = try load(
            ["--worker-concurrency", "7", "--config", file.path],
            ["WORKER_CONCURRENCY": "5", "FETCH_MAX_BYTES": "200"]
        )
        var expected = WorkerConfiguration()
        expected.worker.concurrency = 7  // flag beats environment and file
        expected.amqp.prefetch = 14
        expected.fetch.maxBytes = 200  // environment beats file
        expected.worker.drainTimeout = 7.5  // file beats default
        expected.fetch.maxRedirects = 2
        expected.fetch.allowPrivateNetworks = true
        expected.log.format = .json
        expected.retry.delays = [1, 10]
        #expect(config == expected)
    }

    @Test func jsonNumbersAndArrays() throws {
        let file = try TempFile(
            extension: "json",
            contents:
                #"{"amqp": {"url": ["amqp://a/", "amqp://b/"], "heartbeat": 0}, "retry": {"delays": [5, 60]}, "storage": {"fsync": false}, "fetch": {"timeout": 2.5}}"#
        )
        let config = try load(["--config=\(file.path)"])
        #expect(config.amqp.urls.map(\.host) == ["a", "b"])
        #expect(config.amqp.heartbeat == 0)
        #expect(config.retry.delays == [5, 60])
        #expect(config.storage.fsync == false)
        #expect(config.fetch.timeout == 2.5)
    }

    @Test func prefetchDefaultFollowsConcurrency() throws {
        #expect(try load().amqp.prefetch == 32)
        #expect(try load([], ["WORKER_CONCURRENCY": "8"]).amqp.prefetch == 16)
        #expect(try load(["--worker-concurrency", "4096"]).amqp.prefetch == 8192)
        #expect(try load([], ["WORKER_CONCURRENCY": "8", "AMQP_PREFETCH": "3"]).amqp.prefetch == 3)
    }

    @Test func flagSpellings() throws {
        let pem = try TestPEMFiles.shared()
        let config = try load([
            "--fetch-max-bytes", "1000", "--fetch-max_redirects=9", "--queue-declare", "--storage-fsync", "false",
            "--amqp-tls-ca-file", pem.ca, "--fetch-allowed-networks", "10.0.0.0/8,fd00::/8",
        ])
        #expect(config.fetch.maxBytes == 1000)
        #expect(config.fetch.maxRedirects == 9)
        #expect(config.queue.declare == true)
        #expect(config.storage.fsync == false)
        #expect(config.amqp.tls.caFile == pem.ca)
        #expect(config.fetch.allowedNetworks == ["10.0.0.0/8", "fd00::/8"])
    }

    @Test func everyKeyFromTheEnvironment() throws {
        let pem = try TestPEMFiles.shared()
        let config = try load(
            [],
            [
                "AMQP_URL": "amqps://u:p@a:1/v,amqp://b", "AMQP_PREFETCH": "10", "AMQP_HEARTBEAT": "30",
                "AMQP_TLS_CA_FILE": pem.ca, "AMQP_TLS_CERT_FILE": pem.certificate, "AMQP_TLS_KEY_FILE": pem.key,
                "AMQP_TLS_VERIFY": "no",
                "QUEUE_JOBS": "j", "QUEUE_RESULTS": "r", "QUEUE_DEAD": "d", "QUEUE_DECLARE": "0",
                "QUEUE_TYPE": "Quorum", "QUEUE_DELIVERY_LIMIT": "9",
                "WORKER_CONCURRENCY": "64", "WORKER_DRAIN_TIMEOUT": "0",
                "FETCH_TIMEOUT": "1m", "FETCH_CONNECT_TIMEOUT": "500ms", "FETCH_MAX_BYTES": "1",
                "FETCH_MAX_REDIRECTS": "0", "FETCH_MAX_PIXELS": "100", "FETCH_USER_AGENT": "ua/1",
                "FETCH_ALLOW_PRIVATE_NETWORKS": "true", "FETCH_ALLOWED_NETWORKS": " 192.168.1.7 , ::1 ",
                "FETCH_LOW_SPEED_LIMIT": "0", "FETCH_LOW_SPEED_TIME": "3",
                "RETRY_MAX_ATTEMPTS": "1", "RETRY_DELAYS": "5s,30s,2m,1h,2000ms,7",
                "STORAGE_KIND": "none", "STORAGE_PATH": "/data", "STORAGE_FSYNC": "false",
                "HTTP_PORT": "0", "HTTP_HOST": "::",
                "LOG_LEVEL": "DEBUG", "LOG_FORMAT": "json", "LOG_SUMMARY_INTERVAL": "0",
                "METRICS_DEPTH_INTERVAL": "2.5",
            ]
        )
        #expect(
            config.amqp.urls == [
                AMQPURL(tls: true, host: "a", port: 1, user: "u", password: "p", vhost: "v"), AMQPURL(host: "b"),
            ])
        #expect(config.amqp.prefetch == 10)
        #expect(config.amqp.heartbeat == 30)
        #expect(config.amqp.tls.caFile == pem.ca)
        #expect(config.amqp.tls.certFile == pem.certificate)
        #expect(config.amqp.tls.keyFile == pem.key)
        #expect(config.amqp.tls.verify == false)
        #expect(config.queue.jobs == "j")
        #expect(config.queue.results == "r")
        #expect(config.queue.dead == "d")
        #expect(config.queue.declare == false)
        #expect(config.queue.type == .quorum)
        #expect(config.queue.deliveryLimit == 9)
        #expect(config.worker.concurrency == 64)
        #expect(config.worker.drainTimeout == 0)
        #expect(config.fetch.timeout == 60)
        #expect(config.fetch.connectTimeout == 0.5)
        #expect(config.fetch.maxBytes == 1)
        #expect(config.fetch.maxRedirects == 0)
        #expect(config.fetch.maxPixels == 100)
        #expect(config.fetch.userAgent == "ua/1")
        #expect(config.fetch.allowPrivateNetworks == true)
        #expect(config.fetch.allowedNetworks == ["192.168.1.7/32", "::1/128"])
        #expect(config.fetch.lowSpeedLimit == 0)
        #expect(config.fetch.lowSpeedTime == 3)
        #expect(config.retry.maxAttempts == 1)
        #expect(config.retry.delays == [5, 30, 120, 3600, 2, 7])
        #expect(config.storage.kind == WorkerConfiguration.Storage.Kind.none)
        #expect(config.storage.path == "/data")
        #expect(config.storage.fsync == false)
        #expect(config.http.port == 0)
        #expect(config.http.host == "::")
        #expect(config.log.level == "debug")
        #expect(config.log.format == .json)
        #expect(config.log.summaryInterval == 0)
        #expect(config.metrics.depthInterval == 2.5)
    }

    // MARK: Bad values

    @Test(arguments: [
        ("WORKER_CONCURRENCY", "abc", "worker.concurrency"),
        ("WORKER_CONCURRENCY", "0", "worker.concurrency"),
        ("WORKER_CONCURRENCY", "4097", "worker.concurrency"),
        ("WORKER_CONCURRENCY", "8.5", "worker.concurrency"),
        ("AMQP_PREFETCH", "65536", "amqp.prefetch"),
        ("AMQP_PREFETCH", "0", "amqp.prefetch"),
        ("AMQP_HEARTBEAT", "3601", "amqp.heartbeat"),
        ("AMQP_HEARTBEAT", "-1", "amqp.heartbeat"),
        ("HTTP_PORT", "65536", "http.port"),
        ("HTTP_HOST", "not a host", "http.host"),
        ("FETCH_MAX_BYTES", "0", "fetch.max_bytes"),
        // A body is held in memory whole; a limit past memory let any origin's declared length
        // make the worker reserve more than malloc gives, which ends the process.
        ("FETCH_MAX_BYTES", "9223372036854775807", "fetch.max_bytes"),
        ("FETCH_MAX_BYTES", "4294967297", "fetch.max_bytes"),
        ("FETCH_MAX_REDIRECTS", "51", "fetch.max_redirects"),
        ("FETCH_MAX_PIXELS", "-5", "fetch.max_pixels"),
        ("FETCH_TIMEOUT", "0", "fetch.timeout"),
        ("FETCH_CONNECT_TIMEOUT", "soon", "fetch.connect_timeout"),
        ("FETCH_CONNECT_TIMEOUT", "-1", "fetch.connect_timeout"),
        ("WORKER_DRAIN_TIMEOUT", "-1", "worker.drain_timeout"),
        ("RETRY_MAX_ATTEMPTS", "0", "retry.max_attempts"),
        ("RETRY_MAX_ATTEMPTS", "101", "retry.max_attempts"),
        ("RETRY_DELAYS", "5s,500ms", "retry.delays"),
        ("RETRY_DELAYS", "5s,1.5s", "retry.delays"),
        ("RETRY_DELAYS", "5x", "retry.delays"),
        ("RETRY_DELAYS", "", "retry.delays"),
        ("QUEUE_DECLARE", "maybe", "queue.declare"),
        ("STORAGE_FSYNC", "2", "storage.fsync"),
        ("QUEUE_TYPE", "stream", "queue.type"),
        ("IMAGE_VERIFY", "pixels", "image.verify"),
        ("STORAGE_KIND", "ftp", "storage.kind"),
        ("LOG_FORMAT", "xml", "log.format"),
        ("LOG_LEVEL", "verbose", "log.level"),
        ("FETCH_ALLOWED_NETWORKS", "10.0.0.0/33", "fetch.allowed_networks"),
        ("FETCH_ALLOWED_NETWORKS", "fd00::/129", "fetch.allowed_networks"),
        ("FETCH_ALLOWED_NETWORKS", "10.0.0/8", "fetch.allowed_networks"),
        ("FETCH_ALLOWED_NETWORKS", "example.com", "fetch.allowed_networks"),
        ("QUEUE_JOBS", "", "queue.jobs"),
        ("QUEUE_RESULTS", String(repeating: "q", count: 256), "queue.results"),
        ("QUEUE_DEAD", "image-fetch.jobs", "queue.dead"),
        ("QUEUE_DELIVERY_LIMIT", "0", "queue.delivery_limit"),
        ("FETCH_USER_AGENT", "a\u{0D}\u{0A}X-Evil: 1", "fetch.user_agent"),
        ("STORAGE_PATH", " ", "storage.path"),
        ("AMQP_URL", "http://h", "amqp.url"),
        ("AMQP_TLS_CERT_FILE", TestPEMFiles.paths.certificate, "amqp.tls.key_file"),
        ("SCHEDULER_MAX_LIMIT", "17", "scheduler.max_limit"),
        ("SCHEDULER_MIN_LIMIT", "17", "scheduler.min_limit"),
        ("SCHEDULER_INITIAL_LIMIT", "0", "scheduler.initial_limit"),
        ("SCHEDULER_INITIAL_LIMIT", "17", "scheduler.initial_limit"),
        ("SCHEDULER_DEFER_DELAYS", "500ms", "scheduler.defer_delays"),
        ("SCHEDULER_MAX_WAIT", "0", "scheduler.max_wait"),
        ("SCHEDULER_TENANT_LIMITS", "a=8,a=9", "scheduler.tenant_limits"),
        ("SCHEDULER_TENANT_LIMITS", "a=0", "scheduler.tenant_limits"),
        ("SCHEDULER_TENANT_LIMITS", "a b=2", "scheduler.tenant_limits"),
        ("SCHEDULER_TENANT_LIMITS", "a", "scheduler.tenant_limits"),
        ("SCHEDULER_TENANT_LIMIT", "-1", "scheduler.tenant_limit"),
        ("SCHEDULER_TENANT_HEADER", "x-\u{0A}t", "scheduler.tenant_header"),
        ("METRICS_TENANTS", "1001", "metrics.tenants"),
        // Issue 33: a repeating timer this short never let the drain run, or flooded the log.
        ("METRICS_DEPTH_INTERVAL", "0.000001", "metrics.depth_interval"),
        ("LOG_SUMMARY_INTERVAL", "500ms", "log.summary_interval"),
        // The confirm watch's timer runs at a quarter of this: 250 ns spun the session's queue and
        // every publish was overdue; below a nanosecond the watch was off while `config` showed it on.
        ("AMQP_CONFIRM_TIMEOUT", "0.000001", "amqp.confirm_timeout"),
        ("AMQP_CONFIRM_TIMEOUT", "500ms", "amqp.confirm_timeout"),
        // Issue 33: the name fits, but its delay queues' names (`<jobs>.retry.5s`) did not, and
        // the declare failed on every reconnect.
        ("QUEUE_JOBS", String(repeating: "j", count: 250), "queue.jobs"),
    ])
    func badValueNamesItsKey(_ variable: String, _ value: String, _ key: String) {
        let error = loadError([], [variable: value])
        #expect(error?.key == key)
        #expect(error?.description.hasPrefix("configuration error: \(key): ") == true)
        #expect(error?.description.contains("\n") == false)
        #expect(error?.description.contains(variable) == true)
    }

    /// A refused value is shown in the line, unless it can hold a secret (issue 33).
    @Test func aRefusedS3EndpointIsNotShownWithItsCredentials() {
        let error = loadError([], ["S3_ENDPOINT": "http://u:topsecretvalue@minio/"])
        #expect(error?.key == "s3.endpoint")
        #expect(error?.description.contains("topsecretvalue") == false, "\(error?.description ?? "")")
    }

    @Test func imageVerifyIsStructureUnlessDecodeIsAsked() {
        #expect(WorkerConfiguration().image.verify == .structure)
        let error = loadError([], ["IMAGE_VERIFY": "full"])
        #expect(
            error?.description == #"configuration error: image.verify: must be structure or decode, "#
                + #"got "full" (from environment variable IMAGE_VERIFY)"#)
    }

    @Test func errorMessageIsOneClearLine() {
        let error = loadError([], ["WORKER_CONCURRENCY": "abc"])
        #expect(error?.problem == #"must be an integer between 1 and 4096, got "abc""#)
        #expect(
            error?.description
                == #"configuration error: worker.concurrency: must be an integer between 1 and 4096, got "abc" (from environment variable WORKER_CONCURRENCY)"#
        )
        #expect(ConfigurationError.exitStatus == 78)
    }

    @Test func badFlagValueNamesTheFlag() {
        let error = loadError(["--fetch-max-bytes", "lots"])
        #expect(error?.key == "fetch.max_bytes")
        #expect(error?.source == "flag --fetch-max-bytes")
    }

    @Test func badFileValueNamesTheFile() throws {
        let file = try TempFile(extension: "yaml", contents: "queue:\n  type: stream\n")
        let error = loadError(["--config", file.path])
        #expect(error?.key == "queue.type")
        #expect(error?.source == "config file \(file.path)")
    }

    @Test(arguments: [["--worker-concurrecy", "8"], ["--help"], ["run", "--worker-concurrency", "8"], ["--"]])
    func unknownArgumentsAreErrors(_ arguments: [String]) {
        #expect(loadError(arguments)?.key == "arguments")
    }

    @Test func flagWithoutValue() {
        #expect(loadError(["--worker-concurrency"])?.key == "worker.concurrency")
    }

    /// A flag left without its value (an unquoted empty shell variable) must not take the text
    /// `true`: the worker would consume queue `true` or store under `./true`.
    @Test(arguments: [
        (["--queue-jobs"], "queue.jobs"),
        (["--storage-path", "--storage-fsync", "true"], "storage.path"),
        (["--s3-bucket"], "s3.bucket"),
        (["--fetch-user-agent", "--worker-concurrency", "8"], "fetch.user_agent"),
        (["--retry-delays"], "retry.delays"),
        (["--queue-jobs", "jobs", "extra"], "queue.jobs"),
        (["--worker-concurrency", "8", "9"], "worker.concurrency"),
        (["--queue-declare", "true", "false"], "queue.declare"),
        (["--queue-jobs", "default", "--queue-jobs", "other"], "queue.jobs"),
        (["--fetch-max-bytes=1000", "--worker-concurrency", "8", "--fetch-max_bytes", "2000"], "fetch.max_bytes"),
    ])
    func aFlagTakesItsValue(_ arguments: [String], key: String) {
        let error = loadError(arguments)
        #expect(error?.key == key)
        #expect(error?.source?.hasPrefix("flag --") == true)
    }

    @Test func aBooleanFlagAloneIsTrueAndAListFlagTakesSeveralValues() throws {
        #expect(try load(["--fetch-allow-private-networks", "--worker-concurrency", "8"]).fetch.allowPrivateNetworks)
        #expect(try load(["--retry-delays", "5s", "30s"]).retry.delays == [5, 30])
        #expect(try load(["--retry-delays", "5s", "--retry-delays", "30s,1m"]).retry.delays == [5, 30, 60])
    }

    // MARK: Secrets

    @Test(arguments: [
        "amqp://alice:hunter2@h:notaport/", "http://alice:hunter2@h/", "amqp://alice:hunter2@/",
        "amqp://alice:hunter2@h/a/b", "amqp://alice:hun,ter2@h/",
    ])
    func amqpURLErrorNeverShowsThePassword(_ url: String) throws {
        for error in [loadError([], ["AMQP_URL": url]), loadError(["--amqp-url", url])] {
            #expect(error?.key == "amqp.url")
            #expect(error?.description.contains("hunter2") == false)
            #expect(error?.description.contains("hun") == false)
        }
        let file = try TempFile(extension: "yaml", contents: "amqp:\n  url: \"\(url)\"\n")
        let error = loadError(["--config", file.path])
        #expect(error?.key == "amqp.url")
        // Without the file's own path, whose folder has random letters (mktemp's).
        #expect(error?.description.replacingOccurrences(of: file.path, with: "").contains("hun") == false)
    }

    @Test func secretFromFile() throws {
        let secret = try TempFile(extension: "txt", contents: "amqp://app:s3cret@broker:5673/jobs\n")
        let config = try load([], ["AMQP_URL_FILE": secret.path])
        #expect(
            config.amqp.urls == [AMQPURL(host: "broker", port: 5673, user: "app", password: "s3cret", vhost: "jobs")])
    }

    @Test func secretFileBelowFlagAboveConfigFile() throws {
        let secret = try TempFile(extension: "txt", contents: "amqp://from-secret\n")
        let file = try TempFile(extension: "yaml", contents: "amqp:\n  url: amqp://from-file\n")
        #expect(try load(["--config", file.path], ["AMQP_URL_FILE": secret.path]).amqp.urls[0].host == "from-secret")
        #expect(
            try load(["--amqp-url", "amqp://from-flag", "--config", file.path], ["AMQP_URL_FILE": secret.path])
                .amqp.urls[0].host == "from-flag")
    }

    @Test func missingSecretFileNamesVariableAndPath() {
        let error = loadError([], ["AMQP_URL_FILE": "/nonexistent/amqp-secret"])
        #expect(error?.key == "amqp.url")
        #expect(error?.description.contains("AMQP_URL_FILE") == true)
        #expect(error?.description.contains("/nonexistent/amqp-secret") == true)
    }

    /// As for `--config`: a device or a FIFO would hold the start for good (`/dev/zero` until
    /// memory runs out), a huge file its memory. Such a file is one line and exit 78.
    @Test func aSecretFileMustBeASmallRegularFile() throws {
        let device = loadError([], ["AMQP_URL_FILE": "/dev/null"])
        #expect(device?.key == "amqp.url")
        #expect(device?.description.contains("is not a regular file") == true, "\(String(describing: device))")
        let huge = try TempFile(extension: "txt", contents: "amqp://" + String(repeating: "a", count: 2 << 20) + "\n")
        let large = loadError([], ["AMQP_URL_FILE": huge.path])
        #expect(large?.key == "amqp.url")
        #expect(large?.description.contains("is larger than 1 MiB") == true, "\(String(describing: large).prefix(300))")
    }

    @Test func badSecretFileContentIsNotShown() throws {
        let secret = try TempFile(extension: "txt", contents: "amqp://app:hunter2@broker:99999/\n")
        let error = loadError([], ["AMQP_URL_FILE": secret.path])
        #expect(error?.key == "amqp.url")
        #expect(error?.description.contains("hunter2") == false)
    }

    @Test func secretAndSecretFileTogetherIsAnError() throws {
        let secret = try TempFile(extension: "txt", contents: "amqp://a\n")
        let error = loadError([], ["AMQP_URL": "amqp://b", "AMQP_URL_FILE": secret.path])
        #expect(error?.key == "amqp.url")
    }

    @Test func fileVariableOnlyForSecrets() throws {
        // WORKER_CONCURRENCY_FILE is not a convention for non-secret keys, so it is ignored.
        let file = try TempFile(extension: "txt", contents: "8\n")
        #expect(try load([], ["WORKER_CONCURRENCY_FILE": file.path]).worker.concurrency == 16)
    }

    // MARK: Config file problems

    @Test func missingConfigFile() {
        let error = loadError(["--config", "/nonexistent/worker.yaml"])
        #expect(error?.key == "config")
        #expect(error?.problem.contains("does not exist") == true)
    }

    @Test(arguments: [
        ("yaml", "worker: [unclosed\n  concurrency: 3"), ("json", "{\"worker\": "), ("yaml", "- a\n- b\n"),
    ])
    func unparsableConfigFile(_ ext: String, _ contents: String) throws {
        let file = try TempFile(extension: ext, contents: contents)
        let error = loadError(["--config", file.path])
        #expect(error?.key == "config")
        #expect(error?.description.contains("\n") == false)
    }

    @Test func unparsableConfigFileDoesNotQuoteItsLines() throws {
        let file = try TempFile(extension: "yaml", contents: "amqp:\n  url: amqp://u:hunter2@h/\n   bad: [\n")
        let error = loadError(["--config", file.path])
        #expect(error?.key == "config")
        #expect(error?.description.contains("hunter2") == false)
    }

    @Test func configFileNeedsAKnownExtension() throws {
        let file = try TempFile(extension: "toml", contents: "")
        #expect(loadError(["--config", file.path])?.key == "config")
        #expect(loadError(["--config"])?.key == "config")
    }

    @Test func wrongShapeInConfigFile() throws {
        let file = try TempFile(
            extension: "json", contents: #"{"worker": {"concurrency": [1, 2]}, "queue": {"declare": "sometimes"}}"#)
        #expect(loadError(["--config", file.path])?.key == "worker.concurrency")
    }
}
