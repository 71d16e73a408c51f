/// `fetch.allowed_hosts` and `fetch.denied_hosts`: which host names a job's URL, and every redirect
/// hop, may go to.
///
/// An entry is an exact name (`images.example.com`), an IP literal (`192.0.2.7`, `[2001:db8::7]`),
/// or `*.` and a name (`*.example.com`), which matches every name below that name but not the name
/// itself. Names are compared in their ASCII form (punycode for internationalised names), without
/// regard to case or a trailing dot. A denied match wins; with an allowlist, a host must match it.
///
/// Pure value, no I/O; the loader normalises the entries (``normalizedEntry(_:)``).
package struct HostPolicy: Sendable, Equatable {
    /// Why a host is refused.
    package enum Refusal: Sendable, Equatable {
        /// It matches `fetch.denied_hosts`.
        case denied
        /// There is an allowlist and it is not on it.
        case notAllowed
    }

    private var allowedNames: Set<String> = []
    private var allowedSuffixes: [String] = []
    private var deniedNames: Set<String> = []
    private var deniedSuffixes: [String] = []
    private let hasAllowlist: Bool

    /// A policy from normalised entries; nil when both lists are empty (every host is allowed).
    package init?(allowed: [String], denied: [String]) {
        guard !allowed.isEmpty || !denied.isEmpty else { return nil }
        hasAllowlist = !allowed.isEmpty
        for entry in allowed { Self.add(entry, names: &allowedNames, suffixes: &allowedSuffixes) }
        for entry in denied { Self.add(entry, names: &deniedNames, suffixes: &deniedSuffixes) }
    }

    private static func add(_ entry: String, names: inout Set<String>, suffixes: inout [String]) {
        if entry.hasPrefix("*.") {
            suffixes.append(String(entry.dropFirst()))  // ".example.com"
        } else {
            names.insert(entry)
        }
    }

    /// Why `host` is refused, or nil when it may be fetched. `host` is an ASCII host name or IP
    /// literal as in a URL (IPv6 in brackets).
    package func refusal(forHost host: String) -> Refusal? {
        let name = Self.canonical(host)
        if Self.matches(name, deniedNames, deniedSuffixes) { return .denied }
        if hasAllowlist, !Self.matches(name, allowedNames, allowedSuffixes) { return .notAllowed }
        return nil
    }

    private static func matches(_ name: String, _ names: Set<String>, _ suffixes: [String]) -> Bool {
        names.contains(name) || suffixes.contains { name.hasSuffix($0) && name.utf8.count > $0.utf8.count }
    }

    /// Lower case, without one trailing dot.
    static func canonical(_ host: String) -> String {
        var name = host.lowercased()
        if name.count > 1, name.hasSuffix(".") { name.removeLast() }
        return name
    }

    /// A configuration entry in the form the policy compares, or why it is not one: a host name
    /// (internationalised names become punycode), `*.` and a host name, or an IP literal (IPv6
    /// with or without brackets).
    package static func normalizedEntry(_ text: String) -> Result<String, IDNAProblem> {
        var entry = canonical(text)
        var wildcard = false
        if entry.hasPrefix("*.") {
            wildcard = true
            entry.removeFirst(2)
        }
        if !wildcard {
            var bare = entry
            if bare.hasPrefix("["), bare.hasSuffix("]") { bare = String(bare.dropFirst().dropLast()) }
            if let address = IPAddress(bare), case .v6 = address { return .success("[" + address.description + "]") }
            if let address = IPAddress(bare) { return .success(address.description) }
        }
        if IDNA.needsConversion(entry.utf8) {
            switch IDNA.toASCII(entry) {
            case .success(let ascii): entry = ascii
            case .failure(let problem): return .failure(problem)
            }
        }
        guard NetworkSyntax.isHostName(entry), !entry.utf8.contains(UInt8(ascii: "*")) else {
            return .failure(IDNAProblem("is not a host name, *.name pattern or IP address"))
        }
        return .success(wildcard ? "*." + entry : entry)
    }
}
