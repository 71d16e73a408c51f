import Foundation
import ImageFetchWorker
import Testing

/// Redirects dressed up to slip past the engine's checks of a redirect target, from an origin
/// that writes its answers byte by byte. The checks must see what libcurl follows.
@Suite("FetchEngine: disguised redirects")
struct RedirectDisguiseTests {
    static let image = "HTTP/1.1 200 OK\r\nContent-Type: image/png\r\nContent-Length: 4\r\n\r\nPNG!"

    /// libcurl reads a response's status line once. A later header line that starts with `HTTP/`
    /// and has a colon is an ordinary header to it, and it still follows the 302.
    @Test func aHeaderThatLooksLikeAStatusLineDoesNotHideTheLocation() async throws {
        try await Self.expectRedirectToLocalhostRefused(
            "HTTP/1.1 302 Found\r\nHTTP/1.1 200 OK: x\r\nLocation: http://localhost:{port}/elsewhere.png\r\n"
                + "Content-Length: 0\r\n\r\n")
    }

    /// `answer` redirects to localhost from an origin on 127.0.0.1, the one allowed host: the
    /// engine must refuse the target (`host_not_allowed`) without requesting it.
    static func expectRedirectToLocalhostRefused(_ answer: String) async throws {
        let origin = try RawOrigin(responses: ["/redirect": answer, "/elsewhere.png": Self.image])
        defer { origin.stop() }
        let engine = try FetchEngine(
            configuration: FetchEngineTests.configuration {
                $0.allowedHosts = ["127.0.0.1"]
                $0.maxRedirects = 3
            }, addressPolicy: nil)
        defer { engine.shutdown() }
        let response = await FetchEngineTests.fetch(engine, origin.url("/redirect"))
        #expect(response.error?.code == .hostNotAllowed, "\(String(describing: response.error))")
        #expect(origin.requests == ["/redirect"], "the target must not be requested")
    }

    /// libcurl takes one to three slashes after the scheme, and a target that starts with three.
    @Test(arguments: [
        "http:/user:hunter2@127.0.0.1:{port}/", "http:///user:hunter2@127.0.0.1:{port}/",
        "///user:hunter2@127.0.0.1:{port}/",
    ])
    func userInfoBehindOddSlashesIsRefused(target: String) async throws {
        let origin = try RawOrigin(responses: [
            "/odd": "HTTP/1.1 302 Found\r\nLocation: \(target)elsewhere.png\r\nContent-Length: 0\r\n\r\n",
            "/elsewhere.png": Self.image,
        ])
        defer { origin.stop() }
        let engine = try FetchEngine(
            configuration: FetchEngineTests.configuration { $0.maxRedirects = 3 }, addressPolicy: nil)
        defer { engine.shutdown() }
        let response = await FetchEngineTests.fetch(engine, origin.url("/odd"))
        #expect(response.error?.code == .invalidURL, "\(target): \(String(describing: response.error))")
        #expect(response.error?.message.contains("hunter2") == false)
        #expect(origin.requests == ["/odd"], "the target must not be requested")
    }

    /// libcurl reads a `Location` value up to its first CR and trims every C space (VT and FF too)
    /// at both ends. A check that read the raw value failed to parse it and let the redirect go
    /// unchecked: the host lists were skipped.
    @Test(arguments: [
        "Location: http://localhost:{port}/elsewhere.png\rx\r\n",
        "Location:\u{0B}http://localhost:{port}/elsewhere.png\r\n",
        "Location: http://localhost:{port}/elsewhere.png\u{0C}\r\n",
    ])
    func aLocationWithStrayControlBytesIsCheckedAsLibcurlReadsIt(header: String) async throws {
        try await Self.expectRedirectToLocalhostRefused("HTTP/1.1 302 Found\r\n\(header)Content-Length: 0\r\n\r\n")
    }
}
