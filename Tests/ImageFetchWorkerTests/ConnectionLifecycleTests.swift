import Testing
@testable import ImageFetchWorker

@Suite struct ConnectionLifecycleTests {
    @Test func startConnectsToTheFirstURL() {
        var lifecycle = ConnectionLifecycle(urlCount: 2)
        #expect(lifecycle.start() == .connect(urlIndex: 0))
        #expect(lifecycle.start() == .none)
        #expect(lifecycle.connected() == .none)
        #expect(lifecycle.state == .consuming(epoch: 1))
        #expect(lifecycle.isConsuming)
    }

    @Test func failuresBackOffAndRotateURLs() {
        var lifecycle = ConnectionLifecycle(urlCount: 2, backoff: Backoff(initial: 1, multiplier: 2, cap: 30))
        _ = lifecycle.start()
        #expect(lifecycle.connectFailed(jitter: 0) == .scheduleReconnect(delay: 0.5))
        #expect(lifecycle.reconnectTimerFired() == .connect(urlIndex: 1))
        #expect(lifecycle.connectFailed(jitter: 0) == .scheduleReconnect(delay: 1))
        #expect(lifecycle.reconnectTimerFired() == .connect(urlIndex: 0))
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
        #expect(lifecycle.reconnectTimerFired() == .connect(urlIndex: 0))
        _ = lifecycle.connected()
        #expect(lifecycle.state == .consuming(epoch: 2))
    }

    @Test func drainCancelsTheConsumerAndALossThenDoesNotReconnect() {
        var lifecycle = ConnectionLifecycle(urlCount: 1)
        _ = lifecycle.start()
        _ = lifecycle.connected()
        #expect(lifecycle.drain() == .cancelConsumer)
        #expect(lifecycle.drain() == .none)
        #expect(lifecycle.connectionLost(jitter: 0) == .failOutstanding)
        #expect(lifecycle.state == .closed)
        #expect(lifecycle.reconnectTimerFired() == .none)
    }

    @Test func drainWhileReconnectingClosesAtOnce() {
        var lifecycle = ConnectionLifecycle(urlCount: 1)
        _ = lifecycle.start()
        _ = lifecycle.connectFailed(jitter: 0)
        #expect(lifecycle.drain() == .none)
        #expect(lifecycle.state == .closed)
        #expect(lifecycle.reconnectTimerFired() == .none)
    }

    @Test func closeClosesAConnectedSession() {
        var lifecycle = ConnectionLifecycle(urlCount: 1)
        _ = lifecycle.start()
        _ = lifecycle.connected()
        #expect(lifecycle.close() == .close)
        #expect(lifecycle.close() == .none)
    }

    @Test func backoffIsCappedAndJittered() {
        let backoff = Backoff(initial: 0.5, multiplier: 2, cap: 30)
        #expect(backoff.delay(attempt: 0, jitter: 0) == 0.25)
        #expect(backoff.delay(attempt: 100, jitter: 0) == 15)
        #expect(backoff.delay(attempt: 100, jitter: 0.999) < 30)
        #expect(backoff.delay(attempt: 3, jitter: 0.5) == 3)
    }
}
