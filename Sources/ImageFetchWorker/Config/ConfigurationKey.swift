import Configuration
import Logging

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One configuration key: its name, how a value is read, checked and stored, whether it is a
/// secret, and one line of help.
///
/// ``ConfigurationKey/all`` is the single list of keys. The loader reads exactly these keys,
/// `run --help` and the `config` command print them, and the tests walk them; adding a key is
/// one entry there plus its field, with its default, in ``WorkerConfiguration``.
package struct ConfigurationKey: Sendable {
    /// The dotted name, such as `fetch.max_bytes`.
    package let name: String
    /// One line of meaning for `run --help` and the docs.
    package let help: String
    /// True when the value must never be printed: errors, `config` and logs redact it.
    package let isSecret: Bool
    /// The kind of value, which decides what the providers are asked for.
    package let kind: Kind
    /// The default as documented, when it is not simply the field's initial value.
    package let defaultOverride: String?
    /// Parses and checks a value found by a provider and stores it in the configuration.
    let apply: @Sendable (ConfigContent, inout WorkerConfiguration) throws(Invalid) -> Void
    /// The value as the configuration holds it, for `config` and `--help`; nil when unset.
    let show: @Sendable (WorkerConfiguration) -> String?
    /// Fills in a default that depends on other keys, when no provider has this key.
    let derive: (@Sendable (inout WorkerConfiguration) -> Void)?

    /// The kinds of value, each with the types the providers are asked for, in order.
    package enum Kind: Sendable {
        case int, seconds, bool, string, list
        /// A list whose entries may hold commas (`fetch.headers`): text is taken whole, and only
        /// an array (repeated flags, a YAML list) is joined, with line breaks.
        case lines

        /// Typed sources (JSON, YAML) answer only for their own type: the first that answers wins.
        /// The array types come last so that a list where one value belongs is still found, and
        /// then refused by the parser with its own message.
        var lookupTypes: [ConfigType] {
            switch self {
            case .int: [.int, .string, .double, .stringArray, .intArray, .doubleArray, .boolArray]
            case .seconds: [.string, .double, .stringArray, .intArray, .doubleArray, .boolArray]
            case .bool: [.bool, .string, .int, .stringArray, .intArray, .doubleArray, .boolArray]
            case .string: [.string, .int, .double, .bool, .stringArray, .intArray, .doubleArray, .boolArray]
            case .list: [.stringArray, .intArray, .doubleArray, .string, .int, .double]
            case .lines: [.string, .stringArray]
            }
        }
    }

    /// Why a value is refused: ``problem`` reads like `must be an integer between 1 and 4096`.
    /// With ``showsValue`` the loader adds `, got "…"` unless the key is a secret.
    package struct Invalid: Error {
        package var problem: String
        package var showsValue: Bool

        init(_ problem: String, showsValue: Bool = true) {
            self.problem = problem
            self.showsValue = showsValue
        }
    }

    init(
        _ name: String, _ kind: Kind, secret: Bool = false, default defaultOverride: String? = nil,
        help: String,
        apply: @escaping @Sendable (ConfigContent, inout WorkerConfiguration) throws(Invalid) -> Void,
        show: @escaping @Sendable (WorkerConfiguration) -> String?,
        derive: (@Sendable (inout WorkerConfiguration) -> Void)? = nil
    ) {
        self.name = name
        self.kind = kind
        self.isSecret = secret
        self.defaultOverride = defaultOverride
        self.help = help
        self.apply = apply
        self.show = show
        self.derive = derive
    }

    /// The command-line flag: `fetch.max_bytes` → `--fetch-max-bytes`.
    package var flag: String {
        Self.flag(forKey: name)
    }

    /// The environment variable: `fetch.max_bytes` → `FETCH_MAX_BYTES`, as
    /// `EnvironmentVariablesProvider` encodes it.
    package var variable: String {
        Self.variable(forKey: name)
    }

    /// The default shown by `--help` and the docs: ``defaultOverride``, else the field's initial
    /// value; `(unset)` for optional keys.
    package var defaultText: String {
        defaultOverride ?? show(WorkerConfiguration()) ?? "(unset)"
    }

    /// Each key by both spellings of its flag (`--fetch-max-bytes`, and the provider's own
    /// `--fetch-max_bytes`), with the provider's spelling; `--config` is not a key.
    static let bySpelling: [String: (library: String, key: ConfigurationKey)] = {
        var spellings: [String: (library: String, key: ConfigurationKey)] = [:]
        for key in all {
            let library = "--" + ConfigText.replacing(["."], with: "-", in: key.name)
            spellings[library] = (library, key)
            spellings[key.flag] = (library, key)
        }
        return spellings
    }()

    static func flag(forKey key: String) -> String {
        "--" + ConfigText.replacing([".", "_"], with: "-", in: key)
    }

    static func variable(forKey key: String) -> String {
        ConfigText.replacing(["."], with: "_", in: key.uppercased())
    }

    /// The key as swift-configuration addresses it.
    var configKey: ConfigKey {
        ConfigKey(name.split(separator: ".").map(String.init))
    }
}

// MARK: - Entry makers: one per kind of value

extension ConfigurationKey {
    typealias Field<Value> = WritableKeyPath<WorkerConfiguration, Value> & Sendable

    static func int(
        _ name: String, _ field: Field<Int>, in range: ClosedRange<Int>, default text: String? = nil,
        derive: (@Sendable (inout WorkerConfiguration) -> Void)? = nil, help: String
    ) -> Self {
        Self(
            name, .int, default: text, help: help,
            apply: { content, config throws(Invalid) in
                config[keyPath: field] = try Parse.int(content, in: range)
            }, show: { String($0[keyPath: field]) }, derive: derive)
    }

    /// `atLeast`: the shortest value but 0 (a repeating timer's period, which must not spin).
    static func seconds(
        _ name: String, _ field: Field<Double>, allowZero: Bool, atLeast: Double = 0, help: String
    ) -> Self {
        Self(
            name, .seconds, help: help,
            apply: { content, config throws(Invalid) in
                config[keyPath: field] = try Parse.seconds(content, allowZero: allowZero, atLeast: atLeast)
            }, show: { Parse.showSeconds($0[keyPath: field]) })
    }

    static func bool(_ name: String, _ field: Field<Bool>, help: String) -> Self {
        Self(
            name, .bool, help: help,
            apply: { content, config throws(Invalid) in
                config[keyPath: field] = try Parse.bool(content)
            }, show: { String($0[keyPath: field]) })
    }

    /// A value checked by `check`, which returns the value to store or throws why not.
    static func text(
        _ name: String, _ field: Field<String>, help: String,
        check: @escaping @Sendable (String) throws(Invalid) -> String
    ) -> Self {
        Self(
            name, .string, help: help,
            apply: { content, config throws(Invalid) in
                config[keyPath: field] = try check(try Parse.scalar(content))
            }, show: { $0[keyPath: field].isEmpty ? nil : $0[keyPath: field] })
    }

    /// A value that may be left unset; empty is the same as unset.
    static func optionalText(
        _ name: String, _ field: Field<String?>, secret: Bool = false, help: String,
        check: @escaping @Sendable (String) throws(Invalid) -> String = { $0 }
    ) -> Self {
        Self(
            name, .string, secret: secret, help: help,
            apply: { content, config throws(Invalid) in
                let text = ConfigText.trimmed(try Parse.scalar(content))
                config[keyPath: field] = text.isEmpty ? nil : try check(text)
            },
            show: { config in
                guard let value = config[keyPath: field] else { return nil }
                return secret ? "<redacted>" : value
            })
    }

    static func choice<Choice: RawRepresentable & CaseIterable & Sendable>(
        _ name: String, _ field: Field<Choice>, help: String
    ) -> Self where Choice.RawValue == String {
        Self(
            name, .string, help: help,
            apply: { content, config throws(Invalid) in
                let text = ConfigText.trimmed(try Parse.scalar(content)).lowercased()
                guard let choice = Choice(rawValue: text) else {
                    throw Invalid("must be " + Parse.alternatives(Choice.allCases.map(\.rawValue)))
                }
                config[keyPath: field] = choice
            }, show: { $0[keyPath: field].rawValue })
    }

    /// A value parsed whole by `parse` (whose problem completes "KEY …"); an array's items are
    /// joined with `separator` first.
    static func parsed<Value: Sendable>(
        _ name: String, _ field: Field<Value>, separator: String = ",", secret: Bool = false, help: String,
        show: @escaping @Sendable (Value) -> String?,
        parse: @escaping @Sendable (String) -> Result<Value, ConfigProblem>
    ) -> Self {
        Self(
            name, separator == "\n" ? .lines : .list, secret: secret, help: help,
            apply: { content, config throws(Invalid) in
                let text: String
                switch content {
                case .stringArray(let values): text = values.joined(separator: separator)
                default: text = try Parse.scalar(content)
                }
                switch parse(text) {
                case .success(let value): config[keyPath: field] = value
                case .failure(let problem): throw Invalid(problem.text, showsValue: false)
                }
            }, show: { show($0[keyPath: field]) })
    }

    /// A comma-separated list (or a JSON or YAML array), each item checked by `item`.
    static func list<Item: Sendable>(
        _ name: String, _ field: Field<[Item]>, secret: Bool = false, help: String,
        show: @escaping @Sendable ([Item]) -> String,
        parse: @escaping @Sendable ([String]) throws(Invalid) -> [Item]
    ) -> Self {
        Self(
            name, .list, secret: secret, help: help,
            apply: { content, config throws(Invalid) in
                config[keyPath: field] = try parse(try Parse.items(content))
            }, show: { $0[keyPath: field].isEmpty ? nil : show($0[keyPath: field]) })
    }
}

// MARK: - Parsing found values

/// Turns what a provider found into typed values. Values that a typed source (a JSON number,
/// a YAML boolean) already typed are taken as they are; text is parsed with the worker's
/// rules (durations with units, booleans as yes/no/1/0), which are wider than the library's.
enum Parse {
    typealias Invalid = ConfigurationKey.Invalid

    /// The value as one piece of text; a list is refused.
    static func scalar(_ content: ConfigContent) throws(Invalid) -> String {
        switch content {
        case .string(let text): return text
        case .int(let value): return String(value)
        case .double(let value): return String(value)
        case .bool(let value): return String(value)
        default: throw Invalid("must be a single value, not a list", showsValue: false)
        }
    }

    /// The value as a list of items: an array as it is, text split at commas.
    static func items(_ content: ConfigContent) throws(Invalid) -> [String] {
        let items: [String]
        switch content {
        case .stringArray(let values): items = values.flatMap { $0.split(separator: ",").map(String.init) }
        case .intArray(let values): items = values.map(String.init)
        case .doubleArray(let values): items = values.map { String($0) }
        default: items = try scalar(content).split(separator: ",").map(String.init)
        }
        return items.map(ConfigText.trimmed).filter { !$0.isEmpty }
    }

    static func int(_ content: ConfigContent, in range: ClosedRange<Int>) throws(Invalid) -> Int {
        let expectation: String
        if range.upperBound == .max {
            expectation =
                range.lowerBound == 0
                ? "must be an integer, 0 or more" : "must be an integer greater than \(range.lowerBound - 1)"
        } else {
            expectation = "must be an integer between \(range.lowerBound) and \(range.upperBound)"
        }
        let number: Int?
        switch content {
        case .int(let value): number = value
        case .string(let text): number = Int(ConfigText.trimmed(text))
        default: number = nil
        }
        guard let number, range.contains(number) else { throw Invalid(expectation) }
        return number
    }

    static func seconds(_ content: ConfigContent, allowZero: Bool, atLeast: Double = 0) throws(Invalid) -> Double {
        let bound =
            atLeast > 0
            ? "\(allowZero ? "0 (off) or " : "")at least \(showSeconds(atLeast))"
            : allowZero ? "0 or more" : "greater than 0"
        let expectation = "must be a number of seconds \(bound), up to 7 days (like 30, 2.5, 500ms or 2m)"
        let value: Double?
        switch content {
        case .double(let number): value = number
        case .int(let number): value = Double(number)
        case .string(let text): value = ConfigText.seconds(text)
        default: value = nil
        }
        guard let seconds = value, seconds.isFinite, seconds <= 86_400 * 7, allowZero ? seconds >= 0 : seconds > 0,
            seconds == 0 || seconds >= atLeast
        else {
            throw Invalid(expectation)
        }
        return seconds
    }

    static func showSeconds(_ seconds: Double) -> String {
        seconds.rounded() == seconds && abs(seconds) < 1e15 ? String(Int(seconds)) : String(seconds)
    }

    static func bool(_ content: ConfigContent) throws(Invalid) -> Bool {
        switch content {
        case .bool(let value): return value
        case .int(0): return false
        case .int(1): return true
        case .string(let text):
            switch ConfigText.trimmed(text).lowercased() {
            case "true", "1", "yes": return true
            case "false", "0", "no": return false
            default: break
            }
        default: break
        }
        throw Invalid("must be true or false (or 1/0, yes/no)")
    }

    /// `a, b or c`.
    static func alternatives(_ names: [String]) -> String {
        names.dropLast().joined(separator: ", ") + " or " + (names.last ?? "")
    }

    /// The value as written, for `got "…"` in errors.
    static func display(_ content: ConfigContent) -> String {
        switch content {
        case .string(let text): text
        case .int(let value): String(value)
        case .double(let value): String(value)
        case .bool(let value): String(value)
        case .stringArray(let values): "[" + values.joined(separator: ", ") + "]"
        case .intArray(let values): "[" + values.map(String.init).joined(separator: ", ") + "]"
        case .doubleArray(let values): "[" + values.map { String($0) }.joined(separator: ", ") + "]"
        case .boolArray(let values): "[" + values.map(String.init).joined(separator: ", ") + "]"
        case .bytes, .byteChunkArray: "[bytes]"
        }
    }
}

/// The checks of `text` keys, shared by several entries.
enum Check {
    static func nonEmpty(_ text: String) throws(ConfigurationKey.Invalid) -> String {
        let text = ConfigText.trimmed(text)
        guard !text.isEmpty else { throw .init("must not be empty") }
        return text
    }

    static func queueName(_ text: String) throws(ConfigurationKey.Invalid) -> String {
        let name = ConfigText.trimmed(text)
        guard !name.isEmpty, name.utf8.count <= 255 else { throw .init("must be a queue name of 1 to 255 bytes") }
        guard !name.hasPrefix("amq.") else {
            throw .init("must not start with \"amq.\", the broker reserves those names")
        }
        return name
    }

    /// Up to `limit` bytes without control characters, so that it can never split a header.
    static func headerSafe(_ text: String, limit: Int) throws(ConfigurationKey.Invalid) -> String {
        let text = ConfigText.trimmed(text)
        guard !text.isEmpty, text.utf8.count <= limit,
            !text.unicodeScalars.contains(where: { $0.properties.generalCategory == .control })
        else { throw .init("must be 1 to \(limit) bytes without control characters") }
        return text
    }

    /// A file the worker can read now; checked at start-up so that a typo stops the process
    /// instead of failing every fetch later.
    static func readableFile(_ path: String) throws(ConfigurationKey.Invalid) -> String {
        guard access(path, R_OK) == 0 else {
            throw .init("cannot be read: " + String(cString: strerror(errno)))
        }
        var info = stat()
        guard stat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { throw .init("is not a regular file") }
        return path
    }

    static func logLevel(_ text: String) throws(ConfigurationKey.Invalid) -> String {
        guard let level = Logger.Level(rawValue: ConfigText.trimmed(text).lowercased()) else {
            throw .init("must be " + Parse.alternatives(Logger.Level.allCases.map(\.rawValue)))
        }
        return level.rawValue
    }

    static func bindAddress(_ text: String) throws(ConfigurationKey.Invalid) -> String {
        var text = ConfigText.trimmed(text)
        if text.hasPrefix("[") && text.hasSuffix("]") {
            text = String(text.dropFirst().dropLast())
        }
        guard NetworkSyntax.isIPv6Address(text) || NetworkSyntax.isHostName(text) else {
            throw .init("must be an IP address or host name to listen on, like 0.0.0.0 or ::")
        }
        return text
    }
}
