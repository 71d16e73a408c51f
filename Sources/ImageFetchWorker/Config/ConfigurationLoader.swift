import Configuration
import Foundation

/// Reads and validates ``WorkerConfiguration`` at start-up.
///
/// The keys are the entries of ``ConfigurationKey/all``. swift-configuration's `ConfigReader`
/// looks each one up in a hierarchy of providers, and the first that has it wins:
///
/// 1. a command-line flag: the key with dots and underscores turned into dashes,
///    `fetch.max_bytes` → `--fetch-max-bytes 1048576` or `--fetch-max-bytes=1048576`.
///    `CommandLineArgumentsProvider`'s own spelling, which keeps the underscores
///    (`--fetch-max_bytes`), is accepted too. A boolean flag without a value means true.
/// 2. an environment variable, as `EnvironmentVariablesProvider` encodes the key:
///    `fetch.max_bytes` → `FETCH_MAX_BYTES`. A secret key can also be given as the path of a
///    file that holds it, in `<VARIABLE>_FILE` (`AMQP_URL_FILE=/run/secrets/amqp`).
/// 3. the config file named by `--config FILE`: JSON (`.json`) or YAML (`.yaml`, `.yml`), with
///    nested objects or dotted keys. Keys the worker does not know are ignored.
/// 4. for the `s3.*` credentials only: `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
///    `AWS_SESSION_TOKEN` (or their `_FILE` twins).
/// 5. the default: the initial value of the field in ``WorkerConfiguration``.
///
/// Every value is validated, and the first bad one throws a ``ConfigurationError`` that names
/// the key, the problem and where the value came from, without any secret. An unknown
/// command-line flag is an error too, so that a typo does not silently fall back to a default.
///
/// Loading is pure apart from reading the config file and `*_FILE` secrets: it takes the
/// arguments and environment as parameters and touches no global state.
package enum ConfigurationLoader {
    /// Reads flags, environment, the `--config` file and defaults, and validates the result.
    ///
    /// - Parameters:
    ///   - arguments: The command-line arguments after the subcommand, such as
    ///     `["--worker-concurrency", "8", "--config", "w.yaml"]`. Only `--config` and the
    ///     configuration flags (see ``flagName(forKey:)``) are allowed.
    ///   - environment: The process environment, such as `ProcessInfo.processInfo.environment`.
    /// - Returns: The validated configuration.
    /// - Throws: ``ConfigurationError`` for the first invalid value, unknown flag, or unreadable
    ///   config or secret file. Exit with ``ConfigurationError/exitStatus`` (78).
    package static func load(
        arguments: [String],
        environment: [String: String]
    ) throws(ConfigurationError) -> WorkerConfiguration {
        try resolve(arguments: arguments, environment: environment).configuration
    }

    /// Like ``load(arguments:environment:)``, and also says where each value came from.
    package static func resolve(
        arguments: [String],
        environment: [String: String]
    ) throws(ConfigurationError) -> ResolvedConfiguration {
        let cli = CommandLineArgumentsProvider(arguments: ["image-fetch-worker"] + (try canonicalFlags(arguments)))
        let file = try loadConfigFile(cli: cli)
        let secretKeys = ConfigurationKey.all.filter(\.isSecret).map(\.name)
        var providers: [any ConfigProvider] = [
            cli,
            VariableFileProvider(
                providerName: "secret file", environment: environment,
                variables: Dictionary(
                    uniqueKeysWithValues: secretKeys.map { ($0, ConfigurationKey.variable(forKey: $0)) }),
                plain: false),
            EnvironmentVariablesProvider(
                environmentVariables: environment,
                secretsSpecifier: .specific(Set(secretKeys.map(ConfigurationKey.variable(forKey:))))),
        ]
        if let file { providers.append(file) }
        providers.append(
            VariableFileProvider(
                providerName: "AWS variable", environment: environment, variables: ConfigurationKey.awsFallbacks,
                plain: true))
        let last = LastAccess()
        let lookup = Lookup(
            reader: ConfigReader(providers: providers, accessReporter: last), last: last,
            cliName: cli.providerName, filePath: file?.path)

        var resolved = ResolvedConfiguration()
        var derived: [ConfigurationKey] = []
        for key in ConfigurationKey.all {
            guard let found = try lookup.find(key) else {
                if key.derive != nil { derived.append(key) }
                continue
            }
            do throws(ConfigurationKey.Invalid) {
                try key.apply(found.content, &resolved.configuration)
            } catch {
                var problem = error.problem
                if error.showsValue && !key.isSecret {
                    problem += ", got " + ConfigText.quoted(Parse.display(found.content))
                }
                throw ConfigurationError(key: key.name, problem: problem, source: found.source.text)
            }
            resolved.sources[key.name] = found.source
        }
        // After every key is read: such a default depends on others.
        for key in derived {
            key.derive?(&resolved.configuration)
        }
        // No S3 keys configured: temporary credentials, if the platform's AWS variables name a
        // source (web identity, the container credentials endpoint). Only for S3 storage: a
        // worker that stores files must not stop on a pod's AWS variables it has no use for.
        let s3 = resolved.configuration.s3
        if resolved.configuration.storage.kind == .s3, s3.accessKeyID == nil, s3.secretAccessKey == nil,
            let temporary = AWSCredentialSource.fromEnvironment(environment, region: s3.region)
        {
            switch temporary {
            case .success(let source): resolved.configuration.s3.temporaryCredentials = source
            case .failure(let error): throw error
            }
        }
        try checkTogether(resolved)
        return resolved
    }

    /// Every configuration key, in the order of the documentation.
    package static var keys: [String] { ConfigurationKey.all.map(\.name) }

    /// The command-line flag for a key: `fetch.max_bytes` → `--fetch-max-bytes`.
    package static func flagName(forKey key: String) -> String {
        ConfigurationKey.flag(forKey: key)
    }

    /// The environment variable for a key: `fetch.max_bytes` → `FETCH_MAX_BYTES`.
    package static func environmentVariableName(forKey key: String) -> String {
        ConfigurationKey.variable(forKey: key)
    }

    // MARK: - Rules between keys

    private static func checkTogether(_ resolved: ResolvedConfiguration) throws(ConfigurationError) {
        let config = resolved.configuration
        func fail(_ key: String, _ problem: String, sourceOf other: String? = nil) -> ConfigurationError {
            ConfigurationError(key: key, problem: problem, source: resolved.sources[other ?? key]?.text)
        }
        if config.amqp.tls.certFile != nil && config.amqp.tls.keyFile == nil {
            throw fail(
                "amqp.tls.key_file", "must be set when amqp.tls.cert_file is set", sourceOf: "amqp.tls.cert_file")
        }
        if config.amqp.tls.keyFile != nil && config.amqp.tls.certFile == nil {
            throw fail("amqp.tls.cert_file", "must be set when amqp.tls.key_file is set", sourceOf: "amqp.tls.key_file")
        }
        if let certificate = config.amqp.tls.certFile, let key = config.amqp.tls.keyFile,
            !Check.pemPair(certificate: certificate, key: key)
        {
            throw fail("amqp.tls.key_file", "is not the private key of amqp.tls.cert_file's certificate")
        }
        let names = [
            "queue.jobs": config.queue.jobs, "queue.results": config.queue.results, "queue.dead": config.queue.dead,
        ]
        for (key, other) in [
            ("queue.results", "queue.jobs"), ("queue.dead", "queue.jobs"), ("queue.dead", "queue.results"),
        ]
        where names[key] == names[other] {
            throw fail(key, "must differ from \(other), both are \(ConfigText.quoted(names[key] ?? ""))")
        }
        // The delay queues are named after the jobs queue, and AMQP names stop at 255 bytes.
        let delayQueues = Topology.delayQueues(config).map(\.name)
        if let long = delayQueues.max(by: { $0.utf8.count < $1.utf8.count }), long.utf8.count > 255 {
            throw fail(
                "queue.jobs",
                "is too long for the names of its delay queues: \(ConfigText.quoted(long, limit: 60)) is \(long.utf8.count) bytes, over AMQP's 255"
            )
        }
        // scheduler.*: ranges that depend on worker.concurrency, checked where a value was given
        // (the default initial limit may be above a small concurrency: the limiter caps it).
        let scheduler = config.scheduler
        let maxLimit = scheduler.resolvedMaxLimit(concurrency: config.worker.concurrency)
        for (key, value, range) in [
            ("scheduler.max_limit", scheduler.maxLimit, 0...config.worker.concurrency),
            ("scheduler.min_limit", scheduler.minLimit, 1...maxLimit),
            ("scheduler.initial_limit", scheduler.initialLimit, min(scheduler.minLimit, maxLimit)...maxLimit),
        ] where resolved.sources[key] != nil && !range.contains(value) {
            throw fail(key, "must be an integer between \(range.lowerBound) and \(range.upperBound), got \"\(value)\"")
        }
        let s3 = config.s3
        if !s3.bucket.isEmpty, !S3Addressing.isValidBucket(s3.bucket, pathStyle: s3.pathStyle) {
            throw fail(
                "s3.bucket",
                s3.pathStyle
                    ? "must be 1 to 255 letters, digits, '.', '-' or '_', got \(ConfigText.quoted(s3.bucket))"
                    : "must be a DNS-compatible bucket name (3 to 63 of a-z, 0-9, '.' and '-', starting and ending with a letter or digit), got \(ConfigText.quoted(s3.bucket)); set s3.path_style=true for other names"
            )
        }
        guard config.storage.kind == .s3 else { return }
        if s3.bucket.isEmpty {
            throw fail("s3.bucket", "must be set when storage.kind is s3 (S3_BUCKET)")
        }
        guard s3.temporaryCredentials == nil else { return }
        if s3.accessKeyID == nil {
            throw fail(
                "s3.access_key_id",
                "must be set when storage.kind is s3 (S3_ACCESS_KEY_ID or AWS_ACCESS_KEY_ID), unless AWS_ROLE_ARN with AWS_WEB_IDENTITY_TOKEN_FILE or AWS_CONTAINER_CREDENTIALS_FULL_URI / _RELATIVE_URI name temporary credentials"
            )
        }
        if s3.secretAccessKey == nil {
            throw fail(
                "s3.secret_access_key",
                "must be set when storage.kind is s3 (S3_SECRET_ACCESS_KEY, AWS_SECRET_ACCESS_KEY, or either with _FILE)"
            )
        }
    }

    // MARK: - Command line (the config file: ConfigurationLoader+File.swift)

    /// Checks the flags and spells each one as `CommandLineArgumentsProvider` encodes its key
    /// (`--fetch-max_bytes`), so that both spellings reach the same key.
    ///
    /// The provider reads a flag with no value as the boolean `true`, which a text key would
    /// then take as its value (an unquoted empty shell variable, `--queue-jobs $Q`, made the
    /// queue `true`); and it joins the values of a repeated flag with commas, which made one queue
    /// name of two and split `fetch.headers` wrongly. So the values are counted here: one for a
    /// scalar, at most one for a boolean, at least one for a list; a scalar's flag is given once;
    /// the lines of a repeated `fetch.headers` are joined here.
    private static func canonicalFlags(_ arguments: [String]) throws(ConfigurationError) -> [String] {
        var flags: [(given: String, library: String, key: ConfigurationKey?, values: [String])] = []
        for (index, argument) in arguments.enumerated() {
            guard argument.hasPrefix("--") else {
                guard !flags.isEmpty else {
                    throw ConfigurationError(
                        key: "arguments",
                        problem:
                            "unexpected argument at position \(index + 1), options look like --worker-concurrency 8")
                }
                flags[flags.count - 1].values.append(argument)
                continue
            }
            let parts = argument.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let given = String(parts[0])
            let spelling: (library: String, key: ConfigurationKey?)? =
                given == "--config"
                ? ("--config", nil) : ConfigurationKey.bySpelling[given].map { ($0.library, $0.key) }
            guard let spelling else {
                throw ConfigurationError(
                    key: "arguments",
                    problem:
                        "unknown flag \(ConfigText.quoted(String(parts[0]))), configuration flags look like --worker-concurrency 8"
                )
            }
            flags.append((given, spelling.library, spelling.key, parts.count == 2 ? [String(parts[1])] : []))
        }
        var canonical: [String] = []
        var linesAt: [String: Int] = [:]
        var seen: Set<String> = []
        for flag in flags {
            let kind = flag.key?.kind ?? .string
            let repeated = !seen.insert(flag.library).inserted
            let problem: String? =
                if repeated, kind != .list, kind != .lines {
                    // The provider would join the two with a comma into one value.
                    "is given twice"
                } else {
                    switch kind {
                    case .bool: flag.values.count > 1 ? "takes one value, got \(flag.values.count)" : nil
                    case .list: flag.values.isEmpty ? "needs a value" : nil
                    case .int, .seconds, .string, .lines:
                        flag.values.isEmpty
                            ? "needs a value"
                            : flag.values.count > 1 ? "takes one value, got \(flag.values.count)" : nil
                    }
                }
            if let problem {
                throw ConfigurationError(
                    key: flag.key?.name ?? "config", problem: problem, source: "flag \(flag.given)")
            }
            if kind == .lines, let at = linesAt[flag.library] {
                canonical[at] += "\n" + flag.values[0]
                continue
            }
            if kind == .lines { linesAt[flag.library] = canonical.count }
            if flag.values.isEmpty { canonical.append(flag.library) }
            canonical.append(contentsOf: flag.values.map { flag.library + "=" + $0 })
        }
        return canonical
    }
}

/// The configuration and where each value came from; keys that are absent took their default.
package struct ResolvedConfiguration: Sendable {
    package var configuration = WorkerConfiguration()
    package var sources: [String: ConfigurationSource] = [:]

    /// Each key with its value as `config` prints it (secrets redacted) and its source.
    package var rows: [(key: ConfigurationKey, value: String, source: ConfigurationSource)] {
        ConfigurationKey.all.map { key in
            (key, key.show(configuration) ?? "(unset)", sources[key.name] ?? .default)
        }
    }
}

/// Where a value came from.
package struct ConfigurationSource: Sendable, Equatable {
    /// The four layers, from the highest.
    package enum Layer: String, Sendable {
        case flag, env, file, `default`
    }

    package var layer: Layer
    /// As errors say it: `flag --fetch-max-bytes`, `environment variable FETCH_MAX_BYTES`,
    /// `AMQP_URL_FILE=/run/secrets/amqp`, `config file worker.yaml`.
    package var text: String
    /// Within the layer: `--fetch-max-bytes`, `FETCH_MAX_BYTES`, `AMQP_URL_FILE=/run/secrets/amqp`,
    /// `worker.yaml`; empty for the default.
    package var detail: String

    package init(layer: Layer, text: String, detail: String) {
        self.layer = layer
        self.text = text
        self.detail = detail
    }

    package static let `default` = ConfigurationSource(layer: .default, text: "default", detail: "")
}

/// Reads one key through the `ConfigReader` and reports which provider answered.
private struct Lookup {
    let reader: ConfigReader
    let last: LastAccess
    let cliName: String
    let filePath: String?

    struct Found {
        var content: ConfigContent
        var source: ConfigurationSource
    }

    /// The value of the highest provider that has the key, or nil when none has it.
    func find(_ key: ConfigurationKey) throws(ConfigurationError) -> Found? {
        var mismatch: String?
        for type in key.kind.lookupTypes {
            read(key, as: type)
            guard let event = last.take() else { return nil }
            mismatch = nil
            for result in event.providerResults {
                switch result.result {
                case .success(let lookup):
                    guard let value = lookup.value else { continue }
                    return try found(
                        value.content, provider: result.providerName, encodedKey: lookup.encodedKey, key: key)
                case .failure(let error as ConfigurationError):
                    throw error
                case .failure:
                    // The provider has the key, but not as this type: ask for the next type.
                    mismatch = result.providerName
                }
            }
            if mismatch == nil { return nil }
        }
        // A value none of the key's types can read (a JSON number for the header lines): an error,
        // not the default in silence.
        let source = mismatch == "config file" ? "config file \(filePath ?? "")" : mismatch
        throw ConfigurationError(key: key.name, problem: "has a value of a type this key does not take", source: source)
    }

    private func found(
        _ content: ConfigContent, provider: String, encodedKey: String, key: ConfigurationKey
    ) throws(ConfigurationError) -> Found {
        switch provider {
        case cliName:
            let source = ConfigurationSource(layer: .flag, text: "flag \(key.flag)", detail: key.flag)
            // The provider splits flag values at commas and collects repeated flags: join them
            // again, so a flag means what the same text means in a variable.
            guard case .stringArray(let values) = content else { return Found(content: content, source: source) }
            guard !values.isEmpty else {
                throw ConfigurationError(key: key.name, problem: "needs a value", source: source.text)
            }
            return Found(content: .string(values.joined(separator: ",")), source: source)
        case "config file":
            return Found(
                content: content,
                source: ConfigurationSource(layer: .file, text: "config file \(filePath ?? "")", detail: filePath ?? "")
            )
        case "secret file":
            return Found(
                content: content, source: ConfigurationSource(layer: .env, text: encodedKey, detail: encodedKey))
        default:
            return Found(
                content: content,
                source: ConfigurationSource(
                    layer: .env, text: "environment variable \(encodedKey)", detail: encodedKey))
        }
    }

    private func read(_ key: ConfigurationKey, as type: ConfigType) {
        let name = key.configKey
        let secret = key.isSecret
        switch type {
        case .string: _ = reader.string(forKey: name, isSecret: secret)
        case .int: _ = reader.int(forKey: name, isSecret: secret)
        case .double: _ = reader.double(forKey: name, isSecret: secret)
        case .bool: _ = reader.bool(forKey: name, isSecret: secret)
        case .stringArray: _ = reader.stringArray(forKey: name, isSecret: secret)
        case .intArray: _ = reader.intArray(forKey: name, isSecret: secret)
        case .doubleArray: _ = reader.doubleArray(forKey: name, isSecret: secret)
        case .boolArray: _ = reader.boolArray(forKey: name, isSecret: secret)
        case .bytes: _ = reader.bytes(forKey: name, isSecret: secret)
        case .byteChunkArray: _ = reader.byteChunkArray(forKey: name, isSecret: secret)
        }
    }
}
