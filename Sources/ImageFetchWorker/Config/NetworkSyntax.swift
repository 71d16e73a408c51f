#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Syntax checks for host names, IP addresses and CIDR blocks in configuration values.
enum NetworkSyntax {
    /// True for a dotted-quad IPv4 address such as `10.0.0.1`.
    static func isIPv4Address(_ text: String) -> Bool {
        var address = in_addr()
        return inet_pton(AF_INET, text, &address) == 1
    }

    /// True for an IPv6 address such as `::1` or `fd00::1`, without brackets or zone.
    static func isIPv6Address(_ text: String) -> Bool {
        var address = in6_addr()
        return inet_pton(AF_INET6, text, &address) == 1
    }

    /// True for a DNS name or IPv4 address: labels of letters, digits, `-` and `_`, separated
    /// by dots, at most 253 bytes.
    static func isHostName(_ text: String) -> Bool {
        guard !text.isEmpty, text.utf8.count <= 253 else { return false }
        let labels = text.split(separator: ".", omittingEmptySubsequences: false)
        for (index, label) in labels.enumerated() {
            // A trailing dot (a fully qualified name) leaves one empty label at the end.
            if label.isEmpty {
                if index == labels.count - 1 && index > 0 { continue }
                return false
            }
            guard label.utf8.count <= 63 else { return false }
            for byte in label.utf8 {
                switch byte {
                case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                    UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"):
                    continue
                default:
                    return false
                }
            }
        }
        return true
    }

    /// Checks one CIDR block and returns it with an explicit prefix length.
    ///
    /// `10.0.0.0/8` and `fd00::/8` are kept as written; a bare address is a host route and
    /// gains `/32` or `/128`. Bits past the prefix are allowed (`10.1.2.3/8` is `10.0.0.0/8`).
    ///
    /// - Parameter text: The block, without surrounding white space.
    /// - Returns: The normalised block, or a failure that says what is wrong.
    static func normalizedCIDR(_ text: String) -> Result<String, CIDRProblem> {
        let parts = text.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        let address = String(parts[0])
        let maxPrefix: Int
        if isIPv4Address(address) {
            maxPrefix = 32
        } else if isIPv6Address(address) {
            maxPrefix = 128
        } else {
            return .failure(
                CIDRProblem(message: "\(String(reflecting: text)) is not an IPv4 or IPv6 address or CIDR block"))
        }
        guard parts.count == 2 else {
            return .success("\(address)/\(maxPrefix)")
        }
        let prefixText = parts[1]
        guard !prefixText.isEmpty, prefixText.count <= 3, prefixText.allSatisfy(ConfigText.isDigit),
            let prefix = Int(prefixText), prefix <= maxPrefix
        else {
            return .failure(
                CIDRProblem(
                    message: "\(String(reflecting: text)) has a bad prefix length, it must be 0 to \(maxPrefix)"))
        }
        return .success("\(address)/\(prefix)")
    }

    /// What is wrong with a CIDR block.
    struct CIDRProblem: Error {
        var message: String
    }
}
