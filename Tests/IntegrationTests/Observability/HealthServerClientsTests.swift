import Dispatch
import Foundation
import ImageFetchWorker
import Logging
import NIOCore
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The operations endpoint listens on every address by default: clients that never finish a
/// request, never read their answers or open connection after connection must not run the worker
/// out of memory or file descriptors.
@Suite struct HealthServerClientsTests {
    final class Calls: Sendable {
        let count = Atomic<Int>(0)
    }

    /// A server whose `/metrics` answer is 64 KiB, counting how often it is made.
    static func server(
        maxConnections: Int = 64, requestDeadline: TimeAmount = .seconds(30)
    ) throws -> (HealthServer, Calls) {
        let calls = Calls()
        let probes = HealthServer.Probes(
            isReady: { true }, checkHealth: { $0(true) },
            metrics: {
                calls.count.add(1, ordering: .relaxed)
                return [UInt8](repeating: UInt8(ascii: "m"), count: 64 * 1024)
            })
        let server = try HealthServer(
            host: "127.0.0.1", port: 0, probes: probes, logger: Logger(label: "test.health"),
            maxConnections: maxConnections, requestDeadline: requestDeadline)
        return (server, calls)
    }

    /// A TCP connection to the endpoint, with a small receive buffer when asked.
    static func connect(_ port: Int, receiveBuffer: Int32? = nil) -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        if var size = receiveBuffer {
            setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let status = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        #expect(status == 0)
        return fd
    }

    static func send(_ fd: Int32, _ text: String) {
        let bytes = Array(text.utf8)
        var sent = 0
        while sent < bytes.count {
            let count = bytes[sent...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if count <= 0 { return }
            sent += count
        }
    }

    /// Whether the server closed the connection within `seconds` (reads and drops what comes).
    static func closedByServer(_ fd: Int32, within seconds: Double) -> Bool {
        let deadline = DispatchTime.now().uptimeNanoseconds + UInt64(seconds * 1e9)
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while DispatchTime.now().uptimeNanoseconds < deadline {
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, Int32(max(1, min(100, seconds * 1000)))) > 0 else { continue }
            let count = recv(fd, &buffer, buffer.count, 0)
            if count <= 0 { return true }
        }
        return false
    }

    /// Requests sent back to back without a read: each 64 KiB answer waited in memory for the
    /// next, 2,000 of them 128 MB, and without end for a client that kept sending.
    @Test func aClientThatDoesNotReadItsAnswersIsClosed() throws {
        let (server, calls) = try Self.server()
        defer { server.shutdown() }
        let fd = Self.connect(server.port, receiveBuffer: 4096)
        defer { close(fd) }
        Self.send(fd, String(repeating: "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", count: 2_000))
        usleep(2000000)
        #expect(calls.count.load(ordering: .relaxed) < 100, "answers made for a client that reads none")
        #expect(Self.closedByServer(fd, within: 5))
    }

    /// Requests pipelined behind a `/healthz` wait in NIO's pipeline handler until its answer is
    /// written; each answer written then handed the next request over on the same stack, so
    /// thousands of them, read in one go, nested thousands deep and overflowed the event loop's
    /// stack, which killed the worker. Now each waits for its own turn of the loop.
    @Test(.timeLimit(.minutes(1)))
    func manyRequestsPipelinedBehindAHealthCheckAreAnsweredOneByOne() throws {
        let (server, _) = try Self.server()
        defer { server.shutdown() }
        let fd = Self.connect(server.port)
        defer { close(fd) }
        // The first half, answered as it comes, makes the connection's reads grow to their
        // largest (4 × 64 KiB in one turn of the loop); the second waits behind the health check.
        let half = 20_000
        let count = 2 * half
        let head = String(repeating: "HEAD /readyz HTTP/1.1\r\nHost: x\r\n\r\n", count: half)
        let requests = head + "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n" + head
        // Sent from another thread while this one reads the answers, so that the server's writes
        // never wait for the client.
        let sender = Thread { Self.send(fd, requests) }
        sender.start()
        var answers = 0
        var carry: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        let marker = Array("HTTP/1.1 ".utf8)
        let deadline = DispatchTime.now().uptimeNanoseconds + 30_000_000_000
        while answers < count + 1, DispatchTime.now().uptimeNanoseconds < deadline {
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, 100) > 0 else { continue }
            let received = recv(fd, &buffer, buffer.count, 0)
            guard received > 0 else { break }
            carry += buffer[..<received]
            var index = 0
            while index + marker.count <= carry.count {
                if carry[index..<index + marker.count].elementsEqual(marker) {
                    answers += 1
                    index += marker.count
                } else {
                    index += 1
                }
            }
            carry.removeFirst(max(0, carry.count - (marker.count - 1)))
        }
        #expect(answers == count + 1)
        // And the endpoint still answers.
        let probe = Self.connect(server.port)
        defer { close(probe) }
        Self.send(probe, "GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        var answer = [UInt8](repeating: 0, count: 256)
        #expect(
            String(decoding: answer[..<max(recv(probe, &answer, 256, 0), 0)], as: UTF8.self).hasPrefix("HTTP/1.1 200"))
    }

    /// A client that half-closes after its requests (`printf … | nc -N`) still gets its answers,
    /// `/healthz`'s too (answered from a callback), and pipelined ones; then the connection ends.
    @Test(arguments: [
        "GET /readyz HTTP/1.0\r\n\r\n", "GET /healthz HTTP/1.0\r\n\r\n",
        "GET /readyz HTTP/1.1\r\nHost: x\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\n\r\nHEAD /readyz HTTP/1.1\r\nHost: x\r\n\r\n",
    ])
    func aClientThatHalfClosesAfterItsRequestsIsAnswered(requests: String) throws {
        let (server, _) = try Self.server()
        defer { server.shutdown() }
        let fd = Self.connect(server.port)
        defer { close(fd) }
        Self.send(fd, requests)
        shutdown(fd, Int32(SHUT_WR))
        var answer: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = recv(fd, &buffer, buffer.count, 0)
            guard count > 0 else { break }
            answer += buffer[..<count]
        }
        let text = String(decoding: answer, as: UTF8.self)
        let asked = requests.components(separatedBy: " HTTP/").count - 1
        #expect(text.components(separatedBy: " 200 OK\r\n").count - 1 == asked, "\(text)")
    }

    /// One client that holds every connection the endpoint allows cannot lock the probes out: a
    /// connection beyond the limit closes the one that has waited longest for a request. Failed
    /// before the fix: the new connection was closed, so 64 idle sockets, reopened whenever the
    /// deadline closed them, failed the kubelet's probes and Prometheus's scrapes.
    @Test func aConnectionBeyondTheLimitClosesTheLongestIdle() throws {
        let (server, _) = try Self.server()
        defer { server.shutdown() }
        let idle = (0..<70).map { _ in Self.connect(server.port) }
        defer { idle.forEach { close($0) } }
        usleep(500_000)
        // The six that waited longest made room for the last six.
        let closed = idle.indices.filter { Self.closedByServer(idle[$0], within: 0.01) }
        #expect(closed == Array(0..<6), "closed: \(closed)")
        let fd = Self.connect(server.port)
        defer { close(fd) }
        Self.send(fd, "GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        var buffer = [UInt8](repeating: 0, count: 256)
        #expect(String(decoding: buffer[..<max(recv(fd, &buffer, 256, 0), 0)], as: UTF8.self).hasPrefix("HTTP/1.1 200"))
        // It closed the longest idle of the others, not one that came after it.
        #expect(Self.closedByServer(idle[6], within: 1))
        #expect(!Self.closedByServer(idle[69], within: 0.01))
    }

    /// A connection that sends nothing, or a request a byte at a time, is closed at the deadline.
    @Test func idleAndTricklingConnectionsAreClosedAtTheDeadline() throws {
        let (server, _) = try Self.server(requestDeadline: .milliseconds(500))
        defer { server.shutdown() }
        let idle = Self.connect(server.port)
        let trickling = Self.connect(server.port)
        defer {
            close(idle)
            close(trickling)
        }
        for byte in "GET /metr" {
            Self.send(trickling, String(byte))
            usleep(100000)
        }
        #expect(Self.closedByServer(idle, within: 3))
        #expect(Self.closedByServer(trickling, within: 3))
    }
}
