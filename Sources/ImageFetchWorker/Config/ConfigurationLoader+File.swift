import Configuration
import Foundation
import Yams

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension ConfigurationLoader {
    /// The largest `--config` file read; configuration files are a few kilobytes.
    static let maxConfigFileBytes = 1 << 20

    /// Why `path` is not a small regular file (at most ``maxConfigFileBytes``), or nil, also when
    /// it cannot be looked at (the read then says why). A FIFO or a device would hold the start
    /// for good, a huge file its memory: the `--config` file and `*_FILE` secrets are checked.
    static func smallFileProblem(_ path: String) -> String? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        guard (info.st_mode & S_IFMT) == S_IFREG else { return "is not a regular file" }
        guard info.st_size <= maxConfigFileBytes else { return "is larger than 1 MiB" }
        return nil
    }

    /// Reads and parses the file named by `--config`, if any.
    static func loadConfigFile(
        cli: CommandLineArgumentsProvider
    ) throws(ConfigurationError) -> ConfigFileProvider? {
        guard
            case .stringArray(let values)? =
                (try? cli.value(forKey: AbsoluteConfigKey(["config"]), type: .stringArray))?.value?.content
        else { return nil }
        let path = values.joined(separator: ",")
        guard !path.isEmpty else {
            throw ConfigurationError(key: "config", problem: "--config needs the path of a JSON or YAML file")
        }
        let isJSON: Bool
        switch URL(fileURLWithPath: path).pathExtension.lowercased() {
        case "json": isJSON = true
        case "yaml", "yml": isJSON = false
        default:
            throw ConfigurationError(
                key: "config", problem: "\(ConfigText.quoted(path)) must end in .json, .yaml or .yml")
        }
        if let problem = smallFileProblem(path) {
            throw ConfigurationError(key: "config", problem: "\(ConfigText.quoted(path)) \(problem)")
        }
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            let reason = FileManager.default.fileExists(atPath: path) ? "cannot be read" : "does not exist"
            throw ConfigurationError(key: "config", problem: "\(ConfigText.quoted(path)) \(reason)")
        }
        // The YAML tree, built once for the checks (the reader builds its own); nil when it is not
        // valid YAML, which the reader then says.
        let yamlRoot = isJSON ? nil : try? Yams.Parser(yaml: data).singleRoot()
        if let yamlRoot, let problem = YAMLBounds.problem(root: yamlRoot, bytes: data.count) {
            throw ConfigurationError(key: "config", problem: "\(ConfigText.quoted(path)) \(problem)")
        }
        do {
            let name = "config file \(path)"
            let snapshot: any ConfigSnapshot =
                isJSON
                ? try JSONSnapshot(data: data.bytes, providerName: name, parsingOptions: .default)
                : try YAMLSnapshot(data: data.bytes, providerName: name, parsingOptions: .default)
            let duplicate =
                isJSON ? JSONKeyScan.firstDuplicate(in: Array(data)) : yamlRoot.flatMap(YAMLKeyScan.firstDuplicate(in:))
            if let key = duplicate {
                throw ConfigurationError(key: "config", problem: "\(ConfigText.quoted(path)) gives \(key) twice")
            }
            return ConfigFileProvider(
                file: snapshot, path: path, literals: isJSON ? JSONLiterals(data: data) : JSONLiterals())
        } catch let error as ConfigurationError {
            throw error
        } catch {
            // Only the first line: parsers may quote the offending line, which can hold a secret.
            var firstLine = String(describing: error).split(whereSeparator: \.isNewline).first.map(String.init) ?? ""
            if let debugDescription = (error as NSError).userInfo[NSDebugDescriptionErrorKey] as? String {
                firstLine = debugDescription  // JSONSerialization: "Unexpected end of file …"
            }
            if firstLine.hasSuffix(":") { firstLine.removeLast() }
            throw ConfigurationError(
                key: "config",
                problem: "\(ConfigText.quoted(path)) is not valid \(isJSON ? "JSON" : "YAML"): \(firstLine.prefix(200))"
            )
        }
    }
}
