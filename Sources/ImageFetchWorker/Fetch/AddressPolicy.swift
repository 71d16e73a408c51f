/// The connect-time SSRF guard: decides whether the worker may open a connection to an address.
///
/// The fetch engine asks it from libcurl's `CURLOPT_OPENSOCKETFUNCTION` for every connection,
/// including each redirect hop, with the address that is about to be connected. Judging the
/// address at that point, not the host name in the URL, defeats DNS rebinding and redirects to
/// internal hosts. See `docs/security.md`.
///
/// ## Deny list
///
/// Unless `allowPrivateNetworks` is set, connections to these are refused:
///
/// | class | IPv4 | IPv6 |
/// |---|---|---|
/// | unspecified | `0.0.0.0/8` | `::/128` |
/// | loopback | `127.0.0.0/8` | `::1/128` |
/// | private | `10.0.0.0/8`, `172.16.0.0/12`, `192.168.0.0/16` | |
/// | shared address space (CGNAT) | `100.64.0.0/10` | |
/// | link-local | `169.254.0.0/16` | `fe80::/10` |
/// | unique-local | | `fc00::/7` |
/// | site-local (deprecated) | | `fec0::/10` |
/// | multicast | `224.0.0.0/4` | `ff00::/8` |
/// | broadcast | `255.255.255.255/32` | |
/// | reserved | `240.0.0.0/4`, `192.88.99.0/24` (6to4 relay anycast) | outside `2000::/3`, `100::/64`, ORCHID `2001:10::/28`, `2001:20::/28`, NAT64 local-use `64:ff9b:1::/48` |
/// | documentation | `192.0.2.0/24`, `198.51.100.0/24`, `203.0.113.0/24` | `2001:db8::/32`, `3fff::/20` |
/// | benchmarking | `198.18.0.0/15` | `2001:2::/48` |
/// | IETF protocol assignments | `192.0.0.0/24` | |
///
/// ## IPv4 embedded in IPv6
///
/// - **IPv4-mapped** `::ffff:0:0/96` and **NAT64** `64:ff9b::/96`: the embedded IPv4 address is
///   extracted and judged by the IPv4 rules, because a connection to such an address really goes
///   to that IPv4 address (a dual-stack socket, or a NAT64 gateway on an IPv6-only network with
///   DNS64, where every public IPv4 site has such an address). A denial names both, e.g.
///   `"IPv4-mapped IPv6 (loopback)"` or `"NAT64 (private)"`. go-camo denies `::ffff:0:0/96`
///   outright, which breaks nothing for it but would be wrong for NAT64; imgproxy relies on Go's
///   `net.IP`, which judges the mapped IPv4 address the same way as here.
/// - **IPv4-compatible** `::/96` (deprecated by RFC 4291), **6to4** `2002::/16` (its relays are
///   deprecated by RFC 7526) and **Teredo** `2001::/32` are denied outright, whatever IPv4 address
///   they embed: they reach their target through tunnels and relays whose path the worker cannot
///   judge, and no legitimate image origin needs them. ``embeddedIPv4(in:)`` still extracts their
///   IPv4 address (for 6to4 bits 16…48, for Teredo the client address, which is the bitwise NOT
///   of the last 32 bits) for logging and diagnostics.
///
/// ## Exceptions
///
/// - `allowPrivateNetworks: true` (`fetch.allow_private_networks`) lifts the deny list entirely.
/// - `allowedNetworks` (`fetch.allowed_networks`) allows an address inside any of the networks,
///   matched against the address as connected. For an IPv4-mapped address the embedded IPv4
///   address is also matched, so `127.0.0.1/32` allows both `127.0.0.1` and `::ffff:127.0.0.1`.
///   NAT64 and the other embedded forms are matched only as IPv6 addresses.
package struct AddressPolicy: Sendable {
    /// Whether the deny list is lifted entirely.
    package var allowPrivateNetworks: Bool
    /// Networks allowed even though the deny list covers them.
    package var allowedNetworks: [CIDR]

    /// Creates a policy.
    /// - Parameters:
    ///   - allowPrivateNetworks: `fetch.allow_private_networks`; `true` allows every address.
    ///   - allowedNetworks: `fetch.allowed_networks`, already parsed.
    package init(allowPrivateNetworks: Bool, allowedNetworks: [CIDR]) {
        self.allowPrivateNetworks = allowPrivateNetworks
        self.allowedNetworks = allowedNetworks
    }

    /// `nil` when a connection to `address` is allowed; otherwise a short name of the address
    /// class that denies it, such as `"loopback"`, `"private"` or `"IPv4-mapped IPv6 (private)"`.
    /// The name is safe to put in an error message.
    package func deniedClass(of address: IPAddress) -> String? {
        if self.allowPrivateNetworks { return nil }
        if self.allowedNetworks.contains(where: { $0.contains(address) }) { return nil }
        if let mapped = address.ipv4Mapped,
            self.allowedNetworks.contains(where: { $0.contains(.v4(mapped)) })
        {
            return nil
        }
        return AddressPolicy.nonPublicClass(of: address)
    }

    /// The class of a non-public address, or `nil` for a public one, ignoring any exceptions.
    package static func nonPublicClass(of address: IPAddress) -> String? {
        switch address {
        case .v4(let value):
            return v4Class(value)
        case .v6(let value):
            return v6Class(value)
        }
    }

    /// The IPv4 address embedded in an IPv6 address of one of the transition forms (IPv4-mapped,
    /// IPv4-compatible, NAT64 `64:ff9b::/96`, 6to4, Teredo client), or `nil`.
    package static func embeddedIPv4(in address: IPAddress) -> UInt32? {
        guard case .v6(let value) = address else { return nil }
        let low32 = UInt32(truncatingIfNeeded: value)
        if value >> 32 == 0xFFFF || (value >> 32 == 0 && value > 1) { return low32 }
        if value >> 32 == nat64Prefix { return low32 }
        if value >> 112 == 0x2002 { return UInt32(truncatingIfNeeded: value >> 80) }
        if value >> 96 == 0x2001_0000 { return ~low32 }
        return nil
    }

    // MARK: - Tables

    /// `64:ff9b::/96`, shifted right by 32.
    private static let nat64Prefix: UInt128 = 0x0064_ff9b << 64

    private static let v4Table: [(CIDR, String)] = [
        (v4(0x0000_0000, 8), "unspecified"),
        (v4(0x0A00_0000, 8), "private"),
        (v4(0x6440_0000, 10), "shared address space (CGNAT)"),
        (v4(0x7F00_0000, 8), "loopback"),
        (v4(0xA9FE_0000, 16), "link-local"),
        (v4(0xAC10_0000, 12), "private"),
        (v4(0xC000_0000, 24), "IETF protocol assignments"),
        (v4(0xC000_0200, 24), "documentation"),
        (v4(0xC058_6300, 24), "reserved"),
        (v4(0xC0A8_0000, 16), "private"),
        (v4(0xC612_0000, 15), "benchmarking"),
        (v4(0xC633_6400, 24), "documentation"),
        (v4(0xCB00_7100, 24), "documentation"),
        (v4(0xE000_0000, 4), "multicast"),
        (v4(0xFFFF_FFFF, 32), "broadcast"),
        (v4(0xF000_0000, 4), "reserved"),
    ]

    /// Checked in order; the first match wins, so specific entries come before broad ones.
    private static let v6Table: [(CIDR, String)] = [
        (v6(0x0000, 0, 128), "unspecified"),
        (v6(0x0000, 1, 128), "loopback"),
        (v6(0x0000, 0, 96), "IPv4-compatible IPv6"),
        (v6(0x0064_ff9b_0001, 0, 48), "reserved"),
        (v6(0x0100 << 32, 0, 64), "reserved"),
        (v6(0x2001_0000 << 16, 0, 32), "Teredo"),
        (v6(0x2001_0002 << 16, 0, 48), "benchmarking"),
        (v6(0x2001_0010 << 16, 0, 28), "reserved"),
        (v6(0x2001_0020 << 16, 0, 28), "reserved"),
        (v6(0x2001_0db8 << 16, 0, 32), "documentation"),
        (v6(0x2002 << 32, 0, 16), "6to4"),
        (v6(0x3fff << 32, 0, 20), "documentation"),
        (v6(0xfc00 << 32, 0, 7), "unique-local"),
        (v6(0xfe80 << 32, 0, 10), "link-local"),
        (v6(0xfec0 << 32, 0, 10), "site-local"),
        (v6(0xff00 << 32, 0, 8), "multicast"),
    ]

    /// Global unicast `2000::/3`: everything outside it is reserved or special.
    private static let globalUnicast = v6(0x2000 << 32, 0, 3)

    private static func v4(_ value: UInt32, _ length: Int) -> CIDR {
        CIDR(address: .v4(value), prefixLength: length)
    }

    /// An IPv6 network from its top 48 bits (`high`, three groups), its low 64 bits and a length.
    private static func v6(_ high: UInt64, _ low: UInt64, _ length: Int) -> CIDR {
        CIDR(address: .v6((UInt128(high) << 80) | UInt128(low)), prefixLength: length)
    }

    private static func v4Class(_ value: UInt32) -> String? {
        v4Table.first(where: { $0.0.contains(.v4(value)) })?.1
    }

    private static func v6Class(_ value: UInt128) -> String? {
        if value >> 32 == 0xFFFF {
            return v4Class(UInt32(truncatingIfNeeded: value)).map { "IPv4-mapped IPv6 (\($0))" }
        }
        if value >> 32 == nat64Prefix {
            return v4Class(UInt32(truncatingIfNeeded: value)).map { "NAT64 (\($0))" }
        }
        let address = IPAddress.v6(value)
        if let match = v6Table.first(where: { $0.0.contains(address) }) {
            return match.1
        }
        return globalUnicast.contains(address) ? nil : "reserved"
    }
}
