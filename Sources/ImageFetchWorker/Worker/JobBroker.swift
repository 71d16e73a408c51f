import Dispatch

/// What the job runner (``JobRunner``) needs of a broker session: a seam, so that the whole
/// pipeline runs in process against a fake broker in the tests, while ``BrokerSession`` is the one
/// the worker runs. The runner is generic over it, so the worker's calls are specialised, direct
/// calls to the session, as before.
///
/// The per-job calls (``publishOnQueue(_:completion:)``, ``ackOnQueue(_:)``, ``nackOnQueue(_:requeue:)``)
/// are made on ``queue``, and every callback to the ``JobBrokerDelegate`` arrives there.
package protocol JobBroker: AnyObject, Sendable {
    /// The serial channel queue: publishes, acks and nacks are made on it, callbacks arrive on it.
    var queue: DispatchQueue { get }

    // MARK: - Per job, on the channel queue

    /// Publishes with `mandatory`; `completion` runs once, on ``queue``, when the broker confirms,
    /// nacks or returns it, when the channel is lost first, or at once if it cannot be encoded.
    func publishOnQueue(_ message: OutboundMessage, completion: @escaping @Sendable (PublishOutcome) -> Void)
    /// Whether `delivery` came on the channel that is open now. One that did not has been handed
    /// back by the broker, which delivers it again.
    func isCurrentOnQueue(_ delivery: Delivery) -> Bool
    /// Acks a delivery; a delivery of an older channel epoch is left to the broker's redelivery.
    func ackOnQueue(_ delivery: Delivery)
    /// Nacks a delivery (with `requeue`, it goes back to the queue); older epochs as for acks.
    func nackOnQueue(_ delivery: Delivery, requeue: Bool)

    // MARK: - State, from any thread

    /// Whether the broker blocks publishing (`connection.blocked`), on the current connection only.
    /// The one copy of it: admission reads it before each start.
    var isBlocked: Bool { get }
    /// Connected, consuming and not blocked (`/readyz`).
    var isConsuming: Bool { get }
    /// A word for logs and the connection-state gauge.
    var stateName: String { get }

    // MARK: - The connection's life

    /// Sets the one delegate (held weakly) that hears deliveries and connection events.
    func attach(_ delegate: any JobBrokerDelegate)
    /// Connects and consumes; with `retrying`, keeps trying with backoff after a first failure.
    func start(retrying: Bool) throws(AMQPError)
    /// Cancels the consumer (the drain); `completion` runs on ``queue`` once it is cancelled.
    func stopConsuming(completion: @escaping @Sendable () -> Void)
    /// Closes the connection; safe to call more than once. False when the channel queue did not
    /// get to it by `deadline` (a write that the broker does not read holds it).
    @discardableResult
    func close(deadline: DispatchTime) -> Bool
    /// Ready messages and consumers of a queue, or nil (missing queue, no connection).
    func queueDepth(_ name: String, completion: @escaping @Sendable ((messages: Int, consumers: Int)?) -> Void)
}

/// What the runner hears from its ``JobBroker``, on the broker's queue. Each call returns
/// promptly: it may hand work to other queues, never wait.
///
/// It refines ``BrokerSessionDelegate`` so that a ``BrokerSession`` can call it as it calls any of
/// its delegates; the defaults below forward those calls here.
package protocol JobBrokerDelegate: BrokerSessionDelegate {
    /// A delivery arrived on the consumer.
    func brokerDelivered(_ delivery: Delivery)
    /// The broker session dead-lettered a delivery unread (over `queue.max_job_bytes`); already settled.
    func brokerRejectedUnread(_ delivery: Delivery, bodySize: UInt64)
    /// Connected and consuming on channel epoch `epoch`.
    func brokerConnected(epoch: UInt64)
    /// The connection was lost: deliveries of its epoch can no longer be acked or nacked.
    func brokerLostConnection(_ error: AMQPError)
    /// The broker blocked or unblocked publishing; ``JobBroker/isBlocked`` already says so.
    func brokerBlockedChanged(_ blocked: Bool)
}

extension JobBrokerDelegate {
    package func session(_ session: BrokerSession, didReceive delivery: Delivery) { brokerDelivered(delivery) }
    package func session(_ session: BrokerSession, didConnect epoch: UInt64) { brokerConnected(epoch: epoch) }
    package func session(_ session: BrokerSession, didLoseConnection error: AMQPError) {
        brokerLostConnection(error)
    }
    package func session(_ session: BrokerSession, blocked: Bool) { brokerBlockedChanged(blocked) }
    package func session(_ session: BrokerSession, didRejectOversized delivery: Delivery, bodySize: UInt64) {
        brokerRejectedUnread(delivery, bodySize: bodySize)
    }
}

extension BrokerSession: JobBroker {
    package func attach(_ delegate: any JobBrokerDelegate) {
        setDelegate(delegate)
    }
}
