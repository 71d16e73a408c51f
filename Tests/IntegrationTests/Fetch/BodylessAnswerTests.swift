import ImageFetchWorker
import Testing

/// Answers whose headers say more than their body can: libcurl reads no body for a `204`, and
/// decides on a redirect or an empty `Location` by its own rules; the result must say what the
/// origin answered, not that a body came short or was too large.
@Suite("FetchEngine: answers with no body to speak of")
struct BodylessAnswerTests {
    static func fetch(_ origin: RawOrigin, _ path: String) async throws -> FetchResponse {
        let engine = try FetchEngine(
            configuration: FetchEngineTests.configuration { $0.maxBytes = 1_000_000 }, addressPolicy: nil)
        defer { engine.shutdown() }
        return await FetchEngineTests.fetch(engine, origin.url(path))
    }

    /// A `204` with a `Content-Length` was `truncated`, retryable: retried to the last attempt and
    /// dead-lettered, for an answer that is simply empty.
    @Test func aNoContentAnswerWithALengthIsEmptyNotTruncated() async throws {
        let origin = try RawOrigin(responses: ["/empty": "HTTP/1.1 204 No Content\r\nContent-Length: 5000\r\n\r\n"])
        defer { origin.stop() }
        let response = try await Self.fetch(origin, "/empty")
        #expect(response.error == nil, "\(String(describing: response.error))")
        #expect(response.httpStatus == 204)
        #expect(response.body.isEmpty)
    }

    /// A 204 naming a length over the limit is no more too large than it is truncated.
    @Test func aNoContentAnswerWithAHugeLengthIsEmpty() async throws {
        let origin = try RawOrigin(responses: ["/empty": "HTTP/1.1 204 No Content\r\nContent-Length: 2000000\r\n\r\n"])
        defer { origin.stop() }
        let response = try await Self.fetch(origin, "/empty")
        #expect(response.error == nil, "\(String(describing: response.error))")
        #expect(response.httpStatus == 204)
    }

    /// An error answer that declares a huge page is its status, with its `Retry-After` (the
    /// worker now ends it at its headers; this origin closes there anyway).
    @Test(.timeLimit(.minutes(1)))
    func anErrorAnswerThatDeclaresAHugePageIsItsStatus() async throws {
        let origin = try RawOrigin(responses: [
            "/busy": "HTTP/1.1 503 Busy\r\nRetry-After: 300\r\nContent-Length: 99999999\r\n\r\n"
        ])
        defer { origin.stop() }
        let response = try await Self.fetch(origin, "/busy")
        #expect(response.failure == .httpStatus(503), "\(String(describing: response.failure))")
        #expect(response.retryAfter == "300")
    }

    /// libcurl follows a redirect whatever length the redirect declares for itself.
    @Test func aRedirectThatDeclaresALargeBodyIsFollowed() async throws {
        let origin = try RawOrigin(responses: [
            "/moved": "HTTP/1.1 302 Found\r\nLocation: /ok\r\nContent-Length: 99999999999\r\n\r\n",
            "/ok": "HTTP/1.1 200 OK\r\nContent-Type: image/png\r\nContent-Length: 4\r\n\r\nPNG!",
        ])
        defer { origin.stop() }
        let response = try await Self.fetch(origin, "/moved")
        #expect(response.error?.code != .tooLarge, "\(String(describing: response.error))")
    }

    /// An empty `Location` is no redirect (libcurl ignores it): the answer is its status.
    @Test(arguments: ["", "   "])
    func anEmptyLocationIsTheAnswersStatus(location: String) async throws {
        let origin = try RawOrigin(responses: [
            "/nowhere": "HTTP/1.1 302 Found\r\nLocation:\(location)\r\nContent-Length: 0\r\n\r\n"
        ])
        defer { origin.stop() }
        let response = try await Self.fetch(origin, "/nowhere")
        #expect(response.error?.code == .httpError, "\(String(describing: response.error))")
        #expect(response.httpStatus == 302)
    }

    /// A `101` no one asked for, with a body to the close: libcurl takes it as the answer, and
    /// the result names its status, as for any other answer that came.
    @Test func anUnaskedSwitchingProtocolsIsAnAnswerWithItsStatus() async throws {
        let origin = try RawOrigin(responses: [
            "/up": "HTTP/1.1 101 Switching Protocols\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\nhello"
        ])
        defer { origin.stop() }
        let response = try await Self.fetch(origin, "/up")
        #expect(response.failure == .httpStatus(101), "\(String(describing: response.failure))")
        #expect(response.httpStatus == 101)
    }
}
