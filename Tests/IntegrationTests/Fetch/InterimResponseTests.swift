import Foundation
import ImageFetchWorker
import Testing

/// An interim answer (1xx) is no response: libcurl keeps its code as the transfer's response
/// code when the connection drops after it. A dropped S3 upload over 1 MiB (sent with
/// `Expect: 100-continue`) was a final "the store answered HTTP 100", and a job's result said
/// `http_status: 100`.
@Suite("FetchEngine: an interim 1xx answer and then nothing")
struct InterimResponseTests {
    @Test func aConnectionLostAfterAnInterimAnswerHasNoStatus() async throws {
        let origin = try RawOrigin(responses: ["/continue": "HTTP/1.1 100 Continue\r\n\r\n"])
        defer { origin.stop() }
        let engine = try FetchEngine(configuration: FetchEngineTests.configuration(), addressPolicy: nil)
        defer { engine.shutdown() }
        let response = await FetchEngineTests.fetch(engine, origin.url("/continue"))
        #expect(response.failure != nil)
        #expect(response.httpStatus == nil)
    }
}
