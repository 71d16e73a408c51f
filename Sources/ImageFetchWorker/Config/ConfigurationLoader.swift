import Configuration
import Foundation
import Logging

/// Reads and validates ``WorkerConfiguration`` at start-up.
///
/// Each key is looked up in four places, and the first that has it wins:
///
/// 1. a command-line flag: the key with dots and underscores turned into dashes,
///    `fetch.max_bytes` → `--fetch-max-bytes 1048576` or `--fetch-max-bytes=1048576`. This is
///    swift-configuration's `CommandLineArgumentsProvider` spelling of the key; the spelling
///    that keeps the underscores (`--fetch-max_bytes`) is accepted too. A boolean flag given
///    without a value means true (`--queue-declare`).
/// 2. an environment variable: the key upper-cased with dots turned into underscores,
///    `fetch.max_bytes` → `FETCH_MAX_BYTES`, as swift-configuration's
///    `EnvironmentVariablesProvider` encodes it. `amqp.url` and any key whose name ends in
///    `password` or `secret` can also be given as the path of a file that holds the value,
///    in `<VARIABLE>_FILE` (`AMQP_URL_FILE=/run/secrets/amqp`); its trailing line break is
///    dropped. Setting both `AMQP_URL` and `AMQP_URL_FILE` is an error.
/// 3. the config file named by `--config FILE`: JSON (`.json`) or YAML (`.yaml`, `.yml`),
///    with nested objects (`fetch: {max_bytes: 1048576}`) or dotted keys. Keys the worker does
///    not know are ignored, so one file can be shared with other tools and newer versions.
/// 4. the defaults of ``WorkerConfiguration``.
///
/// Every value is validated, and the first bad one throws a ``ConfigurationError`` that names
/// the key, the problem and where the value came from, without any secret. An unknown
/// command-line flag is an error too, so that a typo does not silently fall back to a default.
///
/// Loading is pure apart from reading the config file and `*_FILE` secrets: it takes the
/// arguments and environment as parameters and touches no global state.
public enum ConfigurationLoader {
    /// Reads flags, then environment, then the `--config` file (JSON or YAML by extension),
    /// then defaults, and validates the result.
    ///
    /// - Parameters:
    ///   - arguments: The worker's command-line arguments after the subcommand, such as
    ///     `["--worker-concurrency", "8", "--config", "w.yaml"]`. Only `--config` and the
    ///     configuration flags (see ``flagName(forKey:)``) are allowed.
    ///   - environment: The process environment, such as `ProcessInfo.processInfo.environment`.
    /// - Returns: The validated configuration.
    /// - Throws: ``ConfigurationError`` for the first invalid value, unknown flag, or unreadable
    ///   config or secret file. Exit with ``ConfigurationError/exitStatus`` (78).
    public static func load(
        arguments: [String],
        environment: [String: String]
    ) throws(ConfigurationError) -> WorkerConfiguration {
        try checkFlags(arguments)
        let cli = CommandLineArgumentsProvider(arguments: ["image-fetch-worker"] + arguments)
        let file = try loadConfigFile(cli: cli)
        let reader = ValueReader(
            cli: cli,
            env: EnvironmentVariablesProvider(environmentVariables: environment),
            environment: environment,
            file: file
        )
        return try read(reader)
    }

    /// Every configuration key the loader reads, in the order of the documentation.
    public static let keys: [String] = [
        "amqp.url", "amqp.prefetch", "amqp.heartbeat",
        "amqp.tls.ca_file", "amqp.tls.cert_file", "amqp.tls.key_file", "amqp.tls.verify",
        "queue.jobs", "queue.results", "queue.dead", "queue.declare", "queue.type", "queue.delivery_limit",
        "queue.max_job_bytes",
        "worker.concurrency", "worker.drain_timeout",
        "fetch.timeout", "fetch.connect_timeout", "fetch.max_bytes", "fetch.max_redirects", "fetch.max_pixels",
        "fetch.user_agent", "fetch.allow_private_networks", "fetch.allowed_networks",
        "fetch.low_speed_limit", "fetch.low_speed_time",
        "fetch.headers", "fetch.job_headers", "fetch.allowed_hosts", "fetch.denied_hosts", "fetch.resolve",
        "retry.max_attempts", "retry.delays",
        "scheduler.adaptive", "scheduler.min_limit", "scheduler.max_limit", "scheduler.initial_limit",
        "scheduler.max_wait", "scheduler.max_retry_after", "scheduler.probe_interval",
        "scheduler.defer_delays", "scheduler.defer_budget",
        "storage.kind", "storage.path", "storage.fsync",
        "s3.endpoint", "s3.bucket", "s3.region", "s3.prefix", "s3.path_style",
        "s3.access_key_id", "s3.secret_access_key", "s3.session_token",
        "http.port", "http.host",
        "log.level", "log.format", "log.summary_interval",
        "metrics.depth_interval",
    ]

    /// The command-line flag for a key: `fetch.max_bytes` → `--fetch-max-bytes`.
    public static func flagName(forKey key: String) -> String {
        "--" + key.replacingOccurrences(of: ".", with: "-").replacingOccurrences(of: "_", with: "-")
    }

    /// The environment variable for a key: `fetch.max_bytes` → `FETCH_MAX_BYTES`.
    public static func environmentVariableName(forKey key: String) -> String {
        ValueReader.environmentName(forKey: key)
    }

    // MARK: - Reading every key

    private static func read(_ reader: ValueReader) throws(ConfigurationError) -> WorkerConfiguration {
        var config = WorkerConfiguration()

        // worker.* first: amqp.prefetch defaults to twice the concurrency.
        config.worker.concurrency = try reader.int("worker.concurrency", in: 1...4096, default: config.worker.concurrency)
        config.worker.drainTimeout = try reader.seconds(
            "worker.drain_timeout", allowZero: true, default: config.worker.drainTimeout)

        if let raw = try reader.raw("amqp.url", kind: .list) {
            do throws(ConfigurationError) {
                config.amqp.urls = try AMQPURL.parseList(raw.text)
            } catch {
                throw ConfigurationError(key: error.key, problem: error.problem, source: raw.source)
            }
        }
        config.amqp.prefetch = try reader.int(
            "amqp.prefetch", in: 1...65535, default: min(2 * config.worker.concurrency, 65535))
        config.amqp.heartbeat = try reader.int("amqp.heartbeat", in: 0...3600, default: config.amqp.heartbeat)
        config.amqp.tls.caFile = try reader.optionalString("amqp.tls.ca_file")
        config.amqp.tls.certFile = try reader.optionalString("amqp.tls.cert_file")
        config.amqp.tls.keyFile = try reader.optionalString("amqp.tls.key_file")
        config.amqp.tls.verify = try reader.bool("amqp.tls.verify", default: config.amqp.tls.verify)
        if config.amqp.tls.certFile != nil && config.amqp.tls.keyFile == nil {
            throw ConfigurationError(
                key: "amqp.tls.key_file", problem: "must be set when amqp.tls.cert_file is set",
                source: try reader.raw("amqp.tls.cert_file", kind: .string)?.source)
        }
        if config.amqp.tls.keyFile != nil && config.amqp.tls.certFile == nil {
            throw ConfigurationError(
                key: "amqp.tls.cert_file", problem: "must be set when amqp.tls.key_file is set",
                source: try reader.raw("amqp.tls.key_file", kind: .string)?.source)
        }

        config.queue.jobs = try reader.queueName("queue.jobs", default: config.queue.jobs)
        config.queue.results = try reader.queueName("queue.results", default: config.queue.results)
        config.queue.dead = try reader.queueName("queue.dead", default: config.queue.dead)
        for (key, other) in [("queue.results", "queue.jobs"), ("queue.dead", "queue.jobs"), ("queue.dead", "queue.results")] {
            let names = ["queue.jobs": config.queue.jobs, "queue.results": config.queue.results, "queue.dead": config.queue.dead]
            if names[key] == names[other] {
                throw ConfigurationError(
                    key: key, problem: "must differ from \(other), both are \(quoted(names[key] ?? ""))",
                    source: try reader.raw(key, kind: .string)?.source)
            }
        }
        config.queue.declare = try reader.bool("queue.declare", default: config.queue.declare)
        config.queue.type = try reader.choice("queue.type", default: config.queue.type)
        config.queue.deliveryLimit = try reader.int("queue.delivery_limit", in: 1...10_000, default: config.queue.deliveryLimit)
        // RabbitMQ refuses messages over 512 MiB whatever its max_message_size says.
        config.queue.maxJobBytes = try reader.int("queue.max_job_bytes", in: 1...536_870_912, default: config.queue.maxJobBytes)

        config.fetch.timeout = try reader.seconds("fetch.timeout", allowZero: false, default: config.fetch.timeout)
        config.fetch.connectTimeout = try reader.seconds(
            "fetch.connect_timeout", allowZero: false, default: config.fetch.connectTimeout)
        config.fetch.maxBytes = try reader.int("fetch.max_bytes", in: 1...Int.max, default: config.fetch.maxBytes)
        config.fetch.maxRedirects = try reader.int("fetch.max_redirects", in: 0...50, default: config.fetch.maxRedirects)
        config.fetch.maxPixels = try reader.int("fetch.max_pixels", in: 1...Int.max, default: config.fetch.maxPixels)
        config.fetch.userAgent = try reader.userAgent("fetch.user_agent", default: config.fetch.userAgent)
        config.fetch.allowPrivateNetworks = try reader.bool(
            "fetch.allow_private_networks", default: config.fetch.allowPrivateNetworks)
        config.fetch.allowedNetworks = try reader.networks("fetch.allowed_networks", default: config.fetch.allowedNetworks)
        config.fetch.lowSpeedLimit = try reader.int(
            "fetch.low_speed_limit", in: 0...Int.max, default: config.fetch.lowSpeedLimit)
        config.fetch.lowSpeedTime = try reader.int("fetch.low_speed_time", in: 0...3600, default: config.fetch.lowSpeedTime)
        config.fetch.headers = try reader.parsed("fetch.headers", kind: .lines, FetchControlsSyntax.headers) ?? []
        config.fetch.jobHeaders = try reader.parsed("fetch.job_headers", kind: .list, FetchControlsSyntax.headerNames) ?? []
        config.fetch.allowedHosts = try reader.parsed("fetch.allowed_hosts", kind: .list, FetchControlsSyntax.hosts) ?? []
        config.fetch.deniedHosts = try reader.parsed("fetch.denied_hosts", kind: .list, FetchControlsSyntax.hosts) ?? []
        config.fetch.resolve = try reader.parsed("fetch.resolve", kind: .list, FetchControlsSyntax.resolve) ?? []

        config.retry.maxAttempts = try reader.int("retry.max_attempts", in: 1...100, default: config.retry.maxAttempts)
        config.retry.delays = try reader.delays("retry.delays", default: config.retry.delays)
        config.scheduler = try readScheduler(reader, concurrency: config.worker.concurrency)

        config.storage.kind = try reader.choice("storage.kind", default: config.storage.kind)
        config.storage.path = try reader.string("storage.path", default: config.storage.path)
        config.storage.fsync = try reader.bool("storage.fsync", default: config.storage.fsync)
        config.s3 = try readS3(reader, required: config.storage.kind == .s3)

        config.http.port = try reader.int("http.port", in: 0...65535, default: config.http.port)
        config.http.host = try reader.bindAddress("http.host", default: config.http.host)

        config.log.level = try reader.logLevel("log.level", default: config.log.level)
        config.log.format = try reader.choice("log.format", default: config.log.format)
        config.log.summaryInterval = try reader.seconds(
            "log.summary_interval", allowZero: true, default: config.log.summaryInterval)

        config.metrics.depthInterval = try reader.seconds(
            "metrics.depth_interval", allowZero: true, default: config.metrics.depthInterval)
        return config
    }

    // MARK: - scheduler.*

    private static func readScheduler(_ reader: ValueReader, concurrency: Int) throws(ConfigurationError) -> WorkerConfiguration.Scheduler {
        var scheduler = WorkerConfiguration.Scheduler()
        scheduler.adaptive = try reader.bool("scheduler.adaptive", default: scheduler.adaptive)
        scheduler.maxLimit = try reader.int("scheduler.max_limit", in: 0...concurrency, default: scheduler.maxLimit)
        let maxLimit = scheduler.resolvedMaxLimit(concurrency: concurrency)
        scheduler.minLimit = try reader.int("scheduler.min_limit", in: 1...maxLimit, default: scheduler.minLimit)
        // The default may be above a small concurrency: the limiter caps it at the max limit.
        scheduler.initialLimit = try reader.int(
            "scheduler.initial_limit", in: scheduler.minLimit...maxLimit, default: scheduler.initialLimit)
        scheduler.maxWait = try reader.seconds("scheduler.max_wait", allowZero: false, default: scheduler.maxWait)
        scheduler.maxRetryAfter = try reader.seconds(
            "scheduler.max_retry_after", allowZero: true, default: scheduler.maxRetryAfter)
        scheduler.probeInterval = try reader.seconds(
            "scheduler.probe_interval", allowZero: false, default: scheduler.probeInterval)
        scheduler.deferDelays = try reader.delays("scheduler.defer_delays", default: scheduler.deferDelays)
        scheduler.deferBudget = try reader.seconds("scheduler.defer_budget", allowZero: false, default: scheduler.deferBudget)
        return scheduler
    }

    // MARK: - s3.*

    /// The AWS variables each credential falls back to when its `s3.*` key is not set anywhere.
    static let awsFallbacks: [String: String] = [
        "s3.access_key_id": "AWS_ACCESS_KEY_ID",
        "s3.secret_access_key": "AWS_SECRET_ACCESS_KEY",
        "s3.session_token": "AWS_SESSION_TOKEN",
    ]

    /// Reads `s3.*`. With `required` (`storage.kind=s3`) the bucket and both credentials must be
    /// set; the other checks apply whenever a value is given.
    private static func readS3(_ reader: ValueReader, required: Bool) throws(ConfigurationError) -> WorkerConfiguration.S3 {
        var s3 = WorkerConfiguration.S3()
        s3.region = try reader.pattern(
            "s3.region", default: s3.region, allowed: "a-z, 0-9 and -",
            isValid: { !$0.isEmpty && $0.utf8.count <= 64 && $0.unicodeScalars.allSatisfy { ("a"..."z").contains($0) || ("0"..."9").contains($0) || $0 == "-" } })
        if let raw = try reader.raw("s3.endpoint", kind: .string) {
            let text = ConfigText.trimmed(raw.text)
            guard let endpoint = S3Addressing.validateEndpoint(text) else {
                throw reader.fail("s3.endpoint", raw,
                                  "must be an http:// or https:// URL with a host and no user info, path, query or fragment, like https://minio.internal:9000")
            }
            s3.endpoint = endpoint
        }
        s3.pathStyle = try reader.bool("s3.path_style", default: s3.pathStyle)
        s3.bucket = try reader.optionalString("s3.bucket") ?? ""
        if !s3.bucket.isEmpty, !S3Addressing.isValidBucket(s3.bucket, pathStyle: s3.pathStyle) {
            let raw = try reader.raw("s3.bucket", kind: .string)
            throw ConfigurationError(
                key: "s3.bucket",
                problem: s3.pathStyle
                    ? "must be 1 to 255 letters, digits, '.', '-' or '_', got \(quoted(s3.bucket))"
                    : "must be a DNS-compatible bucket name (3 to 63 of a-z, 0-9, '.' and '-', starting and ending with a letter or digit), got \(quoted(s3.bucket)); set s3.path_style=true for other names",
                source: raw?.source)
        }
        if let raw = try reader.raw("s3.prefix", kind: .string) {
            let prefix = raw.text
            if !prefix.isEmpty {
                // The prefix becomes the front of a key: the sanitiser's rules apply to it too.
                let probe = prefix.hasSuffix("/") ? prefix + "x" : prefix
                guard !prefix.hasPrefix("/"), StorageKey.sanitize(probe) == probe, prefix.utf8.count <= 512 else {
                    throw reader.fail("s3.prefix", raw,
                                      "must be up to 512 bytes without a leading '/', empty, '.' or '..' segments, backslashes or control characters")
                }
            }
            s3.prefix = prefix
        }
        s3.accessKeyID = try reader.credential("s3.access_key_id", fallback: awsFallbacks["s3.access_key_id"]!)
        s3.secretAccessKey = try reader.credential("s3.secret_access_key", fallback: awsFallbacks["s3.secret_access_key"]!)
        s3.sessionToken = try reader.credential("s3.session_token", fallback: awsFallbacks["s3.session_token"]!)
        if let id = s3.accessKeyID, id.contains(":") {
            throw ConfigurationError(key: "s3.access_key_id", problem: "must not contain ':'")
        }
        guard required else { return s3 }
        if s3.bucket.isEmpty {
            throw ConfigurationError(key: "s3.bucket", problem: "must be set when storage.kind is s3 (S3_BUCKET)")
        }
        // No keys configured: temporary credentials, if the platform's AWS variables name a source.
        if s3.accessKeyID == nil, s3.secretAccessKey == nil,
            let temporary = AWSCredentialSource.fromEnvironment(reader.environment, region: s3.region)
        {
            switch temporary {
            case .success(let source): s3.temporaryCredentials = source
            case .failure(let error): throw error
            }
            return s3
        }
        if s3.accessKeyID == nil {
            throw ConfigurationError(
                key: "s3.access_key_id",
                problem: "must be set when storage.kind is s3 (S3_ACCESS_KEY_ID or AWS_ACCESS_KEY_ID), unless AWS_ROLE_ARN with AWS_WEB_IDENTITY_TOKEN_FILE or AWS_CONTAINER_CREDENTIALS_FULL_URI / _RELATIVE_URI name temporary credentials")
        }
        if s3.secretAccessKey == nil {
            throw ConfigurationError(
                key: "s3.secret_access_key",
                problem: "must be set when storage.kind is s3 (S3_SECRET_ACCESS_KEY, AWS_SECRET_ACCESS_KEY, or either with _FILE)")
        }
        return s3
    }

    // MARK: - Command line and config file

    /// Rejects flags the worker does not know, and arguments that belong to no flag.
    private static func checkFlags(_ arguments: [String]) throws(ConfigurationError) {
        var known: Set<String> = ["--config"]
        for key in keys {
            known.insert(flagName(forKey: key))
            known.insert("--" + key.replacingOccurrences(of: ".", with: "-"))
        }
        var sawFlag = false
        for (index, argument) in arguments.enumerated() {
            guard argument.hasPrefix("--") else {
                if !sawFlag {
                    throw ConfigurationError(
                        key: "arguments",
                        problem: "unexpected argument at position \(index + 1), options look like --worker-concurrency 8"
                    )
                }
                continue
            }
            sawFlag = true
            let name = argument.split(separator: "=", maxSplits: 1).first.map(String.init) ?? argument
            guard known.contains(name) else {
                throw ConfigurationError(
                    key: "arguments",
                    problem: "unknown flag \(quoted(name)), configuration flags look like --worker-concurrency 8"
                )
            }
        }
    }

    /// Reads and parses the file named by `--config`, if any.
    private static func loadConfigFile(
        cli: CommandLineArgumentsProvider
    ) throws(ConfigurationError) -> ValueReader.ConfigFile? {
        guard let values = ValueReader.cliValues(cli, key: ["config"]) else { return nil }
        let path = values.joined(separator: ",")
        guard !path.isEmpty else {
            throw ConfigurationError(key: "config", problem: "--config needs the path of a JSON or YAML file")
        }
        let isJSON: Bool
        switch URL(fileURLWithPath: path).pathExtension.lowercased() {
        case "json": isJSON = true
        case "yaml", "yml": isJSON = false
        default:
            throw ConfigurationError(key: "config", problem: "\(quoted(path)) must end in .json, .yaml or .yml")
        }
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            let reason = FileManager.default.fileExists(atPath: path) ? "cannot be read" : "does not exist"
            throw ConfigurationError(key: "config", problem: "\(quoted(path)) \(reason)")
        }
        let snapshot: any ConfigSnapshot
        do {
            let name = "config file \(path)"
            if isJSON {
                snapshot = try JSONSnapshot(data: data.bytes, providerName: name, parsingOptions: .default)
            } else {
                snapshot = try YAMLSnapshot(data: data.bytes, providerName: name, parsingOptions: .default)
            }
        } catch {
            // Only the first line: parsers may quote the offending line, which can hold a secret.
            var firstLine = String(describing: error).split(whereSeparator: \.isNewline).first.map(String.init) ?? ""
            if let debugDescription = (error as NSError).userInfo[NSDebugDescriptionErrorKey] as? String {
                firstLine = debugDescription  // JSONSerialization: "Unexpected end of file …"
            }
            if firstLine.hasSuffix(":") { firstLine.removeLast() }
            throw ConfigurationError(
                key: "config",
                problem: "\(quoted(path)) is not valid \(isJSON ? "JSON" : "YAML"): \(firstLine.prefix(200))"
            )
        }
        return ValueReader.ConfigFile(snapshot: snapshot, path: path)
    }
}

private func quoted(_ value: String) -> String {
    ConfigText.quoted(value)
}

// MARK: - Looking up one key

/// Looks keys up in flags, environment and config file, and turns the text into typed values.
private struct ValueReader {
    /// The parsed `--config` file.
    struct ConfigFile {
        var snapshot: any ConfigSnapshot
        var path: String
    }

    /// A value as found, before validation.
    struct Raw {
        /// The value as text; lists are joined with commas.
        var text: String
        /// Where it came from, for errors.
        var source: String
        /// True when the text must not appear in an error.
        var isSecret: Bool
    }

    /// How to read a key from a typed config file.
    enum Kind {
        /// `lines`: a list whose entries may hold commas, so they are joined with line breaks.
        case string, int, double, bool, list, lines
    }

    let cli: CommandLineArgumentsProvider
    let env: EnvironmentVariablesProvider
    let environment: [String: String]
    let file: ConfigFile?

    static func components(_ key: String) -> [String] {
        key.split(separator: ".").map(String.init)
    }

    static func environmentName(forKey key: String) -> String {
        let lookup = try? EnvironmentVariablesProvider(environmentVariables: [:])
            .value(forKey: AbsoluteConfigKey(components(key)), type: .string)
        return lookup?.encodedKey ?? key.uppercased().replacingOccurrences(of: ".", with: "_")
    }

    /// The raw values of a flag, or nil when it is absent.
    static func cliValues(_ cli: CommandLineArgumentsProvider, key: [String]) -> [String]? {
        guard let result = try? cli.value(forKey: AbsoluteConfigKey(key), type: .stringArray),
            case .stringArray(let values)? = result.value?.content
        else { return nil }
        return values
    }

    /// Keys that are secrets although their names do not end in `password` or `secret`.
    static let namedSecrets: Set<String> = ["amqp.url", "s3.secret_access_key", "s3.session_token", "fetch.headers"]

    /// True for keys whose values are secrets: ``namedSecrets`` and `…password`, `…secret`.
    static func isSecret(_ key: String) -> Bool {
        let last = components(key).last ?? key
        return namedSecrets.contains(key) || last.hasSuffix("password") || last.hasSuffix("secret")
    }

    /// Finds a key in flags, then environment (and `*_FILE` for secrets), then the config file.
    func raw(_ key: String, kind: Kind) throws(ConfigurationError) -> Raw? {
        let secret = Self.isSecret(key)
        let parts = Self.components(key)

        // 1. Flags: --fetch-max-bytes, or swift-configuration's own --fetch-max_bytes.
        let dashed = parts.map { $0.replacingOccurrences(of: "_", with: "-") }
        for spelling in [dashed, parts] {
            if let values = Self.cliValues(cli, key: spelling) {
                let flag = "--" + spelling.joined(separator: "-")
                if values.isEmpty {
                    guard kind == .bool else {
                        throw ConfigurationError(key: key, problem: "needs a value", source: "flag \(flag)")
                    }
                    return Raw(text: "true", source: "flag \(flag)", isSecret: secret)
                }
                return Raw(text: values.joined(separator: kind == .lines ? "\n" : ","), source: "flag \(flag)", isSecret: secret)
            }
        }

        // 2. Environment.
        let lookup = try? env.value(forKey: AbsoluteConfigKey(parts), type: .string)
        let variable = lookup?.encodedKey ?? Self.environmentName(forKey: key)
        let fileVariable = variable + "_FILE"
        if secret, let path = environment[fileVariable] {
            if environment[variable] != nil {
                throw ConfigurationError(
                    key: key, problem: "set either \(variable) or \(fileVariable), not both",
                    source: "environment")
            }
            return Raw(text: try readSecret(path: path, key: key, variable: fileVariable),
                       source: "\(fileVariable)=\(path)", isSecret: true)
        }
        if case .string(let text)? = lookup?.value?.content {
            return Raw(text: text, source: "environment variable \(variable)", isSecret: secret)
        }

        // 3. Config file.
        if let file, let text = fileText(file.snapshot, parts: parts, kind: kind) {
            return Raw(text: text, source: "config file \(file.path)", isSecret: secret)
        }
        return nil
    }

    /// A secret from the file named in `<VARIABLE>_FILE`, without its trailing line break.
    private func readSecret(path: String, key: String, variable: String) throws(ConfigurationError) -> String {
        guard let data = FileManager.default.contents(atPath: path) else {
            let reason = FileManager.default.fileExists(atPath: path) ? "cannot be read" : "does not exist"
            throw ConfigurationError(key: key, problem: "the file \(quoted(path)) named by \(variable) \(reason)")
        }
        guard var text = String(validating: data, as: UTF8.self) else {
            throw ConfigurationError(key: key, problem: "the file \(quoted(path)) named by \(variable) is not UTF-8 text")
        }
        while let last = text.last, last.isNewline {
            text.removeLast()
        }
        return text
    }

    /// The value of a key in a JSON or YAML snapshot as text, whatever its type there.
    private func fileText(_ snapshot: any ConfigSnapshot, parts: [String], kind: Kind) -> String? {
        let key = AbsoluteConfigKey(parts)
        func content(_ type: ConfigType) -> ConfigContent? {
            (try? snapshot.value(forKey: key, type: type))?.value?.content
        }
        if case .string(let text)? = content(.string) {
            return text
        }
        // Typed JSON values, and YAML sequences. Asked in an order that keeps `true` from
        // turning into 1 and 1 into `true`.
        let order: [ConfigType]
        switch kind {
        case .bool: order = [.bool, .int, .double]
        case .int, .double: order = [.int, .double, .bool]
        case .string: order = [.int, .double, .bool]
        case .list, .lines: order = [.stringArray, .intArray, .doubleArray, .int, .double]
        }
        for type in order {
            switch content(type) {
            case .int(let value)?: return String(value)
            case .double(let value)?: return String(value)
            case .bool(let value)?: return String(value)
            case .stringArray(let values)?: return values.joined(separator: kind == .lines ? "\n" : ",")
            case .intArray(let values)?: return values.map(String.init).joined(separator: ",")
            case .doubleArray(let values)?: return values.map { String($0) }.joined(separator: ",")
            default: continue
            }
        }
        // Present but of a shape the worker cannot use, such as a list for a number: report it
        // as a value the validators will reject.
        if content(.stringArray) != nil || content(.intArray) != nil || content(.boolArray) != nil {
            return "[list]"
        }
        return nil
    }

    // MARK: Typed values

    func fail(_ key: String, _ raw: Raw, _ expectation: String) -> ConfigurationError {
        let got = raw.isSecret ? "" : ", got \(quoted(raw.text))"
        return ConfigurationError(key: key, problem: expectation + got, source: raw.source)
    }

    func int(_ key: String, in range: ClosedRange<Int>, default value: Int) throws(ConfigurationError) -> Int {
        guard let raw = try raw(key, kind: .int) else { return value }
        let expectation: String
        if range.upperBound == .max {
            expectation = range.lowerBound == 0 ? "must be an integer, 0 or more" : "must be an integer greater than \(range.lowerBound - 1)"
        } else {
            expectation = "must be an integer between \(range.lowerBound) and \(range.upperBound)"
        }
        guard let number = Int(ConfigText.trimmed(raw.text)), range.contains(number) else {
            throw fail(key, raw, expectation)
        }
        return number
    }

    func seconds(_ key: String, allowZero: Bool, default value: Double) throws(ConfigurationError) -> Double {
        guard let raw = try raw(key, kind: .double) else { return value }
        let bound = allowZero ? "0 or more" : "greater than 0"
        guard let seconds = ConfigText.seconds(raw.text), seconds <= 86_400 * 7,
            allowZero ? seconds >= 0 : seconds > 0
        else {
            throw fail(key, raw, "must be a number of seconds \(bound), up to 7 days (like 30, 2.5, 500ms or 2m)")
        }
        return seconds
    }

    func bool(_ key: String, default value: Bool) throws(ConfigurationError) -> Bool {
        guard let raw = try raw(key, kind: .bool) else { return value }
        switch ConfigText.trimmed(raw.text).lowercased() {
        case "true", "1", "yes": return true
        case "false", "0", "no": return false
        default: throw fail(key, raw, "must be true or false (or 1/0, yes/no)")
        }
    }

    func string(_ key: String, default value: String) throws(ConfigurationError) -> String {
        guard let raw = try raw(key, kind: .string) else { return value }
        let text = ConfigText.trimmed(raw.text)
        guard !text.isEmpty else { throw fail(key, raw, "must not be empty") }
        return text
    }

    /// A path that may be left unset; an empty value is the same as unset.
    func optionalString(_ key: String) throws(ConfigurationError) -> String? {
        guard let raw = try raw(key, kind: .string) else { return nil }
        let text = ConfigText.trimmed(raw.text)
        return text.isEmpty ? nil : text
    }

    /// A value checked by `isValid`; `allowed` describes the valid characters for the error.
    func pattern(
        _ key: String, default value: String, allowed: String, isValid: (String) -> Bool
    ) throws(ConfigurationError) -> String {
        guard let raw = try raw(key, kind: .string) else { return value }
        let text = ConfigText.trimmed(raw.text)
        guard isValid(text) else { throw fail(key, raw, "must be 1 to 64 characters of \(allowed)") }
        return text
    }

    /// A credential: the key from flags, environment (or `_FILE`) or config file, else the AWS
    /// variable `fallback` (or `<fallback>_FILE`); nil when none is set or the value is empty.
    /// Control characters are refused, so a value can never split a request header.
    func credential(_ key: String, fallback: String) throws(ConfigurationError) -> String? {
        var found = try raw(key, kind: .string)
        if found == nil {
            let fileVariable = fallback + "_FILE"
            if let path = environment[fileVariable] {
                if environment[fallback] != nil {
                    throw ConfigurationError(
                        key: key, problem: "set either \(fallback) or \(fileVariable), not both", source: "environment")
                }
                found = Raw(text: try readSecret(path: path, key: key, variable: fileVariable),
                            source: "\(fileVariable)=\(path)", isSecret: true)
            } else if let text = environment[fallback] {
                found = Raw(text: text, source: "environment variable \(fallback)", isSecret: Self.isSecret(key))
            }
        }
        guard let raw = found else { return nil }
        let text = ConfigText.trimmed(raw.text)
        if text.isEmpty { return nil }
        guard text.utf8.count <= 4096, !text.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
            throw fail(key, raw, "must be 1 to 4096 bytes without control characters")
        }
        return text
    }

    func choice<Choice: RawRepresentable & CaseIterable>(
        _ key: String, default value: Choice
    ) throws(ConfigurationError) -> Choice where Choice.RawValue == String {
        guard let raw = try raw(key, kind: .string) else { return value }
        if let choice = Choice(rawValue: ConfigText.trimmed(raw.text).lowercased()) {
            return choice
        }
        let names = Choice.allCases.map(\.rawValue)
        throw fail(key, raw, "must be " + names.dropLast().joined(separator: ", ") + " or " + names.last!)
    }

    func logLevel(_ key: String, default value: String) throws(ConfigurationError) -> String {
        guard let raw = try raw(key, kind: .string) else { return value }
        if let level = Logger.Level(rawValue: ConfigText.trimmed(raw.text).lowercased()) {
            return level.rawValue
        }
        let names = Logger.Level.allCases.map(\.rawValue)
        throw fail(key, raw, "must be " + names.dropLast().joined(separator: ", ") + " or " + names.last!)
    }

    func queueName(_ key: String, default value: String) throws(ConfigurationError) -> String {
        guard let raw = try raw(key, kind: .string) else { return value }
        let name = ConfigText.trimmed(raw.text)
        guard !name.isEmpty, name.utf8.count <= 255 else {
            throw fail(key, raw, "must be a queue name of 1 to 255 bytes")
        }
        guard !name.hasPrefix("amq.") else {
            throw fail(key, raw, "must not start with \"amq.\", the broker reserves those names")
        }
        return name
    }

    func userAgent(_ key: String, default value: String) throws(ConfigurationError) -> String {
        guard let raw = try raw(key, kind: .string) else { return value }
        let text = ConfigText.trimmed(raw.text)
        guard !text.isEmpty, text.utf8.count <= 1024,
            !text.unicodeScalars.contains(where: { $0.properties.generalCategory == .control })
        else {
            throw fail(key, raw, "must be 1 to 1024 bytes without control characters")
        }
        return text
    }

    func bindAddress(_ key: String, default value: String) throws(ConfigurationError) -> String {
        guard let raw = try raw(key, kind: .string) else { return value }
        var text = ConfigText.trimmed(raw.text)
        if text.hasPrefix("[") && text.hasSuffix("]") {
            text = String(text.dropFirst().dropLast())
        }
        guard NetworkSyntax.isIPv6Address(text) || NetworkSyntax.isHostName(text) else {
            throw fail(key, raw, "must be an IP address or host name to listen on, like 0.0.0.0 or ::")
        }
        return text
    }

    func networks(_ key: String, default value: [String]) throws(ConfigurationError) -> [String] {
        guard let raw = try raw(key, kind: .list) else { return value }
        var networks: [String] = []
        for entry in raw.text.split(separator: ",") {
            let text = ConfigText.trimmed(String(entry))
            if text.isEmpty { continue }
            switch NetworkSyntax.normalizedCIDR(text) {
            case .success(let network): networks.append(network)
            case .failure(let problem):
                throw ConfigurationError(
                    key: key, problem: "must be a comma-separated list of CIDR blocks, but \(problem.message)",
                    source: raw.source)
            }
        }
        return networks
    }

    /// A value parsed by `parse`, whose failure completes "KEY …"; nil when the key is not set.
    func parsed<Value>(
        _ key: String, kind: Kind, _ parse: (String) -> Result<Value, ConfigProblem>
    ) throws(ConfigurationError) -> Value? {
        guard let raw = try raw(key, kind: kind) else { return nil }
        switch parse(raw.text) {
        case .success(let value): return value
        case .failure(let problem): throw ConfigurationError(key: key, problem: problem.text, source: raw.source)
        }
    }

    func delays(_ key: String, default value: [Int]) throws(ConfigurationError) -> [Int] {
        guard let raw = try raw(key, kind: .list) else { return value }
        var delays: [Int] = []
        for entry in raw.text.split(separator: ",") {
            let text = ConfigText.trimmed(String(entry))
            if text.isEmpty { continue }
            guard let seconds = ConfigText.seconds(text) else {
                throw ConfigurationError(
                    key: key, problem: "must be a comma-separated list of durations like 5s,30s,2m,1h, got \(quoted(text))",
                    source: raw.source)
            }
            guard seconds >= 1, seconds.rounded(.down) == seconds, seconds <= 86_400 * 7 else {
                throw ConfigurationError(
                    key: key,
                    problem: "delays must be whole seconds from 1s to 7d, because retry queue names are made from them, got \(quoted(text))",
                    source: raw.source)
            }
            delays.append(Int(seconds))
        }
        guard !delays.isEmpty else {
            throw fail(key, raw, "must list at least one delay, like 5s,30s,2m")
        }
        return delays
    }
}
