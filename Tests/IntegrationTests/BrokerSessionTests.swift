import Foundation
import ImageFetchWorker
import Logging
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
        let session = BrokerSession(configuration: configuration, logger: Logger(label: "test.session"), delegate: nil,
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
