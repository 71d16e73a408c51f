import Testing

@testable import ImageFetchWorker

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

@Suite struct URLPolicyTests {
    private func validated(_ string: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> ValidatedURL {
        switch URLPolicy.validate(string) {
        case .success(let url):
            return url
        case .failure(let error):
            Issue.record("expected \(string) to pass, got \(error)", sourceLocation: sourceLocation)
            throw error
        }
    }

    private func errorCode(_ string: String) -> JobError.Code? {
        if case .failure(let refusal) = URLPolicy.validate(string) { return JobError(refusal).code }
        return nil
    }

    @Test(arguments: [
        ("http://127.0.0.1:8080/a", "http://127.0.0.1:8080/a", "127.0.0.1"),
        ("http://[::1]:8080/", "http://[::1]:8080/", "[::1]"),
        ("http://[0:0:0:0:0:0:0:1]:8080/", "http://[::1]:8080/", "[::1]"),
        ("http://[::FFFF:7F00:1]/", "http://[::ffff:127.0.0.1]/", "[::ffff:127.0.0.1]"),
        ("http://0x7f000001:8080/", "http://127.0.0.1:8080/", "127.0.0.1"),
        ("http://2130706433:8080/", "http://127.0.0.1:8080/", "127.0.0.1"),
        ("http://0177.0.0.1/", "http://127.0.0.1/", "127.0.0.1"),
        ("http://0x7f.0.0.1/", "http://127.0.0.1/", "127.0.0.1"),
        ("http://0X7F.1/", "http://127.0.0.1/", "127.0.0.1"),
        ("http://127.1/", "http://127.0.0.1/", "127.0.0.1"),
        ("http://127.0.1/", "http://127.0.0.1/", "127.0.0.1"),
        ("http://0/", "http://0.0.0.0/", "0.0.0.0"),
        ("http://10.0.0.1./x", "http://10.0.0.1/x", "10.0.0.1"),
        ("http://4294967295/", "http://255.255.255.255/", "255.255.255.255"),
        ("http://00000000000000000177.0.0.1/", "http://127.0.0.1/", "127.0.0.1"),
        ("http://169.254.43518/", "http://169.254.169.254/", "169.254.169.254"),
    ])
    func normalisesIPLiterals(input: String, url: String, host: String) throws {
        let result = try validated(input)
        #expect(result.url == url)
        #expect(result.host == host)
        #expect(result.ipAddress != nil)
    }

    @Test func acceptsOrdinaryURLs() throws {
        let upper = try validated("HTTPS://Example.com/x")
        #expect(upper.url == "https://example.com/x")
        #expect(upper.scheme == "https")
        #expect(upper.host == "example.com")
        #expect(upper.isHTTPS)
        #expect(upper.ipAddress == nil)

        let plain = try validated("http://images.example.org/a/b.png?size=large&x=%2F%20")
        #expect(plain.url == "http://images.example.org/a/b.png?size=large&x=%2F%20")
        #expect(!plain.isHTTPS)

        #expect(try validated("http://example.com").url == "http://example.com/")
        #expect(try validated("http://example.com?q=1").url == "http://example.com/?q=1")
        #expect(try validated("http://example.com/a#frag").url == "http://example.com/a")
        #expect(try validated("http://example.com:/a").url == "http://example.com/a")
        #expect(try validated("http://example.com:0080/a").url == "http://example.com:80/a")
        #expect(try validated("http://my_host.internal/").host == "my_host.internal")
        #expect(try validated("http://example.com./").host == "example.com.")
        // '@' outside the authority is not user info.
        #expect(
            try validated("http://example.com/@user/pic.png?by=a@b").url == "http://example.com/@user/pic.png?by=a@b")
        // Non-ASCII in the path is percent-encoded; existing escapes stay as they are.
        #expect(
            try validated("http://example.com/bild/größe.jpg?%zz").url
                == "http://example.com/bild/gr%C3%B6%C3%9Fe.jpg?%zz")
    }

    @Test(arguments: [
        "file:///etc/passwd", "gopher://x", "ftp://example.com/a.png", "FILE:///etc/passwd",
        "data:image/png;base64,AAAA", "javascript:alert(1)", "httpx://example.com/", "example.com:8080/x",
    ])
    func rejectsOtherSchemes(input: String) {
        #expect(errorCode(input) == .unsupportedScheme)
    }

    @Test(arguments: [
        "http://user:pw@host/", "http://user@host/", "http://@host/", "https://a@b@host/", "http://host:80@evil/",
        "/relative", "relative/path", "//example.com/x", "", "http:", "http:/example.com", "http:example.com",
        "http://", "http:///path", "http://:80/", "http://?x", "http://#x",
        "http://exa mple.com/", "http://example.com/a b", " http://example.com/", "http://example.com/\t",
        "http://example.com/\n", "http://example.com/\u{7F}", "http://example.com/\u{85}",
        "http://example.com/\u{3000}", "http://example.com/\u{A0}", "http://example.com/a\u{2028}b",
        "http://[::1/", "http://[::1]x/", "http://[fe80::1%25eth0]/", "http://[127.0.0.1]/", "http://[]/",
        "http://example.com:65536/", "http://example.com:0/", "http://example.com:8o/", "http://example.com:-1/",
        "http://example.com:80:80/", "http://::1/",
        "http://ex\u{0430}mple.com/", "http://xn--ls8h.example/", "http://ex%61mple.com/", "http://example.com\\@evil/",
        "http://a..b/", "http://./",
        "http://1.2.3.256/", "http://256.0.0.1/", "http://4294967296/", "http://1.2.3.4.5/", "http://08.0.0.1/",
        "http://example.123/", "http://1..2/", "http://0x/", "http://0x.1/", "http://1.0x/",
    ])
    func rejectsInvalidURLs(input: String) {
        #expect(errorCode(input) == .invalidURL)
    }

    @Test func enforcesTheLengthLimit() throws {
        let prefix = "http://example.com/"
        let fits = prefix + String(repeating: "a", count: URLPolicy.maxLength - prefix.utf8.count)
        #expect(fits.utf8.count == 8192)
        #expect(try validated(fits).url == fits)

        let tooLong = fits + "a"
        #expect(errorCode(tooLong) == .invalidURL)
    }

    @Test func messagesNeverContainTheURL() {
        let secret = "s3cr3t-token"
        for input in [
            "http://user:\(secret)@host/", "gopher://\(secret)/", "http://\(secret) x/", "http://\(secret):99999/",
            "http://" + secret + String(repeating: "x", count: 9000),
        ] {
            guard case .failure(let refusal) = URLPolicy.validate(input) else {
                Issue.record("expected a failure")
                continue
            }
            let error = JobError(refusal)
            #expect(!error.message.contains(secret))
            #expect(!error.retryable)
        }
    }
}

/// Compares the lenient IPv4 reading of URL hosts with the C library's `inet_aton`, which is what
/// the "ends in a number" rule imitates.
@Suite struct URLPolicyDifferentialTests {
    @Test func numericHostsReadLikeInetAton() {
        var generator = SplitMix64(state: 2024)
        let alphabet = Array("0123456789x.") + ["0", "0", "7", "f"]
        var compared = 0
        for _ in 0..<40_000 {
            let length = Int.random(in: 1...14, using: &generator)
            let host = String((0..<length).map { _ in alphabet.randomElement(using: &generator) ?? "0" })
            // Only hosts that end in a decimal digit are numeric for both readers; a trailing dot
            // is the DNS root to a URL but an error to inet_aton.
            guard let last = host.last, last.isNumber, host.first != "." else { continue }
            var buffer = in_addr()
            let system = inet_aton(host, &buffer) != 0
            let ours = try? URLPolicy.validate("http://\(host)/").get().host
            if system {
                #expect(ours == IPAddress.v4(UInt32(bigEndian: buffer.s_addr)).description, "\(host)")
            } else if ours != nil {
                // Ours may accept only what is a plain host name, never a different address.
                #expect(ours.map { IPAddress($0) == nil } == true, "\(host)")
            }
            compared += 1
        }
        #expect(compared > 1000)
    }
}
