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

    /// A connected session that does not consume, on `configuration`'s topology (declared first).
    static func session(
        _ configuration: WorkerConfiguration, delegate: (any BrokerSessionDelegate)? = nil
    ) throws -> BrokerSession {
        _ = try TestBroker.publish(configuration, bodies: [])  // declare the topology
        let session = BrokerSession(
            configuration: configuration, logger: Logger(label: "test.session"), delegate: delegate,
            consume: false)
        try session.start(retrying: false)
        return session
    }

    /// Without heartbeats nothing wakes the session up on its own: the confirm (and return) of a
    /// publish that the depth RPC read into rabbitmq-c's buffer must still be handled at once,
    /// not when the next byte happens to arrive on the socket.
    @Test(.timeLimit(.minutes(1)))
    func framesReadDuringADepthRPCAreHandledAtOnce() async throws {
        var configuration = try TestBroker.configuration("stranded")
        configuration.amqp.heartbeat = 0
        defer { TestBroker.cleanUp(configuration) }
        let session = try Self.session(configuration)
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
            #expect(
                outcome == .returned, "round \(round): the outcome was \(outcome.map { "\($0)" } ?? "never reported")")
            if outcome == nil { break }
        }
    }

    /// Counts the connections the session made and lost.
    final class ConnectionWatcher: BrokerSessionDelegate, Sendable {
        private let counts = Mutex((connects: 0, losses: 0))
        var connects: Int { counts.withLock { $0.connects } }
        var losses: Int { counts.withLock { $0.losses } }
        func session(_ session: BrokerSession, didReceive delivery: Delivery) {}
        func session(_ session: BrokerSession, didConnect epoch: UInt64) { counts.withLock { $0.connects += 1 } }
        func session(_ session: BrokerSession, didLoseConnection error: AMQPError) {
            counts.withLock { $0.losses += 1 }
        }
        func session(_ session: BrokerSession, blocked: Bool) {}
    }

    /// A short string (the routing key, or a property such as `correlation_id`) takes 255 bytes
    /// at most: one byte longer is that message's failure, before a byte of it is sent; at 255
    /// bytes the message goes out.
    @Test(
        .timeLimit(.minutes(1)), arguments: ["routing key", "content type", "message id", "correlation id", "reply to"])
    func aShortStringOver255BytesFailsThatPublishOnly(field: String) async throws {
        let configuration = try TestBroker.configuration("short-string")
        defer { TestBroker.cleanUp(configuration) }
        let session = try Self.session(configuration)
        defer { session.close() }
        func message(length: Int) -> OutboundMessage {
            let text = String(repeating: "k", count: length)
            var message = Self.message(to: field == "routing key" ? text : configuration.queue.jobs)
            switch field {
            case "content type": message.properties.contentType = text
            case "message id": message.properties.messageID = text
            case "correlation id": message.properties.correlationID = text
            case "reply to": message.properties.replyTo = text
            default: break
            }
            return message
        }
        let (longest, oneOver) = (message(length: 255), message(length: 256))
        let fits = OutcomeBox()
        let tooLong = OutcomeBox()
        session.queue.async {
            session.publishOnQueue(longest) { fits.report($0) }
            session.publishOnQueue(oneOver) { tooLong.report($0) }
        }
        // A 255-byte routing key names no queue: the broker returns that message, unroutable.
        let fitting = await fits.wait(timeout: 5)
        #expect(fitting == (field == "routing key" ? .returned : .confirmed))
        #expect(await tooLong.wait(timeout: 5) == .unencodable)
        #expect(session.isConnected)
    }

    /// A message whose properties cannot be encoded in one frame (`frame_max`, 128 KiB) is that
    /// message's failure: it is refused before a byte of it is sent, and the connection, the
    /// confirms of the other publishes and the deliveries in flight are not touched.
    @Test(.timeLimit(.minutes(1)))
    func propertiesOverAFrameFailThatPublishOnly() async throws {
        let configuration = try TestBroker.configuration("too-large-props")
        defer { TestBroker.cleanUp(configuration) }
        let watcher = ConnectionWatcher()
        let session = try Self.session(configuration, delegate: watcher)
        defer { session.close() }
        let jobs = configuration.queue.jobs

        let before = OutcomeBox()
        let tooLarge = OutcomeBox()
        let after = OutcomeBox()
        let big = Self.message(to: jobs, headers: ["x-big": .string(String(repeating: "x", count: 140_000))])
        session.queue.async {
            session.publishOnQueue(Self.message(to: jobs)) { before.report($0) }
            session.publishOnQueue(big) { tooLarge.report($0) }
            session.publishOnQueue(Self.message(to: jobs)) { after.report($0) }
        }
        let refused = await tooLarge.wait(timeout: 5)
        #expect(refused == .unencodable, "\(refused.map { "\($0)" } ?? "never reported")")
        #expect(await before.wait(timeout: 5) == .confirmed)
        #expect(await after.wait(timeout: 5) == .confirmed)
        #expect(watcher.losses == 0)
        #expect(session.isConnected)
        #expect(try TestBroker.ready(configuration, queue: jobs) == 2)
    }
}
