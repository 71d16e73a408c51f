import Foundation
import Testing

@testable import ImageFetchWorker

/// The drain's cut of a connection attempt (issue 33), on a socket pair instead of a broker.
@Suite struct ConnectInterrupterTests {
    /// A connected pair of sockets, closed when it goes away.
    private final class SocketPair {
        let ours: Int32
        let peer: Int32

        init() {
            var fds: [Int32] = [-1, -1]
            #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0)
            (ours, peer) = (fds[0], fds[1])
        }

        deinit {
            close(ours)
            close(peer)
        }
    }

    @Test func anInterruptEndsABlockedReadOfTheAttachedSocket() async throws {
        let pair = SocketPair()
        defer { withExtendedLifetime(pair) {} }
        let ours = pair.ours
        let interrupter = ConnectInterrupter()
        #expect(interrupter.attach(ours))
        let reader = Task.detached {
            var byte: UInt8 = 0
            return read(ours, &byte, 1)  // blocks: the peer never writes
        }
        try await Task.sleep(for: .milliseconds(100))
        interrupter.interrupt()
        // The read returns end-of-file, and the descriptor is still ours to close.
        #expect(await reader.value == 0)
        #expect(fcntl(ours, F_GETFD) != -1)
        #expect(!interrupter.detach())
    }

    @Test func afterAnInterruptNoAttemptMayBegin() throws {
        let pair = SocketPair()
        defer { withExtendedLifetime(pair) {} }
        let ours = pair.ours
        let interrupter = ConnectInterrupter()
        interrupter.interrupt()
        #expect(interrupter.isInterrupted)
        #expect(!interrupter.attach(ours))
    }

    @Test func aDetachedSocketIsLeftAlone() throws {
        let pair = SocketPair()
        defer { withExtendedLifetime(pair) {} }
        let (ours, peer) = (pair.ours, pair.peer)
        let interrupter = ConnectInterrupter()
        #expect(interrupter.attach(ours))
        #expect(interrupter.detach())
        interrupter.interrupt()
        // Still connected both ways.
        var byte: UInt8 = 7
        #expect(write(peer, &byte, 1) == 1)
        #expect(read(ours, &byte, 1) == 1)
    }
}
