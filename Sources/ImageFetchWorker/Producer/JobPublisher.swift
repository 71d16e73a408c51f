import Dispatch
import Foundation
import Logging
import Synchronization

/// The producer side: enqueues jobs on `queue.jobs` with publisher confirms (the `publish` command,
/// and the benchmarks and tests that fill the queue).
public final class JobPublisher: Sendable {
    private let session: BrokerSession
    private let configuration: WorkerConfiguration
    /// Publishes allowed to wait for their confirm at once (`window`); bounds memory on big files.
    private let permits: DispatchSemaphore
    /// Publishes still waiting for their outcome.
    private let outstanding = DispatchGroup()

    /// Connects (declaring the topology when `queue.declare` is true).
    package init(configuration: WorkerConfiguration, logger: Logger, window: Int = 4096) throws(AMQPError) {
        self.configuration = configuration
        self.permits = DispatchSemaphore(value: window)
        self.session = BrokerSession(configuration: configuration, logger: logger, delegate: nil, consume: false)
        try session.start(retrying: false)
    }

    /// The JSON body of a job.
    public static func jobBody(id: String, url: String, key: String? = nil) -> [UInt8] {
        var json = JSONWriter(capacity: 64 + url.utf8.count)
        json.beginObject()
        json.field("id", id)
        json.field("url", url)
        json.field("key", key)
        json.endObject()
        return json.takeBytes()
    }

    /// Publishes raw bodies (persistent, `application/json` unless `contentType` says otherwise) and
    /// returns how many the broker confirmed.
    package func publish<S: Sequence>(
        bodies: S, contentType: String? = "application/json",
        headers: [String: AMQPFieldValue] = [:],
        replyTo: String? = nil
    ) -> Int where S.Element == [UInt8] {
        var properties = AMQPProperties()
        properties.contentType = contentType
        properties.headers = headers
        properties.replyTo = replyTo
        return publish(bodies: bodies, properties: properties)
    }

    /// Publishes raw bodies with `properties` (made persistent, and stamped with the time), and
    /// returns how many the broker confirmed.
    package func publish<S: Sequence>(bodies: S, properties template: AMQPProperties) -> Int
    where S.Element == [UInt8] {
        let confirmed = Mutex(0)
        for body in bodies {
            send(body, properties: template) { outcome in
                if outcome == .confirmed { confirmed.withLock { $0 += 1 } }
            }
        }
        waitForOutcomes()
        return confirmed.withLock { $0 }
    }

    /// Publishes one body with `properties` (made persistent, and stamped with the time) without
    /// waiting for its confirm, unless `window` publishes already wait for theirs: confirms are
    /// pipelined. `outcome` runs on the broker session's queue, and must be quick.
    package func send(
        _ body: [UInt8], properties template: AMQPProperties,
        outcome: @escaping @Sendable (PublishOutcome) -> Void
    ) {
        permits.wait()
        outstanding.enter()
        var properties = template
        properties.persistent = true
        // Lets the management API report the age of the queue's head (head_message_timestamp).
        properties.timestamp = UInt64(Date().timeIntervalSince1970)
        let message = OutboundMessage(routingKey: configuration.queue.jobs, properties: properties, body: body)
        session.publish(message) { [permits, outstanding] result in
            outcome(result)
            permits.signal()
            outstanding.leave()
        }
    }

    /// Waits until every publish of ``send(_:properties:outcome:)`` has its outcome.
    package func waitForOutcomes() {
        outstanding.wait()
    }

    /// Publishes one job per URL, with fresh ids; returns how many were confirmed.
    package func publish(urls: [String]) -> Int {
        publish(bodies: urls.lazy.map { Self.jobBody(id: UUID().uuidString.lowercased(), url: $0) })
    }

    /// Closes the connection.
    package func close() { session.close() }
}
