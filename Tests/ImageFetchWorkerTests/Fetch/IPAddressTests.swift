import Testing

@testable import ImageFetchWorker

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

@Suite struct IPAddressTests {
    @Test(arguments: [
        ("0.0.0.0", UInt32(0)),
        ("127.0.0.1", 0x7F00_0001),
        ("8.8.8.8", 0x0808_0808),
        ("255.255.255.255", 0xFFFF_FFFF),
        ("192.168.1.10", 0xC0A8_010A),
    ])
    func parsesDottedQuads(text: String, value: UInt32) {
        #expect(IPAddress(text) == .v4(value))
        #expect(IPAddress(text)?.description == text)
    }

    @Test(arguments: [
        "", "1.2.3", "1.2.3.4.5", "256.0.0.1", "1.2.3.-1", "01.2.3.4", "0177.0.0.1", "0x7f.0.0.1",
        "2130706433", "127.1", "1..2.3", "1.2.3.4.", " 1.2.3.4", "1.2.3.4 ", "a.b.c.d", "１.2.3.4",
    ])
    func rejectsLenientOrBrokenIPv4(text: String) {
        #expect(IPAddress(text) == nil)
    }

    @Test(arguments: [
        ("::", "::"),
        ("::1", "::1"),
        ("0:0:0:0:0:0:0:1", "::1"),
        ("2001:DB8::1", "2001:db8::1"),
        ("2001:db8:0:0:1:0:0:1", "2001:db8::1:0:0:1"),
        ("2001:0db8:0000:0000:0000:0000:0002:0001", "2001:db8::2:1"),
        ("2001:db8::", "2001:db8::"),
        ("1:2:3:4:5:6:7:8", "1:2:3:4:5:6:7:8"),
        ("1:0:3:4:5:6:7:8", "1:0:3:4:5:6:7:8"),
        ("fe80::1:2", "fe80::1:2"),
        ("::ffff:127.0.0.1", "::ffff:127.0.0.1"),
        ("::ffff:7f00:1", "::ffff:127.0.0.1"),
        ("64:ff9b::192.0.2.33", "64:ff9b::c000:221"),
        ("1:2:3:4:5:6:1.2.3.4", "1:2:3:4:5:6:102:304"),
        ("2606:4700::1111", "2606:4700::1111"),
    ])
    func parsesAndPrintsIPv6(text: String, canonical: String) throws {
        let address = try #require(IPAddress(text))
        #expect(address.description == canonical)
        #expect(IPAddress(canonical) == address)
    }

    @Test func ipv6ValuesAreBigEndianInMeaning() {
        #expect(IPAddress("::1") == .v6(1))
        #expect(IPAddress("2001:db8::") == .v6(UInt128(0x2001_0db8) << 96))
        #expect(IPAddress("::ffff:1.2.3.4") == .v6(UInt128(0xFFFF_0102_0304)))
    }

    @Test(arguments: [
        ":", ":::", "1:2", "1::2::3", "1:2:3:4:5:6:7:8:9", "1:2:3:4:5:6:7::8", "12345::", "g::1",
        ":1::", "1::2:", "::1.2.3", "::1.2.3.4:5", "1.2.3.4::", "fe80::1%eth0", "[::1]", "::01.2.3.4",
    ])
    func rejectsBrokenIPv6(text: String) {
        #expect(IPAddress(text) == nil)
    }

    @Test func ipv4Mapped() {
        #expect(IPAddress("::ffff:10.1.2.3")?.ipv4Mapped == 0x0A01_0203)
        #expect(IPAddress("::10.1.2.3")?.ipv4Mapped == nil)
        #expect(IPAddress("10.1.2.3")?.ipv4Mapped == nil)
    }

    @Test func readsSockaddrIn() {
        var sin = sockaddr_in()
        sin.sin_family = sa_family_t(AF_INET)
        sin.sin_port = in_port_t(8080).bigEndian
        #expect(inet_pton(AF_INET, "203.0.113.7", &sin.sin_addr) == 1)
        let address = withUnsafePointer(to: &sin) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { IPAddress(sockaddr: $0) }
        }
        #expect(address == .v4(0xCB00_7107))
        #expect(address?.description == "203.0.113.7")

        let withLength = withUnsafePointer(to: &sin) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                IPAddress(sockaddr: $0, length: MemoryLayout<sockaddr_in>.size)
            }
        }
        #expect(withLength == address)
    }

    @Test(arguments: ["2606:4700::1111", "::1", "::ffff:192.168.0.1", "fe80::1"])
    func readsSockaddrIn6(text: String) {
        var sin6 = sockaddr_in6()
        sin6.sin6_family = sa_family_t(AF_INET6)
        sin6.sin6_port = in_port_t(443).bigEndian
        #expect(inet_pton(AF_INET6, text, &sin6.sin6_addr) == 1)
        let address = withUnsafePointer(to: &sin6) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { IPAddress(sockaddr: $0) }
        }
        #expect(address == IPAddress(text))
        #expect(address?.description == text)

        let tooShort = withUnsafePointer(to: &sin6) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                IPAddress(sockaddr: $0, length: MemoryLayout<sockaddr_in>.size)
            }
        }
        #expect(tooShort == nil)
    }

    @Test func ignoresOtherFamilies() {
        var storage = sockaddr_storage()
        storage.ss_family = sa_family_t(AF_UNIX)
        let address = withUnsafePointer(to: &storage) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { IPAddress(sockaddr: $0) }
        }
        #expect(address == nil)
    }
}

/// Compares the strict parser with the C library's `inet_pton` on many generated strings, so that
/// the guard never reads a literal differently from the system.
@Suite struct IPAddressDifferentialTests {
    static func candidates(alphabet: [Character], count: Int, maxLength: Int, seed: UInt64) -> [String] {
        var generator = SplitMix64(state: seed)
        return (0..<count).map { _ in
            let length = Int.random(in: 1...maxLength, using: &generator)
            return String((0..<length).map { _ in alphabet.randomElement(using: &generator) ?? "0" })
        }
    }

    @Test func agreesWithInetPtonOnIPv6() {
        let alphabet = Array("0123456789abcdefABCDEF::::...") + ["0", "0", "f"]
        var accepted = 0
        for text in Self.candidates(alphabet: alphabet, count: 60_000, maxLength: 16, seed: 42)
            + ["::", "::1", "1::", "::ffff:1.2.3.4", "1:2:3:4:5:6:7:8", "1:2:3:4:5:6:7::", "::1:2:3:4:5:6:7"]
        {
            guard text.contains(":") else { continue }
            var buffer = in6_addr()
            let system = inet_pton(AF_INET6, text, &buffer) == 1
            let ours = IPAddress(text)
            #expect((ours != nil) == system, "\(text)")
            if system, let ours {
                accepted += 1
                var expected: UInt128 = 0
                withUnsafeBytes(of: buffer) { for byte in $0 { expected = (expected << 8) | UInt128(byte) } }
                #expect(ours == .v6(expected), "\(text)")
                #expect(IPAddress(ours.description) == ours, "\(text)")
            }
        }
        #expect(accepted > 100)
    }

    @Test func agreesWithInetPtonOnIPv4() {
        let alphabet = Array("0123456789....") + ["2", "5"]
        for text in Self.candidates(alphabet: alphabet, count: 40_000, maxLength: 16, seed: 7) {
            var buffer = in_addr()
            let system = inet_pton(AF_INET, text, &buffer) == 1
            let ours = IPAddress(text)
            #expect((ours != nil) == system, "\(text)")
            if system {
                #expect(ours == .v4(UInt32(bigEndian: buffer.s_addr)), "\(text)")
            }
        }
    }
}
