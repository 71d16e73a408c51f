#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// An IPv4 or IPv6 address, as the SSRF guard judges it.
///
/// Both cases hold the address as a plain integer in host byte order, so that range checks are
/// shifts and masks. For ``v6(_:)`` the first byte on the wire is the most significant byte of
/// the `UInt128`.
///
/// The textual parser is deliberately strict: it accepts only the canonical dotted quad for IPv4
/// (no octal, hex or short forms, no leading zeros) and RFC 4291 text for IPv6 (with `::` and an
/// embedded dotted quad, but no zone index). The lenient `inet_aton` forms that browsers accept in
/// URLs are handled by ``URLPolicy``, which normalises them before anything else sees them.
package enum IPAddress: Sendable, Hashable, CustomStringConvertible {
    /// An IPv4 address in host byte order: `127.0.0.1` is `0x7F00_0001`.
    case v4(UInt32)
    /// An IPv6 address in host byte order: `::1` is `1`, `2001:db8::` is `0x2001_0db8 << 96`.
    case v6(UInt128)

    /// Reads the address from a socket address as libcurl hands it to the open-socket callback.
    ///
    /// Only `AF_INET` and `AF_INET6` are understood; any other family gives `nil`. The pointer must
    /// point at storage at least as large as `sockaddr_in` or `sockaddr_in6` for those families,
    /// which libcurl's `struct curl_sockaddr` guarantees. When the length is known, prefer
    /// ``init(sockaddr:length:)``.
    package init?(sockaddr: UnsafePointer<sockaddr>) {
        let raw = UnsafeRawPointer(sockaddr)
        switch Int32(sockaddr.pointee.sa_family) {
        case AF_INET:
            let sin = raw.loadUnaligned(as: sockaddr_in.self)
            self = .v4(UInt32(bigEndian: sin.sin_addr.s_addr))
        case AF_INET6:
            let sin6 = raw.loadUnaligned(as: sockaddr_in6.self)
            var value: UInt128 = 0
            withUnsafeBytes(of: sin6.sin6_addr) { bytes in
                for byte in bytes {
                    value = (value << 8) | UInt128(byte)
                }
            }
            self = .v6(value)
        default:
            return nil
        }
    }

    /// Reads the address from a socket address of `length` bytes (libcurl's `addrlen`).
    ///
    /// Gives `nil` for families other than `AF_INET` and `AF_INET6`, and when `length` is too short
    /// for the family the address claims.
    package init?(sockaddr: UnsafePointer<sockaddr>, length: Int) {
        // Every family understood here is at least as long as sockaddr_in, so the family field
        // can be read safely once that much is there.
        guard length >= MemoryLayout<sockaddr_in>.size else { return nil }
        switch Int32(sockaddr.pointee.sa_family) {
        case AF_INET where length >= MemoryLayout<sockaddr_in>.size,
            AF_INET6 where length >= MemoryLayout<sockaddr_in6>.size:
            self.init(sockaddr: sockaddr)
        default:
            return nil
        }
    }

    /// Parses a textual address: a strict dotted quad (`192.0.2.1`) or IPv6 text (`2001:db8::1`,
    /// `::ffff:192.0.2.1`). Gives `nil` for anything else, including octal or hex IPv4 forms,
    /// brackets and zone indices (`fe80::1%eth0`).
    package init?(_ text: String) {
        let bytes = Array(text.utf8)
        if bytes.contains(UInt8(ascii: ":")) {
            guard let value = IPAddress.parseV6(bytes[...]) else { return nil }
            self = .v6(value)
        } else {
            guard let value = IPAddress.parseDottedQuad(bytes[...]) else { return nil }
            self = .v4(value)
        }
    }

    /// `true` for an IPv4 address.
    package var isV4: Bool {
        if case .v4 = self { return true }
        return false
    }

    /// The IPv4 address inside an IPv4-mapped IPv6 address (`::ffff:a.b.c.d`); `nil` otherwise.
    package var ipv4Mapped: UInt32? {
        guard case .v6(let value) = self, value >> 32 == 0xFFFF else { return nil }
        return UInt32(truncatingIfNeeded: value)
    }

    /// Canonical text: dotted quad for IPv4, RFC 5952 for IPv6 (lower case, the longest run of
    /// two or more zero groups shortened to `::`, IPv4-mapped addresses as `::ffff:a.b.c.d`).
    package var description: String {
        switch self {
        case .v4(let value):
            return IPAddress.dottedQuad(value)
        case .v6(let value):
            if let mapped = self.ipv4Mapped {
                return "::ffff:" + IPAddress.dottedQuad(mapped)
            }
            let groups = (0..<8).map { UInt16(truncatingIfNeeded: value >> (112 - 16 * $0)) }
            // The longest run of zero groups, at least two long; the first one wins a tie.
            var bestStart = -1
            var bestLength = 1
            var index = 0
            while index < 8 {
                if groups[index] == 0 {
                    var end = index
                    while end < 8 && groups[end] == 0 { end += 1 }
                    if end - index > bestLength {
                        bestStart = index
                        bestLength = end - index
                    }
                    index = end
                } else {
                    index += 1
                }
            }
            func hex(_ range: Range<Int>) -> String {
                groups[range].map { String($0, radix: 16) }.joined(separator: ":")
            }
            if bestStart < 0 {
                return hex(0..<8)
            }
            return hex(0..<bestStart) + "::" + hex((bestStart + bestLength)..<8)
        }
    }

    // MARK: - Parsing

    static func dottedQuad(_ value: UInt32) -> String {
        "\(value >> 24).\((value >> 16) & 0xFF).\((value >> 8) & 0xFF).\(value & 0xFF)"
    }

    /// Exactly four decimal parts, 0…255, no leading zeros (they would read as octal elsewhere).
    static func parseDottedQuad(_ bytes: ArraySlice<UInt8>) -> UInt32? {
        var result: UInt32 = 0
        var parts = 0
        for part in bytes.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false) {
            guard part.count >= 1, part.count <= 3, part.allSatisfy(isDigit) else { return nil }
            if part.count > 1 && part.first == UInt8(ascii: "0") { return nil }
            let octet = part.reduce(0) { $0 * 10 + UInt32($1 - UInt8(ascii: "0")) }
            guard octet <= 255 else { return nil }
            result = (result << 8) | octet
            parts += 1
        }
        return parts == 4 ? result : nil
    }

    /// RFC 4291 section 2.2 text: eight groups of one to four hex digits, at most one `::`, and
    /// optionally a dotted quad in place of the last two groups.
    static func parseV6(_ bytes: ArraySlice<UInt8>) -> UInt128? {
        let colon = UInt8(ascii: ":")
        var head: [UInt16] = []
        var tail: [UInt16] = []
        var sawDoubleColon = false
        var rest = bytes

        if rest.starts(with: [colon, colon]) {
            sawDoubleColon = true
            rest = rest.dropFirst(2)
            if rest.isEmpty { return 0 }
        } else if rest.first == colon {
            return nil
        }

        while !rest.isEmpty {
            let end = rest.firstIndex(of: colon) ?? rest.endIndex
            let group = rest[rest.startIndex..<end]
            let isLast = end == rest.endIndex
            if isLast && group.contains(UInt8(ascii: ".")) {
                // An embedded dotted quad: only as the final part.
                guard let v4 = parseDottedQuad(group) else { return nil }
                let groups = [UInt16(v4 >> 16), UInt16(v4 & 0xFFFF)]
                if sawDoubleColon { tail += groups } else { head += groups }
                rest = rest[end...]
                break
            }
            guard group.count >= 1, group.count <= 4, let value = parseHex16(group) else { return nil }
            if sawDoubleColon { tail.append(value) } else { head.append(value) }
            if isLast {
                rest = rest[end...]
                break
            }
            rest = rest[rest.index(after: end)...]
            if rest.first == colon {
                // "::" in the middle or at the end.
                guard !sawDoubleColon else { return nil }
                sawDoubleColon = true
                rest = rest.dropFirst()
                if rest.isEmpty { break }
            } else if rest.isEmpty {
                // A single trailing colon.
                return nil
            }
        }

        let count = head.count + tail.count
        if sawDoubleColon {
            guard count <= 7 else { return nil }
        } else {
            guard count == 8 else { return nil }
        }
        let groups = head + Array(repeating: 0, count: 8 - count) + tail
        return groups.reduce(UInt128(0)) { ($0 << 16) | UInt128($1) }
    }

    static func parseHex16(_ bytes: ArraySlice<UInt8>) -> UInt16? {
        var value: UInt16 = 0
        for byte in bytes {
            guard let digit = byte.hexDigitValue else { return nil }
            value = (value << 4) | UInt16(digit)
        }
        return value
    }

    static func isDigit(_ byte: UInt8) -> Bool {
        byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")
    }
}
