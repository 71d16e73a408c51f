/// A URL that passed ``URLPolicy/validate(_:)``, normalised into the form libcurl is given.
package struct ValidatedURL: Sendable, Equatable {
    /// The normalised URL handed to libcurl: lower-case scheme and host, IP literals in canonical
    /// form, no fragment, at least `/` as the path, path and query otherwise as given (non-ASCII
    /// bytes percent-encoded).
    package var url: String
    /// `http` or `https`, lower case.
    package var scheme: String
    /// The host, lower case. An IPv4 literal in any form `inet_aton` accepts is a dotted quad
    /// (`127.0.0.1`); an IPv6 literal keeps its brackets, in canonical form (`[::1]`), as in the URL.
    package var host: String
    /// The port the URL names, if it names one (nil: the scheme's default).
    package var port: Int?
    /// Whether the scheme is `https`.
    package var isHTTPS: Bool

    /// Creates a value; normally only ``URLPolicy`` does.
    package init(url: String, scheme: String, host: String, port: Int? = nil, isHTTPS: Bool) {
        self.url = url
        self.scheme = scheme
        self.host = host
        self.port = port
        self.isHTTPS = isHTTPS
    }

    /// The host as an address when it is an IP literal, or `nil` for a host name.
    ///
    /// Lets a caller refuse an obviously forbidden target before any network use; the
    /// connect-time check in ``AddressPolicy`` stays the one that counts.
    package var ipAddress: IPAddress? {
        if self.host.hasPrefix("[") && self.host.hasSuffix("]") {
            return IPAddress(String(self.host.dropFirst().dropLast()))
        }
        return IPAddress(self.host)
    }
}
