import Testing

@testable import ImageFetchWorker

@Suite struct ConnectionLifecycleTests {
    @Test func startConnectsToTheFirstURL() {
        var lifecycle = ConnectionLifecycle(urlCount: 2)
        do {
            let value = lifecycle.start()
            #expect(value == .connect(urlIndex: 0))
        }
        do {
            let value = lifecycle.start()
            #expect(value == .none)
        }
        do {
            let value = lifecycle.connected()
            #expect(value == .none)
        }
        #expect(lifecycle.state == .consuming(epoch: 1))
        #expect(lifecycle.isConsuming)
    }

    @Test func failuresBackOffAndRotateURLs() {
        var lifecycle = ConnectionLifecycle(urlCount: 2, backoff: Backoff(initial: 1, multiplier: 2, cap: 30))
        _ = lifecycle.start()
        do {
            let value = lifecycle.connectFailed(jitter: 0)
            #expect(value == .scheduleReconnect(delay: 0.5))
        }
        do {
            let value = lifecycle.reconnectTimerFired()
            #expect(value == .connect(urlIndex: 1))
        }
        do {
            let value = lifecycle.connectFailed(jitter: 0)
            #expect(value == .scheduleReconnect(delay: 1))
        }
        do {
            let value = lifecycle.reconnectTimerFired()
            #expect(value == .connect(urlIndex: 0))
        }
    }

    @Test func lossReconnectsWithANewEpoch() {
        var lifecycle = ConnectionLifecycle(urlCount: 1)
        _ = lifecycle.start()
        _ = lifecycle.connected()
        guard case .failOutstandingAndReconnect = lifecycle.connectionLost(jitter: 0.5) else {
            Issue.record("expected a reconnect")
            return
        }
        #expect(!lifecycle.isConsuming)
        do {
            let value = lifecycle.reconnectTimerFired()
            #expect(value == .connect(urlIndex: 0))
        }
        _ = lifecycle.connected()
        #expect(lifecycle.state == .consuming(epoch: 2))
    }

    @Test func drainCancelsTheConsumerAndALossThenDoesNotReconnect() {
        var lifecycle = ConnectionLifecycle(urlCount: 1)
        _ = lifecycle.start()
        _ = lifecycle.connected()
        do {
            let value = lifecycle.drain()
            #expect(value == .cancelConsumer)
        }
        do {
            let value = lifecycle.drain()
            #expect(value == .none)
        }
        do {
            let value = lifecycle.connectionLost(jitter: 0)
            #expect(value == .failOutstanding)
        }
        #expect(lifecycle.state == .closed)
        do {
            let value = lifecycle.reconnectTimerFired()
            #expect(value == .none)
        }
    }

    @Test func drainWhileReconnectingClosesAtOnce() {
        var lifecycle = ConnectionLifecycle(urlCount: 1)
        _ = lifecycle.start()
        _ = lifecycle.connectFailed(jitter: 0)
        do {
            let value = lifecycle.drain()
            #expect(value == .none)
        }
        #expect(lifecycle.state == .closed)
        do {
            let value = lifecycle.reconnectTimerFired()
            #expect(value == .none)
        }
    }

    @Test func closeClosesAConnectedSession() {
        var lifecycle = ConnectionLifecycle(urlCount: 1)
        _ = lifecycle.start()
        _ = lifecycle.connected()
        do {
            let value = lifecycle.close()
            #expect(value == .close)
        }
        do {
            let value = lifecycle.close()
            #expect(value == .none)
        }
    }

    @Test func backoffIsCappedAndJittered() {
        let backoff = Backoff(initial: 0.5, multiplier: 2, cap: 30)
        #expect(backoff.delay(attempt: 0, jitter: 0) == 0.25)
        #expect(backoff.delay(attempt: 100, jitter: 0) == 15)
        #expect(backoff.delay(attempt: 100, jitter: 0.999) < 30)
        #expect(backoff.delay(attempt: 3, jitter: 0.5) == 3)
    }
}
