import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Lets the drain cut a connection attempt short. rabbitmq-c's login and RPCs block the channel
/// queue until their reply or their timeout (30 s each), and the drain waits on that queue: a
/// SIGTERM while a broker accepts the socket but does not answer waited that long, or for the
/// orchestrator's SIGKILL.
///
/// Once interrupted it stays so: the session is shutting down, and no later attempt may connect.
package final class ConnectInterrupter: Sendable {
    private let state = Mutex<(interrupted: Bool, socket: Int32?)>((false, nil))

    package init() {}

    /// Ends the attempt under way, if any, and every later one. A socket that is open is shut
    /// down, not closed: the read rabbitmq-c blocks in returns at once, and the descriptor stays
    /// its owner's, so it cannot be reused under it.
    package func interrupt() {
        state.withLock { state in
            state.interrupted = true
            if let socket = state.socket { _ = shutdown(socket, Int32(SHUT_RDWR)) }
        }
    }

    package var isInterrupted: Bool { state.withLock { $0.interrupted } }

    /// The attempt's socket is open: from now on ``interrupt()`` shuts it down. False if the
    /// attempt was interrupted already. The caller must ``detach()`` before the socket is closed.
    func attach(_ socket: Int32) -> Bool {
        state.withLock { state in
            guard !state.interrupted else { return false }
            state.socket = socket
            return true
        }
    }

    /// The attempt is over (connected or failed): ``interrupt()`` leaves its socket alone. False
    /// if it was interrupted meanwhile.
    @discardableResult
    func detach() -> Bool {
        state.withLock { state in
            state.socket = nil
            return !state.interrupted
        }
    }
}
