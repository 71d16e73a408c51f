/// Parsing of the `fetch.*` keys that control requests: `fetch.headers`, `fetch.job_headers`,
/// `fetch.allowed_hosts`, `fetch.denied_hosts` and `fetch.resolve`.
///
/// Pure functions of the text; the problems they return complete "fetch.KEY …" and never repeat a
/// header's value, which can be a credential.
enum FetchControlsSyntax {
    /// `fetch.headers`: `Name: value` entries, one a line (a list in a config file, a repeated flag).
    static func headers(_ text: String) -> Result<[HTTPHeaderField], ConfigProblem> {
        var fields: [HTTPHeaderField] = []
        var seen = Set<String>()
        for line in text.split(whereSeparator: \.isNewline) {
            let entry = ConfigText.trimmed(String(line))
            if entry.isEmpty { continue }
            guard let colon = entry.firstIndex(of: ":") else {
                return .failure(ConfigProblem("must be lines of \"Name: value\", but an entry has no ':'"))
            }
            let name = ConfigText.trimmed(String(entry[..<colon]))
            let value = ConfigText.trimmed(String(entry[entry.index(after: colon)...]))
            guard RequestHeaders.isValidName(name) else {
                return .failure(
                    ConfigProblem("must be lines of \"Name: value\", but a name is not a valid HTTP header name"))
            }
            guard !RequestHeaders.reservedNames.contains(name.lowercased()) else {
                return .failure(ConfigProblem("must not set \(name), which libcurl manages itself"))
            }
            guard seen.insert(name.lowercased()).inserted else { return .failure(ConfigProblem("names \(name) twice")) }
            guard !value.isEmpty else { return .failure(ConfigProblem("gives \(name) no value")) }
            if let problem = RequestHeaders.valueProblem(value) {
                return .failure(ConfigProblem("has a value for \(name) that \(problem)"))
            }
            fields.append(HTTPHeaderField(name: name, value: value))
        }
        return .success(fields)
    }

    /// `fetch.job_headers`: comma-separated header names, returned in lower case.
    static func headerNames(_ text: String) -> Result<Set<String>, ConfigProblem> {
        var names = Set<String>()
        for entry in text.split(separator: ",") {
            let name = ConfigText.trimmed(String(entry))
            if name.isEmpty { continue }
            guard RequestHeaders.isValidName(name) else {
                return .failure(
                    ConfigProblem("must be a comma-separated list of HTTP header names, got \(ConfigText.quoted(name))")
                )
            }
            guard !RequestHeaders.reservedNames.contains(name.lowercased()) else {
                return .failure(ConfigProblem("must not name \(name), which libcurl manages itself"))
            }
            names.insert(name.lowercased())
        }
        return .success(names)
    }

    /// `fetch.allowed_hosts`, `fetch.denied_hosts`: comma-separated names, `*.name` patterns and
    /// IP literals, normalised by ``HostPolicy/normalizedEntry(_:)``.
    static func hosts(_ text: String) -> Result<[String], ConfigProblem> {
        var entries: [String] = []
        for entry in text.split(separator: ",") {
            let item = ConfigText.trimmed(String(entry))
            if item.isEmpty { continue }
            switch HostPolicy.normalizedEntry(item) {
            case .success(let normalized): entries.append(normalized)
            case .failure(let problem):
                return .failure(
                    ConfigProblem(
                        "must be a comma-separated list of host names, *.name patterns and IP addresses, but \(ConfigText.quoted(item)): \(problem.message)"
                    ))
            }
        }
        return .success(entries)
    }

    /// `fetch.resolve`: comma-separated `host:port:address` entries for libcurl's
    /// `CURLOPT_RESOLVE` (one address each; IPv6 in brackets).
    static func resolve(_ text: String) -> Result<[String], ConfigProblem> {
        var entries: [String] = []
        for entry in text.split(separator: ",") {
            let item = ConfigText.trimmed(String(entry))
            if item.isEmpty { continue }
            let problem = ConfigProblem(
                "must be a comma-separated list of host:port:address, like images.test:443:127.0.0.1, got \(ConfigText.quoted(item))"
            )
            let parts = item.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false).map(String.init)
            guard parts.count == 3, NetworkSyntax.isHostName(parts[0]), let port = Int(parts[1]),
                (1...65535).contains(port)
            else { return .failure(problem) }
            var address = parts[2]
            if address.hasPrefix("["), address.hasSuffix("]") { address = String(address.dropFirst().dropLast()) }
            if NetworkSyntax.isIPv4Address(address) {
                entries.append("\(parts[0].lowercased()):\(port):\(address)")
            } else if NetworkSyntax.isIPv6Address(address) {
                entries.append("\(parts[0].lowercased()):\(port):[\(address)]")
            } else {
                return .failure(problem)
            }
        }
        return .success(entries)
    }
}

/// What is wrong with a configured value, as text that completes "KEY …"; never holds a secret.
struct ConfigProblem: Error, Equatable {
    var text: String

    init(_ text: String) {
        self.text = text
    }
}
