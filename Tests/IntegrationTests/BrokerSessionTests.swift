import Foundation
import ImageFetchWorker
import Logging
import Synchronization
import Testing

/// BrokerSession against the real broker, for what the worker's own tests do not reach.
@Suite(.enabled(if: TestBroker.isAvailable, "needs the RabbitMQ that `make test` starts"))
struct BrokerSessionTests {
    func depth(_ session: BrokerSession, _ name: String) async -> (messages: Int, consumers: Int)? {
        await withCheckedContinuation { continuation in
            session.queueDepth(name) { continuation.resume(returning: $0.map { ($0.messages, $0.consumers) }) }
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func depthOfAMissingQueueLeavesTheSessionUsable() async throws {
        let configuration = try TestBroker.configuration("session")
        defer { TestBroker.cleanUp(configuration) }
        #expect(try TestBroker.publish(configuration, bodies: [Array("{}".utf8), Array("{}".utf8)]) == 2)
        let session = BrokerSession(
            configuration: configuration, logger: Logger(label: "test.session"), delegate: nil,
            consume: false)
        try session.start(retrying: false)
        defer { session.close() }
        // Twice: the broker closes the sampling channel each time, and it must be reusable after.
        #expect(await depth(session, "\(configuration.queue.jobs).missing") == nil)
        #expect(await depth(session, "\(configuration.queue.jobs).missing") == nil)
        let jobs = await depth(session, configuration.queue.jobs)
        #expect(jobs?.messages == 2)
        #expect(session.isConnected)
    }
}

/// Collects deliveries for ``BrokerSessionTests``.
private final class DeliveryCollector: BrokerSessionDelegate, Sendable {
    private let deliveries = Mutex<[Delivery]>([])

    var received: [Delivery] { deliveries.withLock { $0 } }

    func session(_ session: BrokerSession, didReceive delivery: Delivery) {
        deliveries.withLock { $0.append(delivery) }
    }
    func session(_ session: BrokerSession, didConnect epoch: UInt64) {}
    func session(_ session: BrokerSession, didLoseConnection error: AMQPError) {}
    func session(_ session: BrokerSession, blocked: Bool) {}
}

extension BrokerSessionTests {
    /// Acks held back behind an unfinished delivery (waiting for a `multiple` run) still reach the
    /// broker when the session closes: only the unacked delivery returns to the queue.
    @Test(.timeLimit(.minutes(1)))
    func closingSendsTheAcksHeldBack() async throws {
        let configuration = try TestBroker.configuration("session-acks")
        defer { TestBroker.cleanUp(configuration) }
        #expect(try TestBroker.publish(configuration, bodies: Array(repeating: Array("{}".utf8), count: 3)) == 3)
        let collector = DeliveryCollector()
        let session = BrokerSession(
            configuration: configuration, logger: Logger(label: "test.session"), delegate: collector)
        try session.start(retrying: false)
        let deadline = Date().addingTimeInterval(10)
        while collector.received.count < 3, Date() < deadline { try await Task.sleep(for: .milliseconds(20)) }
        let received = collector.received.sorted { $0.tag < $1.tag }
        try #require(received.count == 3)
        // The first stays open, so the acks of the other two wait for it (or for their 2 ms).
        session.queue.sync {
            session.ackOnQueue(received[2])
            session.ackOnQueue(received[1])
        }
        session.close()
        var ready: Int?
        while Date() < deadline {
            ready = try TestBroker.ready(configuration, queue: configuration.queue.jobs)
            if ready == 1 { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(ready == 1)
    }
}
