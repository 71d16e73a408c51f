import Foundation
import ImageFetchWorker
import Logging
import Synchronization
import Testing

/// How BrokerSession handles frames that rabbitmq-c read on its own, and what the broker says
/// about publishes (confirms, nacks, returns), against the real broker.
@Suite(.enabled(if: TestBroker.isAvailable, "needs the RabbitMQ that `make test` starts"))
struct BrokerSessionFrameTests {
    /// The outcome of one publish, once the session reports it.
    final class OutcomeBox: Sendable {
        private let value = Mutex<PublishOutcome?>(nil)
        private let reported = DispatchSemaphore(value: 0)

        func report(_ outcome: PublishOutcome) {
            value.withLock { $0 = outcome }
            reported.signal()
        }

        /// The outcome, or nil when none came within `timeout` seconds.
        func wait(timeout: Double) async -> PublishOutcome? {
            await withCheckedContinuation { continuation in
                DispatchQueue.global().async {
                    _ = self.reported.wait(timeout: .now() + timeout)
                    continuation.resume(returning: self.value.withLock { $0 })
                }
            }
        }
    }

    static func message(to routingKey: String, headers: [String: AMQPFieldValue] = [:]) -> OutboundMessage {
        var properties = AMQPProperties()
        properties.headers = headers
        return OutboundMessage(routingKey: routingKey, properties: properties, body: Array("{}".utf8))
    }

    /// Without heartbeats nothing wakes the session up on its own: the confirm (and return) of a
    /// publish that the depth RPC read into rabbitmq-c's buffer must still be handled at once,
    /// not when the next byte happens to arrive on the socket.
    @Test(.timeLimit(.minutes(1)))
    func framesReadDuringADepthRPCAreHandledAtOnce() async throws {
        var configuration = try TestBroker.configuration("stranded")
        configuration.amqp.heartbeat = 0
        defer { TestBroker.cleanUp(configuration) }
        _ = try TestBroker.publish(configuration, bodies: [])  // declare the topology
        let session = BrokerSession(configuration: configuration, logger: Logger(label: "test.session"), delegate: nil,
                                    consume: false)
        try session.start(retrying: false)
        defer { session.close() }
        let jobs = configuration.queue.jobs
        for round in 0..<2000 {
            let box = OutcomeBox()
            // The depth block runs right after the publish, before the socket can report the
            // confirm, so its RPCs read the return and the confirm off the socket themselves.
            session.queue.async {
                session.publishOnQueue(Self.message(to: "\(jobs).nowhere")) { box.report($0) }
                session.queueDepth(jobs) { _ in }
            }
            let outcome = await box.wait(timeout: 2)
            #expect(outcome == .returned, "round \(round): the outcome was \(outcome.map { "\($0)" } ?? "never reported")")
            if outcome == nil { break }
        }
    }
}
