import CCurl
import Dispatch
import Foundation
import Testing
@testable import ImageFetchWorker

#if canImport(Glibc)
import Glibc
#endif

/// The multi handle's event source (multi_socket on epoll): transfers run on socket events and on
/// libcurl's timers, and a wake-up from another thread ends a wait.
@Suite struct CurlMultiHandleTests {
    @Test func aWakeUpFromAnotherThreadEndsALongWait() throws {
        let multi = try CurlMultiHandle()
        try multi.wakeup()
        let early = DispatchTime.now()
        try multi.poll(timeoutMilliseconds: 30_000)
        #expect(seconds(since: early) < 10, "a wake-up sent before the wait ends it at once")

        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(100)) { try? multi.wakeup() }
        let started = DispatchTime.now()
        try multi.poll(timeoutMilliseconds: 30_000)
        #expect(seconds(since: started) < 10, "a wake-up from another thread ends the wait")
    }

    @Test func aTransferRunsToItsEndOnSocketEvents() throws {
        let server = try LoopbackServer(respond: true)
        let (result, status) = try run(url: "http://127.0.0.1:\(server.port)/", timeoutMs: 20_000)
        #expect(result == CURLE_OK)
        #expect(status == 200)
    }

    /// A server that accepts and never answers: only libcurl's timer can end the transfer (and only
    /// a timer starts one), so this fails if the event source did not honour libcurl's deadlines.
    @Test func aSilentServerTimesOutThroughLibcurlsTimer() throws {
        let server = try LoopbackServer(respond: false)
        let started = DispatchTime.now()
        let (result, _) = try run(url: "http://127.0.0.1:\(server.port)/", timeoutMs: 300)
        #expect(result == CURLE_OPERATION_TIMEDOUT)
        #expect(seconds(since: started) < 10)
    }

    @Test func aClosedPortFailsToConnect() throws {
        let port = try LoopbackServer.unusedPort()
        let (result, _) = try run(url: "http://127.0.0.1:\(port)/", timeoutMs: 20_000)
        #expect(result == CURLE_COULDNT_CONNECT)
    }

    // MARK: - Helpers

    /// Drives one transfer the way ``FetchLoop`` does: perform, read completions, wait.
    private func run(url: String, timeoutMs: Int) throws -> (CURLcode, Int) {
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

    private func seconds(since start: DispatchTime) -> Double {
        Double(DispatchTime.now().uptimeNanoseconds - start.uptimeNanoseconds) / 1e9
    }
}

/// One connection on 127.0.0.1: answers a small 200, or holds the connection open without a word.
private final class LoopbackServer: @unchecked Sendable {
    // @unchecked Sendable: `listener` is set once in init; the accepting thread only reads it.
    let port: Int
    private let listener: Int32

    init(respond: Bool) throws {
        (listener, port) = try Self.listen()
        let listener = self.listener
        Thread.detachNewThread {
            let connection = accept(listener, nil, nil)
            guard connection >= 0 else { return }
            if respond {
                var buffer = [UInt8](repeating: 0, count: 4096)
                _ = read(connection, &buffer, buffer.count)
                let response = Array("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello".utf8)
                _ = response.withUnsafeBytes { write(connection, $0.baseAddress, $0.count) }
            } else {
                sleep(5)
            }
            close(connection)
        }
    }

    deinit { close(listener) }

    /// A port nothing listens on (bound, then closed).
    static func unusedPort() throws -> Int {
        let (socket, port) = try listen()
        close(socket)
        return port
    }

    private static func listen() throws -> (Int32, Int) {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socket >= 0 else { throw POSIXError(.EIO) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(socket, $0, length) == 0 && Glibc.listen(socket, 4) == 0 && getsockname(socket, $0, &length) == 0
            }
        }
        guard bound else {
            close(socket)
            throw POSIXError(.EADDRINUSE)
        }
        return (socket, Int(UInt16(bigEndian: address.sin_port)))
    }
}
