import CCurl
import Dispatch
import Testing

@testable import ImageFetchWorker

/// The multi handle's event source (multi_socket on epoll), driven the way ``FetchLoop`` drives
/// it: transfers run on socket events and on libcurl's timers, and a wake-up from another thread
/// ends a wait.
@Suite struct CurlMultiHandleTests {
    @Test func aWakeUpFromAnotherThreadEndsALongWait() throws {
        let multi = try CurlMultiHandle()
        try multi.wakeup()
        let early = DispatchTime.now()
        try multi.poll(timeoutMilliseconds: 30_000)
        #expect(Self.seconds(since: early) < 10, "a wake-up sent before the wait ends it at once")

        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(100)) { try? multi.wakeup() }
        let started = DispatchTime.now()
        try multi.poll(timeoutMilliseconds: 30_000)
        #expect(Self.seconds(since: started) < 10, "a wake-up from another thread ends the wait")
    }

    @Test func aTransferRunsToItsEndOnSocketEvents() async throws {
        let origin = try await TestOrigin.start()
        let (result, status) = try Self.run(url: origin.url("/ok.png"), timeoutMs: 20_000)
        try await origin.shutdown()
        #expect(result == CURLE_OK)
        #expect(status == 200)
    }

    /// An origin that answers only after 5 s: only libcurl's timer can end the transfer (and only
    /// a timer starts one), so this fails if the event source did not honour libcurl's deadlines.
    @Test func aSlowOriginTimesOutThroughLibcurlsTimer() async throws {
        let origin = try await TestOrigin.start()
        let started = DispatchTime.now()
        let (result, _) = try Self.run(url: origin.url("/slow?ms=5000"), timeoutMs: 300)
        #expect(result == CURLE_OPERATION_TIMEDOUT)
        #expect(Self.seconds(since: started) < 4)
        try await origin.shutdown()
    }

    @Test func aClosedPortFailsToConnect() throws {
        let port = try TestBroker.freePort()
        let (result, _) = try Self.run(url: "http://127.0.0.1:\(port)/", timeoutMs: 20_000)
        #expect(result == CURLE_COULDNT_CONNECT)
    }

    /// Runs one transfer: perform, read completions, wait; at most 15 s.
    private static func run(url: String, timeoutMs: Int) throws -> (CURLcode, Int) {
        let multi = try CurlMultiHandle()
        let easy = try CurlEasyHandle()
        try easy.set(CURLOPT_URL, url)
        try easy.set(CURLOPT_TIMEOUT_MS, timeoutMs)
        try easy.setWriteCallback { _, size, count, _ in size * count }
        try multi.add(easy)
        defer { try? multi.remove(easy) }
        let started = DispatchTime.now()
        while seconds(since: started) < 15 {
            try multi.perform()
            if let (_, result) = multi.nextCompletion() {
                return (result, easy.long(CURLINFO_RESPONSE_CODE) ?? 0)
            }
            try multi.poll(timeoutMilliseconds: 1_000)
        }
        Issue.record("the transfer did not end")
        return (CURLE_OK, 0)
    }

    private static func seconds(since start: DispatchTime) -> Double {
        Double(DispatchTime.now().uptimeNanoseconds - start.uptimeNanoseconds) / 1e9
    }
}
