/// What the command line prints about the configuration, generated from ``ConfigurationKey/all``
/// so that it cannot drift from what the loader reads.
package enum ConfigurationHelp {
    /// The keys for `run --help`: flag, variable, default and meaning of each.
    package static var keys: String {
        var lines = [
            "CONFIGURATION KEYS",
            "A flag beats its environment variable, which beats the --config file",
            "(JSON or YAML), which beats the default. See docs/configuration.md.",
            "",
        ]
        for key in ConfigurationKey.all {
            lines.append("  \(key.flag) <\(key.kind.placeholder)>, \(key.variable)")
            lines.append("      \(key.help)")
            lines.append(
                "      Default: \(key.defaultText)."
                    + (key.isSecret ? " Secret: or a file in \(key.variable)_FILE." : ""))
        }
        return lines.joined(separator: "\n")
    }

    /// The effective configuration for the `config` command: each key, its value (secrets
    /// redacted) and where it came from.
    package static func report(_ resolved: ResolvedConfiguration) -> String {
        let rows = resolved.rows
        let keyWidth = rows.map(\.key.name.count).max() ?? 0
        let valueWidth = min(rows.map(\.value.count).max() ?? 0, 48)
        return rows.map { row in
            let source = row.source.layer.rawValue + (row.source.detail.isEmpty ? "" : " " + row.source.detail)
            return pad(row.key.name, keyWidth) + "  " + pad(row.value, valueWidth) + "  " + source
        }.joined(separator: "\n")
    }

    private static func pad(_ text: String, _ width: Int) -> String {
        text.count >= width ? text : text + String(repeating: " ", count: width - text.count)
    }
}

extension ConfigurationKey.Kind {
    /// The value's placeholder in help: `--worker-concurrency <int>`.
    var placeholder: String {
        switch self {
        case .int: "int"
        case .seconds: "duration"
        case .bool: "bool"
        case .string: "text"
        case .list: "list"
        case .lines: "lines"
        }
    }
}

extension ConfigurationLoader {
    /// A duration as configuration values write it (`90`, `500ms`, `30s`, `2m`, `1h`, `7d`), in
    /// seconds; nil if it is not one.
    package static func duration(_ text: String) -> Double? {
        ConfigText.seconds(text)
    }

    /// Splits a command line into configuration flags with their values, and the other
    /// arguments (such as the URLs of `publish`), so that `--amqp-url URL` keeps its value.
    ///
    /// A configuration flag without `=` takes the next argument as its value unless that is
    /// another flag; a boolean flag takes it only when it reads as a boolean (`true`, `no`, …).
    /// Unknown flags stay with the configuration, where the loader refuses them.
    package static func partition(_ arguments: [String]) -> (configuration: [String], operands: [String]) {
        var configuration: [String] = []
        var operands: [String] = []
        var index = arguments.startIndex
        while index < arguments.endIndex {
            let argument = arguments[index]
            index += 1
            guard argument.hasPrefix("--") else {
                operands.append(argument)
                continue
            }
            configuration.append(argument)
            let kind = argument == "--config" ? .string : ConfigurationKey.bySpelling[argument]?.key.kind
            guard !argument.utf8.contains(UInt8(ascii: "=")), let kind, index < arguments.endIndex else {
                continue
            }
            let next = arguments[index]
            if next.hasPrefix("--") { continue }
            if kind == .bool, !["true", "false", "yes", "no", "1", "0"].contains(next.lowercased()) { continue }
            configuration.append(next)
            index += 1
        }
        return (configuration, operands)
    }
}
