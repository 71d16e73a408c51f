import ImageFetchWorker
import Testing

/// An error answer that declares a page over `fetch.max_bytes` came out as `too_large`, final (the
/// limit was libcurl's, checked on every answer): not retried, its pause lost. The status says
/// what happened, at once, without waiting for the page.
@Suite("FetchEngine: an error answer over max_bytes")
struct ErrorAnswerLengthTests {
    @Test(arguments: [(503, true), (404, false)])
    func anErrorAnswerOverTheLimitIsItsStatus(status: Int, retryable: Bool) async throws {
        let origin = try RawOrigin(responses: [
            "/big-error": "HTTP/1.1 \(status) Nope\r\nRetry-After: 60\r\nContent-Length: 2000000\r\n\r\n"
        ])
        defer { origin.stop() }
        let engine = try FetchEngine(
            configuration: FetchEngineTests.configuration { $0.maxBytes = 1_000_000 }, addressPolicy: nil)
        defer { engine.shutdown() }
        let response = await FetchEngineTests.fetch(engine, origin.url("/big-error"))
        #expect(response.error?.code == .httpError, "\(String(describing: response.error))")
        #expect(response.error?.retryable == retryable)
        #expect(response.httpStatus == status)
    }
}
