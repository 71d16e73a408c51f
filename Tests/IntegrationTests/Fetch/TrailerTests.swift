import ImageFetchWorker
import Testing

/// A chunked body may end with trailer fields, which libcurl hands to the header callback after
/// the body. They belong to the answer that is already complete: none may start a new response
/// (which emptied the body) or change what the answer's own headers said.
@Suite("FetchEngine: trailers")
struct TrailerTests {
    static let body = "PNG!PNG!PNG!"

    static func chunked(trailer: String) -> String {
        "HTTP/1.1 200 OK\r\nContent-Type: image/png\r\nTransfer-Encoding: chunked\r\n\r\n"
            + "c\r\n\(body)\r\n0\r\n\(trailer)\r\n"
    }

    @Test(arguments: [
        "HTTP/1.1 200 OK: x\r\n",
        "HTTP/1.1 404 Not Found: x\r\nContent-Length: 0\r\n",
        "Content-Type: text/html\r\nContent-Length: 99999\r\n",
    ])
    func aTrailerLeavesTheAnswerAsItsHeadersAndBodySaid(trailer: String) async throws {
        let origin = try RawOrigin(responses: ["/t": Self.chunked(trailer: trailer)])
        defer { origin.stop() }
        let response = try await BodylessAnswerTests.fetch(origin, "/t")
        #expect(response.error == nil, "\(String(describing: response.error))")
        #expect(response.httpStatus == 200)
        #expect(String(decoding: response.body, as: UTF8.self) == Self.body)
        #expect(response.contentType == "image/png")
    }

    /// A followed redirect's trailers come before the next response: none may pass for that
    /// response's status line, nor hide the real one. (This passed before: the real response's
    /// headers still landed. The harm, a lost status, is the next tests'.)
    @Test(arguments: ["HTTP/1.1 404 Not Found: x\r\n", "HTTP/1.1 302 Found: x\r\n", "Content-Type: text/html\r\n"])
    func aRedirectsTrailerLeavesTheNextAnswerAlone(trailer: String) async throws {
        let origin = try RawOrigin(responses: [
            "/moved": "HTTP/1.1 302 Found\r\nLocation: /ok\r\nTransfer-Encoding: chunked\r\n\r\n"
                + "5\r\nmoved\r\n0\r\n\(trailer)\r\n",
            "/ok": "HTTP/1.1 200 OK\r\nContent-Type: image/png\r\nContent-Length: 12\r\n\r\n\(Self.body)",
        ])
        defer { origin.stop() }
        let response = try await BodylessAnswerTests.fetch(origin, "/moved")
        #expect(response.error == nil, "\(String(describing: response.error))")
        #expect(response.httpStatus == 200)
        #expect(String(decoding: response.body, as: UTF8.self) == Self.body)
        #expect(response.contentType == "image/png")
        #expect(response.redirects == 1)
    }

    /// A 3xx that libcurl does not follow (no `Location`) is the final answer, and its trailers
    /// are trailers: an `HTTP/` one cleared the answer's `Content-Type`.
    @Test(arguments: ["HTTP/1.1 200 OK: x\r\n", "Content-Type: image/png\r\n"])
    func aFinalRedirectsTrailerLeavesItsAnswerAlone(trailer: String) async throws {
        let origin = try RawOrigin(responses: [
            "/nowhere": "HTTP/1.1 300 Multiple Choices\r\nContent-Type: text/html\r\n"
                + "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\(trailer)\r\n"
        ])
        defer { origin.stop() }
        let response = try await BodylessAnswerTests.fetch(origin, "/nowhere")
        #expect(response.failure == .httpStatus(300), "\(String(describing: response.failure))")
        #expect(response.contentType == "text/html")
    }

    /// A followed redirect's trailer that begins with `HTTP/` passed for the next response's
    /// status line, and the real one then went unread: a 503's `Retry-After` was lost.
    @Test func aRedirectsTrailerDoesNotHideTheNextStatus() async throws {
        let origin = try RawOrigin(responses: [
            "/moved": "HTTP/1.1 302 Found\r\nLocation: /busy\r\nTransfer-Encoding: chunked\r\n\r\n"
                + "5\r\nmoved\r\n0\r\nHTTP/1.1 404 Not Found: x\r\n\r\n",
            "/busy": "HTTP/1.1 503 Busy\r\nRetry-After: 7\r\nContent-Length: 0\r\n\r\n",
        ])
        defer { origin.stop() }
        let response = try await BodylessAnswerTests.fetch(origin, "/moved")
        #expect(response.failure == .httpStatus(503), "\(String(describing: response.failure))")
        #expect(response.retryAfter == "7")
    }
}
