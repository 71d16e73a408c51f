import Testing

@testable import ImageFetchWorker

@Suite struct AddressPolicyTests {
    let strict = AddressPolicy(allowPrivateNetworks: false, allowedNetworks: [])

    @Test(arguments: [
        // unspecified 0.0.0.0/8
        ("0.0.0.0", "unspecified"), ("0.255.255.255", "unspecified"),
        // private 10/8
        ("10.0.0.0", "private"), ("10.255.255.255", "private"),
        // CGNAT 100.64/10
        ("100.64.0.0", "shared address space (CGNAT)"), ("100.127.255.255", "shared address space (CGNAT)"),
        // loopback 127/8
        ("127.0.0.1", "loopback"), ("127.0.0.0", "loopback"), ("127.255.255.255", "loopback"),
        // link-local 169.254/16 (cloud metadata lives here)
        ("169.254.0.0", "link-local"), ("169.254.169.254", "link-local"), ("169.254.255.255", "link-local"),
        // private 172.16/12
        ("172.16.0.0", "private"), ("172.31.255.255", "private"),
        // IETF 192.0.0/24
        ("192.0.0.0", "IETF protocol assignments"), ("192.0.0.255", "IETF protocol assignments"),
        // documentation
        ("192.0.2.0", "documentation"), ("192.0.2.255", "documentation"),
        ("198.51.100.1", "documentation"), ("203.0.113.255", "documentation"),
        // 6to4 relay anycast
        ("192.88.99.1", "reserved"),
        // private 192.168/16
        ("192.168.0.0", "private"), ("192.168.255.255", "private"),
        // benchmarking 198.18/15
        ("198.18.0.0", "benchmarking"), ("198.19.255.255", "benchmarking"),
        // multicast 224/4
        ("224.0.0.0", "multicast"), ("239.255.255.255", "multicast"),
        // reserved 240/4, broadcast
        ("240.0.0.0", "reserved"), ("255.255.255.254", "reserved"), ("255.255.255.255", "broadcast"),
    ])
    func deniesNonPublicIPv4(text: String, expected: String) throws {
        #expect(strict.deniedClass(of: try ip(text)) == expected)
    }

    @Test(arguments: [
        "8.8.8.8", "1.1.1.1", "9.255.255.255", "11.0.0.0", "100.63.255.255", "100.128.0.0", "126.255.255.255",
        "128.0.0.0", "169.253.255.255", "169.255.0.0", "172.15.255.255", "172.32.0.0", "191.255.255.255",
        "192.0.1.255", "192.0.3.0", "192.88.98.255", "192.167.255.255", "192.169.0.0", "198.17.255.255",
        "198.20.0.0", "198.51.99.255", "198.51.101.0", "203.0.112.255", "203.0.114.0", "223.255.255.255",
    ])
    func allowsPublicIPv4(text: String) throws {
        #expect(strict.deniedClass(of: try ip(text)) == nil)
    }

    @Test(arguments: [
        ("::", "unspecified"),
        ("::1", "loopback"),
        ("fe80::", "link-local"), ("fe80::1", "link-local"), ("febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "link-local"),
        ("fc00::", "unique-local"), ("fd12:3456::1", "unique-local"),
        ("fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "unique-local"),
        ("fec0::1", "site-local"), ("feff::1", "site-local"),
        ("ff00::", "multicast"), ("ff02::1", "multicast"), ("ff0e::1", "multicast"),
        ("2001:db8::", "documentation"), ("2001:db8:ffff:ffff:ffff:ffff:ffff:ffff", "documentation"),
        ("3fff::1", "documentation"),
        ("2001:2::1", "benchmarking"),
        ("2001:10::1", "reserved"), ("2001:20::1", "reserved"),
        ("100::1", "reserved"),
        ("64:ff9b:1::1", "reserved"),
        // Outside global unicast 2000::/3.
        ("1::", "reserved"), ("4000::1", "reserved"), ("e000::1", "reserved"), ("fe00::1", "reserved"),
    ])
    func deniesNonPublicIPv6(text: String, expected: String) throws {
        #expect(strict.deniedClass(of: try ip(text)) == expected)
    }

    @Test(arguments: [
        "2606:4700::1111", "2a00:1450:4001:80b::200e", "2000::", "2001:db7:ffff:ffff:ffff:ffff:ffff:ffff",
        "2001:db9::", "2001:4860:4860::8888", "3ffe:ffff::1", "2003::1",
    ])
    func allowsPublicIPv6(text: String) throws {
        #expect(strict.deniedClass(of: try ip(text)) == nil)
    }

    // MARK: IPv4 embedded in IPv6

    @Test(arguments: [
        ("::ffff:127.0.0.1", "IPv4-mapped IPv6 (loopback)"),
        ("::ffff:10.0.0.1", "IPv4-mapped IPv6 (private)"),
        ("::ffff:192.168.1.1", "IPv4-mapped IPv6 (private)"),
        ("::ffff:169.254.169.254", "IPv4-mapped IPv6 (link-local)"),
        ("::ffff:0.0.0.0", "IPv4-mapped IPv6 (unspecified)"),
        ("::ffff:100.64.0.1", "IPv4-mapped IPv6 (shared address space (CGNAT))"),
        ("64:ff9b::127.0.0.1", "NAT64 (loopback)"),
        ("64:ff9b::10.0.0.1", "NAT64 (private)"),
        ("64:ff9b::169.254.169.254", "NAT64 (link-local)"),
    ])
    func judgesMappedAndNAT64ByTheirIPv4(text: String, expected: String) throws {
        #expect(strict.deniedClass(of: try ip(text)) == expected)
    }

    @Test(arguments: ["::ffff:8.8.8.8", "::ffff:1.1.1.1", "64:ff9b::8.8.8.8", "64:ff9b::1.1.1.1"])
    func allowsMappedAndNAT64PublicIPv4(text: String) throws {
        #expect(strict.deniedClass(of: try ip(text)) == nil)
    }

    @Test(arguments: [
        ("::127.0.0.1", "IPv4-compatible IPv6"),
        ("::8.8.8.8", "IPv4-compatible IPv6"),
        ("::0.0.0.2", "IPv4-compatible IPv6"),
        ("2002:7f00:1::", "6to4"),
        ("2002:0808:0808::1", "6to4"),
        ("2001:0:4136:e378:8000:63bf:80ff:fffe", "Teredo"),
        ("2001::1", "Teredo"),
    ])
    func deniesCompatible6to4AndTeredoOutright(text: String, expected: String) throws {
        #expect(strict.deniedClass(of: try ip(text)) == expected)
    }

    @Test func extractsEmbeddedIPv4() throws {
        #expect(AddressPolicy.embeddedIPv4(in: try ip("::ffff:127.0.0.1")) == 0x7F00_0001)
        #expect(AddressPolicy.embeddedIPv4(in: try ip("::10.0.0.1")) == 0x0A00_0001)
        #expect(AddressPolicy.embeddedIPv4(in: try ip("64:ff9b::192.168.0.1")) == 0xC0A8_0001)
        #expect(AddressPolicy.embeddedIPv4(in: try ip("2002:c0a8:0101::1")) == 0xC0A8_0101)
        // Teredo: the client address 127.0.0.1 is stored inverted in the last 32 bits.
        #expect(AddressPolicy.embeddedIPv4(in: try ip("2001:0:4136:e378:8000:63bf:80ff:fffe")) == 0x7F00_0001)
        #expect(AddressPolicy.embeddedIPv4(in: try ip("::1")) == nil)
        #expect(AddressPolicy.embeddedIPv4(in: try ip("::")) == nil)
        #expect(AddressPolicy.embeddedIPv4(in: try ip("2606:4700::1111")) == nil)
        #expect(AddressPolicy.embeddedIPv4(in: try ip("127.0.0.1")) == nil)
    }

    // MARK: Exceptions

    @Test func allowPrivateNetworksLiftsTheDenyList() throws {
        let open = AddressPolicy(allowPrivateNetworks: true, allowedNetworks: [])
        for text in [
            "127.0.0.1", "10.0.0.1", "169.254.169.254", "::1", "fe80::1", "fd00::1", "::ffff:127.0.0.1",
            "0.0.0.0", "255.255.255.255", "2002:7f00:1::", "8.8.8.8",
        ] {
            #expect(open.deniedClass(of: try ip(text)) == nil, "\(text)")
        }
    }

    @Test func allowedNetworksAreExact() throws {
        let policy = AddressPolicy(allowPrivateNetworks: false, allowedNetworks: [try #require(CIDR("127.0.0.1/32"))])
        #expect(policy.deniedClass(of: try ip("127.0.0.1")) == nil)
        #expect(policy.deniedClass(of: try ip("127.0.0.2")) == "loopback")
        #expect(policy.deniedClass(of: try ip("::1")) == "loopback")
        #expect(policy.deniedClass(of: try ip("10.0.0.1")) == "private")
    }

    @Test func allowedIPv4NetworksAlsoMatchMappedAddresses() throws {
        let policy = AddressPolicy(allowPrivateNetworks: false, allowedNetworks: [try #require(CIDR("10.1.0.0/16"))])
        #expect(policy.deniedClass(of: try ip("10.1.2.3")) == nil)
        #expect(policy.deniedClass(of: try ip("::ffff:10.1.2.3")) == nil)
        #expect(policy.deniedClass(of: try ip("::ffff:10.2.0.1")) == "IPv4-mapped IPv6 (private)")
        // Only the mapped form is matched through its IPv4 address.
        #expect(policy.deniedClass(of: try ip("64:ff9b::10.1.2.3")) == "NAT64 (private)")
        #expect(policy.deniedClass(of: try ip("::10.1.2.3")) == "IPv4-compatible IPv6")
    }

    @Test func allowedIPv6Networks() throws {
        let policy = AddressPolicy(
            allowPrivateNetworks: false,
            allowedNetworks: [try #require(CIDR("fd00:1::/32")), try #require(CIDR("2002::/16"))]
        )
        #expect(policy.deniedClass(of: try ip("fd00:1::5")) == nil)
        #expect(policy.deniedClass(of: try ip("fd00:2::5")) == "unique-local")
        #expect(policy.deniedClass(of: try ip("2002:7f00:1::")) == nil)
    }

    /// The engine's veto names the class (→ ``FetchError/addressRefused(addressClass:)``), which
    /// is what the result says: never the address.
    @Test func aDeniedAddressGivesForbiddenAddress() throws {
        let denied = try #require(strict.deniedClass(of: try ip("169.254.169.254")))
        let error = try #require(JobError(fetchFailure: .addressRefused(addressClass: denied)))
        #expect(error.code == .forbiddenAddress)
        #expect(!error.retryable)
        #expect(error.message == "refused to connect to a link-local address")
        #expect(strict.deniedClass(of: try ip("8.8.8.8")) == nil)
    }
}
