/// The checks a job's URL passes before any network use. (Redirect targets, which libcurl follows
/// itself, get the scheme, user-info and length checks in the fetch engine: see
/// `FetchTransfer.redirectProblem(_:)`.)
///
/// This is a small, strict parser rather than Foundation's `URL`, so that what is checked is
/// exactly what libcurl is given. It accepts `scheme://host[:port][/path][?query][#fragment]`:
///
/// - The scheme is case-insensitive and must be `http` or `https`; anything else is
///   `unsupported_scheme`. Text without a scheme (`/relative`, `//host/x`) is `invalid_url`.
/// - The authority must be present and must not hold user info: an `@` between `//` and the first
///   `/`, `?` or `#` is `invalid_url`. An `@` later in the path or query is fine.
/// - The host is an IPv6 literal in brackets (no zone index), or a name of ASCII letters, digits,
///   `-`, `_` and `.`. An internationalised name (non-ASCII, or with an `xn--` label) is turned
///   into punycode by ``IDNA`` (IDNA 2008, UTS #46); an invalid or confusable one is `invalid_url`. A host that ends in a number is read as an IPv4 address the way `inet_aton`
///   and browsers (WHATWG URL) read it — decimal `2130706433`, octal `0177.0.0.1`, hex
///   `0x7f000001` or `0x7f.0.0.1`, short forms `127.1` — and normalised to a dotted quad, so the
///   host checked is the host connected. If it does not read as one, it is `invalid_url`; so is
///   a bare `0x` part, which WHATWG reads as 0 but `inet_aton` and curl refuse.
/// - The port, if any, is 1…65535. An empty port (`host:`) means the default.
/// - Spaces and control characters anywhere are `invalid_url`; so is a URL over ``maxLength``
///   bytes of UTF-8.
///
/// Path and query are kept as given, percent-encoding included; only non-ASCII bytes are
/// percent-encoded. The fragment is dropped, since it is never sent.
///
/// A refusal names the problem, never the URL; the job pipeline turns it into a result code and
/// message at its edge (`JobError.init(_: URLPolicy.Refusal)`).
package enum URLPolicy {
    /// The longest URL accepted, in bytes of UTF-8: 8 KiB.
    package static let maxLength = 8192

    /// Why a URL is refused. Only ``unsupportedScheme(_:)`` carries part of the URL: its scheme,
    /// cut to 20 characters.
    package enum Refusal: Error, Sendable, Equatable {
        /// Over ``URLPolicy/maxLength`` bytes.
        case tooLong
        case empty
        /// A space or a control character anywhere.
        case spaceOrControl
        /// No scheme.
        case notAbsolute
        /// A scheme other than http or https, cut to 20 characters (with `…`), lower case.
        case unsupportedScheme(String)
        /// No `//` after the scheme.
        case noAuthority
        case userInfo
        /// An IPv6 literal without its closing bracket.
        case unclosedIPv6Literal
        case invalidIPv6
        /// Something other than `:port` after the host.
        case junkAfterHost
        /// Not a number in 1…65535.
        case invalidPort
        case noHost
        /// An internationalised name that IDNA refuses, with its reason.
        case invalidHostName(IDNAProblem)
        /// A character other than letters, digits, `-`, `_` and `.` in the host name.
        case hostCharacter
        case emptyLabel
        /// A host that ends in a number but does not read as an IPv4 address.
        case invalidIPv4
    }

    /// Checks `string` before any network use: absolute, `http` or `https` only, has a host, no
    /// user info, at most ``maxLength`` bytes, no spaces or control characters.
    ///
    /// - Returns: the normalised URL, or why it is refused.
    package static func validate(_ string: String) -> Result<ValidatedURL, Refusal> {
        if let url = canonical(string) { return .success(url) }
        return validateFully(string)
    }

    /// ``validate(_:)`` without its fast path (`URLPolicy+Canonical.swift`), for the tests that
    /// compare the two.
    static func validateFully(_ string: String) -> Result<ValidatedURL, Refusal> {
        do {
            return .success(try parse(string))
        } catch {
            return .failure(error)
        }
    }

    // MARK: - Parsing

    private static func parse(_ string: String) throws(Refusal) -> ValidatedURL {
        let bytes = Array(string.utf8)
        guard bytes.count <= maxLength else { throw .tooLong }
        guard !bytes.isEmpty else { throw .empty }
        for scalar in string.unicodeScalars where isForbidden(scalar) {
            throw .spaceOrControl
        }

        // Scheme.
        guard let colon = bytes.firstIndex(of: ascii(":")),
            colon > 0,
            isAlpha(bytes[0]),
            bytes[1..<colon].allSatisfy({
                isAlpha($0) || IPAddress.isDigit($0) || $0 == ascii("+") || $0 == ascii("-") || $0 == ascii(".")
            })
        else {
            throw .notAbsolute
        }
        let scheme = String(decoding: bytes[..<colon].map(lowercased), as: UTF8.self)
        guard scheme == "http" || scheme == "https" else {
            let shown = scheme.count > 20 ? String(scheme.prefix(20)) + "…" : scheme
            throw .unsupportedScheme(shown)
        }

        // Authority.
        let afterScheme = bytes[(colon + 1)...]
        guard afterScheme.starts(with: [ascii("/"), ascii("/")]) else {
            throw .noAuthority
        }
        let authorityStart = afterScheme.startIndex + 2
        let authorityEnd =
            bytes[authorityStart...].firstIndex(where: { $0 == ascii("/") || $0 == ascii("?") || $0 == ascii("#") })
            ?? bytes.endIndex
        let authority = bytes[authorityStart..<authorityEnd]
        guard !authority.contains(ascii("@")) else {
            throw .userInfo
        }
        let (host, portText) = try parseAuthority(authority)

        // Path and query, without the fragment.
        var rest = bytes[authorityEnd...]
        if let hash = rest.firstIndex(of: ascii("#")) {
            rest = rest[..<hash]
        }
        var tail = ""
        if rest.first != ascii("/") { tail = "/" }
        tail += percentEncodingNonASCII(rest)

        var url = scheme + "://" + host
        if let portText { url += ":" + portText }
        url += tail
        return ValidatedURL(
            url: url, scheme: scheme, host: host, port: portText.flatMap { Int($0) },
            isHTTPS: scheme == "https")
    }

    /// Splits and checks `host[:port]`; gives the normalised host and the port as decimal text.
    private static func parseAuthority(_ authority: ArraySlice<UInt8>) throws(Refusal) -> (String, String?) {
        let host: String
        let afterHost: ArraySlice<UInt8>
        if authority.first == ascii("[") {
            guard let close = authority.firstIndex(of: ascii("]")) else {
                throw .unclosedIPv6Literal
            }
            guard let value = IPAddress.parseV6(authority[(authority.startIndex + 1)..<close]) else {
                throw .invalidIPv6
            }
            host = "[" + IPAddress.v6(value).description + "]"
            afterHost = authority[(close + 1)...]
        } else {
            let end = authority.firstIndex(of: ascii(":")) ?? authority.endIndex
            host = try normaliseHostName(authority[..<end])
            afterHost = authority[end...]
        }

        guard let first = afterHost.first else { return (host, nil) }
        guard first == ascii(":") else {
            throw .junkAfterHost
        }
        let digits = afterHost.dropFirst()
        if digits.isEmpty { return (host, nil) }
        guard digits.count <= 5, digits.allSatisfy(IPAddress.isDigit) else {
            throw .invalidPort
        }
        let port = digits.reduce(0) { $0 * 10 + Int($1 - ascii("0")) }
        guard (1...65535).contains(port) else {
            throw .invalidPort
        }
        return (host, String(port))
    }

    /// Lower-cases a host name, and turns a host that ends in a number into a dotted quad.
    private static func normaliseHostName(_ name: ArraySlice<UInt8>) throws(Refusal) -> String {
        guard !name.isEmpty else { throw .noHost }
        var bytes = name
        if IDNA.needsConversion(name) {
            switch IDNA.toASCII(String(decoding: name, as: UTF8.self)) {
            case .success(let ascii): bytes = ArraySlice(ascii.utf8)
            case .failure(let problem): throw .invalidHostName(problem)
            }
        }
        guard
            bytes.allSatisfy({
                isAlpha($0) || IPAddress.isDigit($0) || $0 == ascii("-") || $0 == ascii(".") || $0 == ascii("_")
            })
        else {
            throw .hostCharacter
        }
        let lower = bytes.map(lowercased)
        var labels = lower.split(separator: ascii("."), omittingEmptySubsequences: false)
        if labels.count > 1, labels.last?.isEmpty == true {
            labels.removeLast()  // One trailing dot is the root; it is allowed.
        }
        guard labels.allSatisfy({ !$0.isEmpty }) else {
            throw .emptyLabel
        }
        if let last = labels.last, endsInANumber(last) {
            guard let value = parseLenientIPv4(labels) else {
                throw .invalidIPv4
            }
            return IPAddress.dottedQuad(value)
        }
        return String(decoding: lower, as: UTF8.self)
    }

    /// WHATWG URL's "ends in a number": all decimal digits, or `0x` followed by hex digits (or
    /// by nothing).
    private static func endsInANumber(_ label: ArraySlice<UInt8>) -> Bool {
        if label.allSatisfy(IPAddress.isDigit) { return true }
        guard label.count >= 2, label.first == ascii("0"),
            label[label.startIndex + 1] | 0x20 == ascii("x")
        else { return false }
        return label.dropFirst(2).allSatisfy { $0.hexDigitValue != nil }
    }

    /// Reads one to four parts the way `inet_aton` and WHATWG URL do: each part decimal, octal
    /// (leading `0`) or hex (`0x`); the last part fills the remaining bytes.
    private static func parseLenientIPv4(_ parts: [ArraySlice<UInt8>]) -> UInt32? {
        guard (1...4).contains(parts.count) else { return nil }
        var numbers: [UInt64] = []
        for part in parts {
            guard let number = parseIPv4Number(part) else { return nil }
            numbers.append(number)
        }
        guard let last = numbers.last else { return nil }
        for number in numbers.dropLast() where number > 255 { return nil }
        guard last < (UInt64(1) << (8 * UInt64(5 - numbers.count))) else { return nil }
        var result = last
        for (index, number) in numbers.dropLast().enumerated() {
            result += number << (8 * UInt64(3 - index))
        }
        return UInt32(exactly: result)
    }

    /// One part of a lenient IPv4 address; `nil` when it is not a number or is over 2³².
    private static func parseIPv4Number(_ part: ArraySlice<UInt8>) -> UInt64? {
        var digits = part
        var radix: UInt64 = 10
        if digits.count >= 2, digits.first == ascii("0"),
            digits[digits.startIndex + 1] == ascii("x") || digits[digits.startIndex + 1] == ascii("X")
        {
            radix = 16
            digits = digits.dropFirst(2)
        } else if digits.count >= 2, digits.first == ascii("0") {
            radix = 8
            digits = digits.dropFirst()
        }
        // A bare `0x` is 0 to WHATWG URL but an error to inet_aton and curl; refuse the ambiguity.
        guard !digits.isEmpty else { return nil }
        var value: UInt64 = 0
        for byte in digits {
            guard let digit = byte.hexDigitValue, UInt64(digit) < radix else { return nil }
            value = value * radix + UInt64(digit)
            if value > UInt64(UInt32.max) + 1 { return nil }
        }
        return value
    }

    private static func percentEncodingNonASCII(_ bytes: ArraySlice<UInt8>) -> String {
        let hex = Array("0123456789ABCDEF".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        for byte in bytes {
            if byte < 0x80 {
                out.append(byte)
            } else {
                out.append(ascii("%"))
                out.append(hex[Int(byte >> 4)])
                out.append(hex[Int(byte & 0x0F)])
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// C0 and C1 controls, DEL, and every kind of white space.
    private static func isForbidden(_ scalar: Unicode.Scalar) -> Bool {
        let value = scalar.value
        // ASCII white space is all at or below 0x20: only other scalars need the Unicode table,
        // which showed up in the profile at 1 % of the worker's CPU.
        return value <= 0x20 || (0x7F...0x9F).contains(value) || (value > 0x9F && scalar.properties.isWhitespace)
    }

    private static func ascii(_ character: Unicode.Scalar) -> UInt8 {
        UInt8(truncatingIfNeeded: character.value)
    }

    private static func isAlpha(_ byte: UInt8) -> Bool {
        (byte | 0x20) >= ascii("a") && (byte | 0x20) <= ascii("z")
    }

    private static func lowercased(_ byte: UInt8) -> UInt8 {
        byte >= ascii("A") && byte <= ascii("Z") ? byte | 0x20 : byte
    }
}
