import Foundation

/// The broker connection's lifecycle as a pure state machine: events in, actions out, no I/O.
///
/// ``BrokerSession`` feeds it what happened (connected, lost, timer fired, drain requested) and
/// carries out the actions it returns. Keeping the decisions here makes reconnect and drain
/// behaviour testable without a broker.
struct ConnectionLifecycle {
    enum State: Equatable {
        /// Not started.
        case idle
        /// A connection attempt is under way; `attempt` counts failures since the last success.
        case connecting(attempt: Int)
        /// Connected and consuming on channel incarnation `epoch`.
        case consuming(epoch: UInt64)
        /// Connected, consumer cancelled (draining): publishes and acks still flow.
        case draining(epoch: UInt64)
        /// Waiting out the backoff before the next attempt.
        case waiting(attempt: Int)
        /// Closed for good.
        case closed
    }

    enum Action: Equatable {
        case none
        /// Connect to `urls[urlIndex]`, declare, and consume.
        case connect(urlIndex: Int)
        /// Try again after `delay` seconds.
        case scheduleReconnect(delay: Double)
        /// Cancel the consumer; the connection stays for confirms and acks.
        case cancelConsumer
        /// Fail outstanding confirms (their deliveries cannot be acked on a new channel).
        case failOutstanding
        /// Fail outstanding confirms and try again after `delay` seconds.
        case failOutstandingAndReconnect(delay: Double)
        /// Close the connection.
        case close
    }

    private(set) var state: State = .idle
    private(set) var epoch: UInt64 = 0
    let urlCount: Int
    var backoff: Backoff

    init(urlCount: Int, backoff: Backoff = Backoff()) {
        self.urlCount = max(urlCount, 1)
        self.backoff = backoff
    }

    /// Whether the worker is connected and consuming (readiness).
    var isConsuming: Bool {
        if case .consuming = state { return true }
        return false
    }

    mutating func start() -> Action {
        guard case .idle = state else { return .none }
        state = .connecting(attempt: 0)
        return .connect(urlIndex: 0)
    }

    mutating func connected() -> Action {
        guard case .connecting = state else { return .none }
        epoch += 1
        state = .consuming(epoch: epoch)
        return .none
    }

    mutating func connectFailed(jitter: Double) -> Action {
        guard case .connecting(let attempt) = state else { return .none }
        state = .waiting(attempt: attempt + 1)
        return .scheduleReconnect(delay: backoff.delay(attempt: attempt, jitter: jitter))
    }

    mutating func reconnectTimerFired() -> Action {
        guard case .waiting(let attempt) = state else { return .none }
        state = .connecting(attempt: attempt)
        return .connect(urlIndex: attempt % urlCount)
    }

    /// The connection or channel died (socket error, missed heartbeats, close from the broker).
    mutating func connectionLost(jitter: Double) -> Action {
        switch state {
        case .consuming:
            state = .waiting(attempt: 0)
            return .failOutstandingAndReconnect(delay: backoff.delay(attempt: 0, jitter: jitter))
        case .draining:
            state = .closed
            return .failOutstanding
        default:
            return .none
        }
    }

    /// Shutdown began: stop consuming but keep the connection for the last confirms and acks.
    mutating func drain() -> Action {
        switch state {
        case .consuming(let epoch):
            state = .draining(epoch: epoch)
            return .cancelConsumer
        case .connecting, .waiting, .idle:
            state = .closed
            return .none
        case .draining, .closed:
            return .none
        }
    }

    mutating func close() -> Action {
        switch state {
        case .consuming, .draining:
            state = .closed
            return .close
        default:
            state = .closed
            return .none
        }
    }
}

/// Exponential backoff with jitter, capped.
struct Backoff: Equatable {
    var initial: Double = 0.5
    var multiplier: Double = 2
    var cap: Double = 30

    /// The delay before retry number `attempt` (0-based); `jitter` in 0..<1 spreads it over
    /// [delay/2, delay) so that replicas do not reconnect in lockstep.
    func delay(attempt: Int, jitter: Double) -> Double {
        let raw = initial * pow(multiplier, Double(min(attempt, 30)))
        let capped = min(raw, cap)
        return capped / 2 + capped / 2 * min(max(jitter, 0), 0.999_999)
    }
}
