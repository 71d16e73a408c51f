/// One broker address parsed from `amqp.url`: `amqp[s]://user:password@host:port/vhost`.
///
/// ``description`` never shows the password.
package struct AMQPURL: Sendable, Equatable, CustomStringConvertible {
    /// True for `amqps://`: connect with TLS.
    package var tls: Bool
    /// The host name or IP address; an IPv6 address is stored without brackets.
    package var host: String
    /// The TCP port: 5672 for `amqp://`, 5671 for `amqps://` unless the URL says otherwise.
    package var port: Int
    /// The user name, percent-decoded.
    package var user: String
    /// The password, percent-decoded. Never log it.
    package var password: String
    /// The virtual host, percent-decoded (`%2F` is `/`).
    package var vhost: String

    /// Creates a broker address; `port` defaults to 5671 with TLS and 5672 without.
    package init(
        tls: Bool = false, host: String, port: Int? = nil, user: String = "guest",
        password: String = "guest", vhost: String = "/"
    ) {
        self.tls = tls
        self.host = host
        self.port = port ?? (tls ? 5671 : 5672)
        self.user = user
        self.password = password
        self.vhost = vhost
    }

    /// `amqp://guest:guest@localhost:5672/%2F`.
    package static let `default` = AMQPURL(host: "localhost")

    /// The URL with the password replaced by `***`, safe to log.
    ///
    /// An IPv6 host is shown in brackets: `amqp://guest:***@[::1]:5672/%2F`.
    package var description: String {
        let scheme = tls ? "amqps" : "amqp"
        let vhostPart = vhost == "/" ? "%2F" : (vhost.addingPercentEncodingForVhost())
        let hostPart = host.utf8.contains(UInt8(ascii: ":")) ? "[\(host)]" : host
        return "\(scheme)://\(user.addingPercentEncodingForVhost()):***@\(hostPart):\(port)/\(vhostPart)"
    }
}

extension String {
    fileprivate func addingPercentEncodingForVhost() -> String {
        var out = ""
        for byte in self.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"),
                UInt8(ascii: "."), UInt8(ascii: "~"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                let hex = String(byte, radix: 16, uppercase: true)
                out += "%" + (hex.count == 1 ? "0" + hex : hex)
            }
        }
        return out
    }
}

extension AMQPURL {
    /// The configuration key that broker URLs come from, used in errors.
    static let configurationKey = "amqp.url"

    /// Parses one URL: `amqp[s]://[user[:password]@]host[:port][/vhost]`.
    ///
    /// - The scheme is `amqp` or `amqps`, in any case. `amqps` means TLS and a default port of
    ///   5671; `amqp` defaults to 5672.
    /// - User, password and vhost are percent-decoded. A user or password that contains `:`,
    ///   `@` or `/` must be percent-encoded. Without user info, the user and password are
    ///   `guest`; with a user but no password, the password is `guest` too.
    /// - An empty path or `/` means the vhost `/`, and so does `/%2F`. Any other vhost is one
    ///   path segment: `/orders` is `orders`, `/a%2Fb` is `a/b`.
    /// - An IPv6 literal host is written in brackets: `amqp://[::1]:5672/`.
    /// - Query parameters and fragments are rejected rather than silently ignored.
    ///
    /// Errors carry the key `amqp.url` and show the URL with its password replaced by `***`.
    ///
    /// - Parameter parsing: The URL. Leading and trailing white space is ignored.
    /// - Throws: ``ConfigurationError`` naming `amqp.url` when the URL is malformed.
    package init(parsing string: String) throws(ConfigurationError) {
        let text = ConfigText.percentEncodingNonASCII(ConfigText.trimmed(string))
        func fail(_ problem: String) -> ConfigurationError {
            ConfigurationError(
                key: Self.configurationKey,
                problem: "\(ConfigText.quoted(AMQPURL.redacting(text), limit: 200)): \(problem)"
            )
        }
        guard !text.isEmpty else {
            throw ConfigurationError(key: Self.configurationKey, problem: "is empty")
        }

        // Scheme.
        guard let schemeEnd = ConfigText.schemeSeparator(in: text) else {
            throw fail("must start with amqp:// or amqps://")
        }
        let tls: Bool
        switch text[..<schemeEnd.lowerBound].lowercased() {
        case "amqp": tls = false
        case "amqps": tls = true
        case let other:
            throw fail("unsupported scheme \(String(reflecting: String(other.prefix(20)))), use amqp:// or amqps://")
        }
        var rest = text[schemeEnd.upperBound...]
        if rest.utf8.contains(UInt8(ascii: "?")) {
            throw fail("query parameters are not supported, use the amqp.* keys instead")
        }
        if rest.utf8.contains(UInt8(ascii: "#")) {
            throw fail("a fragment is not allowed")
        }

        // Authority and path.
        let path: Substring
        if let slash = rest.firstIndex(of: "/") {
            path = rest[slash...]
            rest = rest[..<slash]
        } else {
            path = ""
        }
        var hostPort = rest
        var user = "guest"
        var password = "guest"
        if let at = rest.lastIndex(of: "@") {
            let userInfo = rest[..<at]
            hostPort = rest[rest.index(after: at)...]
            let rawUser: Substring
            if let colon = userInfo.firstIndex(of: ":") {
                rawUser = userInfo[..<colon]
                guard let decoded = ConfigText.percentDecoded(String(userInfo[userInfo.index(after: colon)...])) else {
                    throw fail("the password has invalid percent-encoding")
                }
                password = decoded
            } else {
                rawUser = userInfo
            }
            guard let decoded = ConfigText.percentDecoded(String(rawUser)) else {
                throw fail("the user name has invalid percent-encoding")
            }
            user = decoded
        }

        // Host and port.
        let host: String
        let portText: Substring?
        if hostPort.hasPrefix("[") {
            guard let close = hostPort.firstIndex(of: "]") else {
                throw fail("an IPv6 host needs a closing \"]\"")
            }
            let literal = String(hostPort[hostPort.index(after: hostPort.startIndex)..<close])
            guard NetworkSyntax.isIPv6Address(literal) else {
                throw fail("\(String(reflecting: literal)) is not an IPv6 address")
            }
            host = literal
            let after = hostPort[hostPort.index(after: close)...]
            if after.isEmpty {
                portText = nil
            } else if after.hasPrefix(":") {
                portText = after.dropFirst()
            } else {
                throw fail("unexpected text after the IPv6 host")
            }
        } else {
            let parts = hostPort.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
            host = String(parts[0])
            portText = parts.count > 1 ? parts[1] : nil
            if host.utf8.contains(UInt8(ascii: ":")) || (portText?.utf8.contains(UInt8(ascii: ":")) ?? false) {
                throw fail("an IPv6 host must be written in brackets")
            }
        }
        guard !host.isEmpty else {
            throw fail("the host is missing")
        }
        guard NetworkSyntax.isIPv6Address(host) || NetworkSyntax.isHostName(host) else {
            throw fail("the host \(String(reflecting: host)) is not a valid host name")
        }
        var port: Int? = nil
        if let portText {
            guard !portText.isEmpty, portText.allSatisfy(ConfigText.isDigit), portText.count <= 5,
                let value = Int(portText), (1...65535).contains(value)
            else {
                throw fail("the port must be a number between 1 and 65535")
            }
            port = value
        }

        // Vhost.
        let vhost: String
        if path.isEmpty || path == "/" {
            vhost = "/"
        } else {
            let segment = path.dropFirst()
            if segment.utf8.contains(UInt8(ascii: "/")) {
                throw fail("the vhost must be one path segment; write \"/\" inside it as %2F")
            }
            guard let decoded = ConfigText.percentDecoded(String(segment)) else {
                throw fail("the vhost has invalid percent-encoding")
            }
            vhost = decoded
        }

        // rabbitmq-c takes C strings: a NUL would end the name early, and log in as someone else.
        for (part, value) in [("user name", user), ("password", password), ("vhost", vhost)]
        where value.utf8.contains(0) {
            throw fail("the \(part) contains a NUL (%00)")
        }
        self.init(tls: tls, host: host, port: port, user: user, password: password, vhost: vhost)
    }

    /// Parses a comma-separated list of URLs, tried in turn for failover.
    ///
    /// White space around each URL is ignored, and so are empty entries; a list with no URL
    /// at all is an error. A comma inside a user name or password must be percent-encoded
    /// (`%2C`).
    ///
    /// - Parameter value: The list, such as `amqp://a:5672/,amqp://b:5672/`.
    /// - Returns: At least one URL, in the order given.
    /// - Throws: ``ConfigurationError`` naming `amqp.url`.
    package static func parseList(_ value: String) throws(ConfigurationError) -> [AMQPURL] {
        var urls: [AMQPURL] = []
        for entry in value.split(separator: ",") {
            let trimmed = ConfigText.trimmed(String(entry))
            if trimmed.isEmpty { continue }
            urls.append(try AMQPURL(parsing: trimmed))
        }
        guard !urls.isEmpty else {
            throw ConfigurationError(
                key: configurationKey, problem: "is empty, it needs at least one amqp:// or amqps:// URL")
        }
        return urls
    }

    /// The text of a URL, or a list of them, with every password replaced by `***`.
    ///
    /// It works on malformed input too, so that an error can show what was given: in each
    /// comma-separated entry, everything between the first `:` after the scheme and the last `@`
    /// is hidden, and so is a "port" that is not a number when there is no `@`. It hides too
    /// much rather than too little.
    ///
    /// - Parameter text: A URL as written, possibly malformed.
    /// - Returns: The text, safe to log.
    package static func redacting(_ text: String) -> String {
        ConfigText.percentEncodingNonASCII(text).split(separator: ",", omittingEmptySubsequences: false).map {
            entry -> String in
            let scheme = ConfigText.schemeSeparator(in: entry)
            let authorityStart = scheme?.upperBound ?? entry.startIndex
            if let at = entry.lastIndex(of: "@"), authorityStart <= at {
                let userInfo = entry[authorityStart..<at]
                if let colon = userInfo.firstIndex(of: ":") {
                    return String(entry[..<entry.index(after: colon)]) + "***" + String(entry[at...])
                }
                // Without a scheme this may be the tail of a password that held a comma.
                return scheme == nil ? "***" + String(entry[at...]) : String(entry)
            }
            // No "@": a "host:port" whose port is not a number may be "user:password" that
            // lost its "@host", or the head of a password that held a comma.
            let authorityEnd = entry[authorityStart...].firstIndex(of: "/") ?? entry.endIndex
            let authority = entry[authorityStart..<authorityEnd]
            guard !authority.hasPrefix("["), let colon = authority.firstIndex(of: ":") else {
                return String(entry)
            }
            let after = authority[authority.index(after: colon)...]
            if after.allSatisfy(ConfigText.isDigit) { return String(entry) }
            return String(entry[..<authority.index(after: colon)]) + "***" + String(entry[authorityEnd...])
        }.joined(separator: ",")
    }
}
