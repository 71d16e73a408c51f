import ImageFetchWorker
import Testing

/// libcurl checks `fetch.max_bytes` (`CURLOPT_MAXFILESIZE_LARGE`) against the Content-Length of
/// every response, error answers too. A `503` with `Retry-After` and a large error page came out
/// as `too_large`, final: not retried, its pause lost. The status says what happened.
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
