import Foundation
import ImageFetchWorker
import ImageSamples
import Testing

/// Whether a body's end was announced (a `Content-Length`, chunks) or was only where the origin
/// closed the connection: a close that comes early looks like a whole body, so the worker tries
/// a cut image of such a body again (`Worker.checkImage`).
@Suite("FetchEngine: how a body ends")
struct BodyFramingTests {
    static let head = "HTTP/1.1 200 OK\r\nContent-Type: image/png\r\n"

    @Test(arguments: [
        (head + "Connection: close\r\n\r\nPNG!", true),
        ("HTTP/1.0 200 OK\r\nContent-Type: image/png\r\n\r\nPNG!", true),
        (head + "Content-Length: 4\r\n\r\nPNG!", false),
        (head + "Transfer-Encoding: chunked\r\n\r\n4\r\nPNG!\r\n0\r\n\r\n", false),
        // Read to the close, as libcurl reads every coding but chunked.
        (head + "Transfer-Encoding: identity\r\n\r\nPNG!", true),
    ])
    func aBodyThatOnlyTheCloseEndedIsMarked(answer: String, endedByClose: Bool) async throws {
        let origin = try RawOrigin(responses: ["/i": answer])
        defer { origin.stop() }
        let response = try await BodylessAnswerTests.fetch(origin, "/i")
        #expect(response.error == nil, "\(String(describing: response.error))")
        #expect(String(decoding: response.body, as: UTF8.self) == "PNG!")
        #expect(response.endedByClose == endedByClose)
    }

    /// The same cut PNG, its end announced or not: a close-ended one is fetched again before it
    /// ends `truncated`; one whose length the transfer met is final at once.
    @Test(.timeLimit(.minutes(2)))
    func aCutImageEndedOnlyByTheCloseIsRetried() async throws {
        let png = ImageSamples.png(width: 7, height: 3)
        // RawOrigin sends its text as Latin-1: one character a byte.
        let cut = String(String.UnicodeScalarView(png.prefix(png.count - 6).map { Unicode.Scalar($0) }))
        let origin = try RawOrigin(responses: [
            "/closed.png": Self.head + "Connection: close\r\n\r\n" + cut,
            "/sized.png": Self.head + "Content-Length: \(png.count - 6)\r\n\r\n" + cut,
        ])
        defer { origin.stop() }
        var configuration = try TestBroker.configuration("framing")
        configuration.retry.delays = [1]
        configuration.retry.maxAttempts = 2
        defer { TestBroker.cleanUp(configuration) }
        let jobs = ["closed", "sized"].map { JobPublisher.jobBody(id: $0, url: origin.url("/\($0).png")) }
        #expect(try TestBroker.publish(configuration, bodies: jobs) == 2)
        let results = try QueueCollector(configuration, queue: configuration.queue.results)
        defer { results.close() }
        let worker = try WorkerProcess(
            environment: TestBroker.environment(configuration, storage: WorkerEndToEndTests.storageFolder()))
        #expect(await eventually(timeout: 40) { results.objects.count == 2 }, "log:\n\(worker.log.suffix(2000))")
        let byID = HostileOriginTests.byID(results)
        for id in ["closed", "sized"] {
            #expect(
                HostileOriginTests.error(byID[id])?["code"] as? String == "truncated", "\(String(describing: byID[id]))"
            )
        }
        let requests = origin.requests
        #expect(requests.filter { $0 == "/closed.png" }.count == 2, "\(requests)")
        #expect(requests.filter { $0 == "/sized.png" }.count == 1, "\(requests)")
        #expect(await worker.stop() == 0)
    }
}
