import Configuration
import Foundation
import Synchronization

/// A provider that answers synchronously from one fixed snapshot: the worker reads its
/// configuration once, at start-up, and never watches it.
protocol FixedConfigProvider: ConfigProvider, ConfigSnapshot {}

extension FixedConfigProvider {
    func fetchValue(forKey key: AbsoluteConfigKey, type: ConfigType) async throws -> LookupResult {
        try value(forKey: key, type: type)
    }

    nonisolated(nonsending) func watchValue<Return: ~Copyable>(
        forKey key: AbsoluteConfigKey, type: ConfigType,
        updatesHandler:
            nonisolated(nonsending) (ConfigUpdatesAsyncSequence<Result<LookupResult, any Error>, Never>) async throws ->
            Return
    ) async throws -> Return {
        try await watchValueFromValue(forKey: key, type: type, updatesHandler: updatesHandler)
    }

    func snapshot() -> any ConfigSnapshot { self }

    nonisolated(nonsending) func watchSnapshot<Return: ~Copyable>(
        updatesHandler:
            nonisolated(nonsending) (ConfigUpdatesAsyncSequence<any ConfigSnapshot, Never>) async throws -> Return
    ) async throws -> Return {
        try await watchSnapshotFromSnapshot(updatesHandler: updatesHandler)
    }
}

/// The `--config` file: a parsed JSON or YAML snapshot, read once.
///
/// (`FileProvider` reads its file asynchronously; the worker parses it itself, synchronously,
/// so that a bad file is one clear line before anything else starts.)
struct ConfigFileProvider: FixedConfigProvider {
    let file: any ConfigSnapshot
    let path: String
    /// A JSON file's booleans and numbers as written; empty for YAML, whose snapshot keeps them apart.
    var literals = JSONLiterals()

    var providerName: String { "config file" }

    func value(forKey key: AbsoluteConfigKey, type: ConfigType) throws -> LookupResult {
        let encodedKey = key.components.joined(separator: ".")
        let content: ConfigContent?
        do {
            content = try literals.content(forKey: encodedKey, type: type)
        } catch {
            throw ConfigurationError(
                key: encodedKey, problem: "takes no true or false", source: "config file \(path)")
        }
        if let content {
            return LookupResult(encodedKey: encodedKey, value: ConfigValue(content, isSecret: false))
        }
        return try file.value(forKey: key, type: type)
    }
}

/// Values kept in files named by environment variables, and plain variables under other names.
///
/// - `<VARIABLE>_FILE` for secrets: `AMQP_URL_FILE=/run/secrets/amqp`; the file's trailing line
///   break is dropped. Setting the variable and its `_FILE` twin together is an error.
/// - With `plain`, the variable itself too: the `AWS_*` credential variables, which name the
///   `s3.*` credentials differently.
struct VariableFileProvider: FixedConfigProvider {
    let providerName: String
    let environment: [String: String]
    /// The variable for each dotted key this provider answers.
    let variables: [String: String]
    let plain: Bool

    func value(forKey key: AbsoluteConfigKey, type: ConfigType) throws -> LookupResult {
        let name = key.components.joined(separator: ".")
        guard let variable = variables[name] else { return LookupResult(encodedKey: name, value: nil) }
        let fileVariable = variable + "_FILE"
        if let path = environment[fileVariable] {
            if environment[variable] != nil {
                throw ConfigurationError(
                    key: name, problem: "set either \(variable) or \(fileVariable), not both", source: "environment")
            }
            let text = try Self.readSecret(path: path, key: name, variable: fileVariable)
            return LookupResult(encodedKey: "\(fileVariable)=\(path)", value: try Self.typed(text, type, key: name))
        }
        if plain, let text = environment[variable] {
            return LookupResult(encodedKey: variable, value: try Self.typed(text, type, key: name))
        }
        return LookupResult(encodedKey: variable, value: nil)
    }

    /// Text answers only for text: the loader asks for the types of its key's kind in turn.
    private static func typed(_ text: String, _ type: ConfigType, key: String) throws -> ConfigValue {
        guard type == .string else {
            throw ConfigurationKey.Invalid("is text", showsValue: false)
        }
        return ConfigValue(.string(text), isSecret: true)
    }

    /// A secret from a file, without its trailing line break.
    static func readSecret(path: String, key: String, variable: String) throws(ConfigurationError) -> String {
        if let problem = ConfigurationLoader.smallFileProblem(path) {
            throw ConfigurationError(
                key: key, problem: "the file \(ConfigText.quoted(path)) named by \(variable) \(problem)")
        }
        guard let data = FileManager.default.contents(atPath: path) else {
            let reason = FileManager.default.fileExists(atPath: path) ? "cannot be read" : "does not exist"
            throw ConfigurationError(
                key: key, problem: "the file \(ConfigText.quoted(path)) named by \(variable) \(reason)")
        }
        guard var text = String(validating: data, as: UTF8.self) else {
            throw ConfigurationError(
                key: key, problem: "the file \(ConfigText.quoted(path)) named by \(variable) is not UTF-8 text")
        }
        while let last = text.last, last.isNewline {
            text.removeLast()
        }
        return text
    }
}

/// Keeps the last access event, which says which provider answered a read and how.
final class LastAccess: AccessReporter {
    private let event = Mutex<AccessEvent?>(nil)

    func report(_ event: AccessEvent) {
        self.event.withLock { $0 = event }
    }

    func take() -> AccessEvent? {
        event.withLock { event in
            defer { event = nil }
            return event
        }
    }
}
