/// A network written as an address and a prefix length, such as `10.0.0.0/8` or `fd00::/8`.
///
/// Used for `fetch.allowed_networks` and for the built-in deny list. A network only contains
/// addresses of its own family: `127.0.0.0/8` does not contain `::ffff:127.0.0.1` (see
/// ``AddressPolicy`` for how IPv4-mapped addresses are matched against IPv4 entries).
package struct CIDR: Sendable, Hashable, CustomStringConvertible {
    /// The network address, with every bit past ``prefixLength`` cleared.
    package var address: IPAddress
    /// Leading bits that must match: 0…32 for IPv4, 0…128 for IPv6.
    package var prefixLength: Int

    /// Parses `address/prefix`, or a bare address meaning a single host (`/32` or `/128`).
    ///
    /// The address must be a strict literal (see ``IPAddress/init(_:)``); the prefix is plain
    /// decimal within the family's range. Host bits set past the prefix (`10.1.2.3/8`) are
    /// cleared, as most tools do, so `10.1.2.3/8` means `10.0.0.0/8`.
    package init?(_ text: String) {
        let parts = text.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard let address = IPAddress(String(parts[0])) else { return nil }
        let maxLength = address.isV4 ? 32 : 128
        var length = maxLength
        if parts.count == 2 {
            let digits = parts[1].utf8
            guard (1...3).contains(digits.count), digits.allSatisfy(IPAddress.isDigit),
                let parsed = Int(parts[1]), parsed <= maxLength
            else { return nil }
            if digits.count > 1 && digits.first == UInt8(ascii: "0") { return nil }
            length = parsed
        }
        self.init(address: address, prefixLength: length)
    }

    /// A network from its parts; bits past the prefix are cleared.
    /// - Precondition: `prefixLength` is within the family's range.
    init(address: IPAddress, prefixLength: Int) {
        switch address {
        case .v4(let value):
            precondition((0...32).contains(prefixLength), "IPv4 prefix length out of range")
            self.address = .v4(value & CIDR.mask32(prefixLength))
        case .v6(let value):
            precondition((0...128).contains(prefixLength), "IPv6 prefix length out of range")
            self.address = .v6(value & CIDR.mask128(prefixLength))
        }
        self.prefixLength = prefixLength
    }

    /// Whether `a` lies inside this network. Addresses of the other family never do.
    package func contains(_ a: IPAddress) -> Bool {
        switch (self.address, a) {
        case (.v4(let network), .v4(let value)):
            return value & CIDR.mask32(self.prefixLength) == network
        case (.v6(let network), .v6(let value)):
            return value & CIDR.mask128(self.prefixLength) == network
        default:
            return false
        }
    }

    /// `address/prefixLength`, with the address in canonical form.
    package var description: String { "\(self.address)/\(self.prefixLength)" }

    static func mask32(_ length: Int) -> UInt32 {
        length <= 0 ? 0 : UInt32.max << (32 - min(length, 32))
    }

    static func mask128(_ length: Int) -> UInt128 {
        length <= 0 ? 0 : UInt128.max << (128 - min(length, 128))
    }
}
