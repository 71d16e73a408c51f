import ImageFetchWorker
import Testing

/// libcurl 7.88 ends a transfer whose answer is not HTTP with `UNSUPPORTED_PROTOCOL`, the code of
/// a redirect to a foreign scheme too. Such an answer came out as `unsupported_scheme`, final,
/// with a message that blamed the job's URL.
@Suite("FetchEngine: an answer that is not HTTP")
struct NotHTTPAnswerTests {
    @Test(arguments: ["FooBar\r\n\r\n", "HTTP/1.3 200 OK\r\nContent-Length: 4\r\n\r\nPNG!"])
    func anAnswerThatIsNotHTTPIsAConnectFailure(answer: String) async throws {
        let origin = try RawOrigin(responses: ["/odd": answer])
        defer { origin.stop() }
        let engine = try FetchEngine(configuration: FetchEngineTests.configuration(), addressPolicy: nil)
        defer { engine.shutdown() }
        let response = await FetchEngineTests.fetch(engine, origin.url("/odd"))
        #expect(response.error?.code == .connectFailed, "\(String(describing: response.error))")
        #expect(response.error?.retryable == true)
        #expect(response.error?.message == "the origin's answer is not HTTP")
    }
}
