import Testing

@testable import ImageFetchWorker

@Suite struct CIDRTests {
    @Test func parsesNetworks() throws {
        let network = try #require(CIDR("10.0.0.0/8"))
        #expect(network.address == .v4(0x0A00_0000))
        #expect(network.prefixLength == 8)
        #expect(network.description == "10.0.0.0/8")

        let loopback6 = try #require(CIDR("::1/128"))
        #expect(loopback6.address == .v6(1))
        #expect(loopback6.prefixLength == 128)
    }

    @Test func bareAddressIsASingleHost() throws {
        let v4 = try #require(CIDR("127.0.0.1"))
        #expect(v4.prefixLength == 32)
        #expect(v4.contains(.v4(0x7F00_0001)))
        #expect(!v4.contains(.v4(0x7F00_0002)))

        let v6 = try #require(CIDR("fd00::5"))
        #expect(v6.prefixLength == 128)
        #expect(v6.contains(try ip("fd00::5")))
        #expect(!v6.contains(try ip("fd00::6")))
    }

    @Test func clearsHostBits() throws {
        let network = try #require(CIDR("10.1.2.3/8"))
        #expect(network.address == .v4(0x0A00_0000))
        #expect(network.description == "10.0.0.0/8")
        #expect(CIDR("fd12:3456::1/16")?.description == "fd12::/16")
    }

    @Test(arguments: [
        "", "/8", "10.0.0.0/", "10.0.0.0/33", "::/129", "10.0.0.0/-1", "10.0.0.0/+8", "10.0.0.0/08",
        "10.0.0.0/8/8", "10.0.0/8", "010.0.0.0/8", "example.com/24", "10.0.0.0 /8", "10.0.0.0/8 ",
        "[::1]/128", "10.0.0.0/1000",
    ])
    func rejectsMalformed(text: String) {
        #expect(CIDR(text) == nil)
    }

    @Test func containsRespectsBoundaries() throws {
        let network = try #require(CIDR("172.16.0.0/12"))
        #expect(!network.contains(try ip("172.15.255.255")))
        #expect(network.contains(try ip("172.16.0.0")))
        #expect(network.contains(try ip("172.31.255.255")))
        #expect(!network.contains(try ip("172.32.0.0")))

        let v6 = try #require(CIDR("fe80::/10"))
        #expect(v6.contains(try ip("fe80::1")))
        #expect(v6.contains(try ip("febf:ffff::1")))
        #expect(!v6.contains(try ip("fec0::1")))
    }

    @Test func zeroPrefixContainsTheWholeFamilyOnly() throws {
        let all4 = try #require(CIDR("0.0.0.0/0"))
        #expect(all4.contains(try ip("8.8.8.8")))
        #expect(all4.contains(try ip("255.255.255.255")))
        #expect(!all4.contains(try ip("::1")))

        let all6 = try #require(CIDR("::/0"))
        #expect(all6.contains(try ip("2606:4700::1111")))
        #expect(!all6.contains(try ip("8.8.8.8")))
    }

    @Test func familiesNeverMix() throws {
        let v4 = try #require(CIDR("127.0.0.0/8"))
        #expect(!v4.contains(try ip("::ffff:127.0.0.1")))
    }
}
