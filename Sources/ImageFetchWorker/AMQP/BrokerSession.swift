import CRabbitMQ
import CShims
import Dispatch
import Foundation
import Logging
import Synchronization

/// What a ``BrokerSession`` tells its owner. Every call arrives on the channel queue and must
/// return promptly: it may hand work to other queues but never wait.
package protocol BrokerSessionDelegate: AnyObject, Sendable {
    /// A delivery arrived on the consumer.
    func session(_ session: BrokerSession, didReceive delivery: Delivery)
    /// The connection is up and consuming on a new channel epoch.
    func session(_ session: BrokerSession, didConnect epoch: UInt64)
    /// The connection was lost; deliveries of older epochs can no longer be acked.
    func session(_ session: BrokerSession, didLoseConnection error: AMQPError)
    /// The broker raised or cleared a resource alarm (`connection.blocked` / `unblocked`).
    func session(_ session: BrokerSession, blocked: Bool)
    /// The session dead-lettered a delivery by itself, unread (its body is over
    /// `queue.max_job_bytes`): `delivery.body` is empty, and `bodySize` is what its header declared.
    /// For counting only; the delivery is settled already.
    func session(_ session: BrokerSession, didRejectOversized delivery: Delivery, bodySize: UInt64)
}

extension BrokerSessionDelegate {
    package func session(_ session: BrokerSession, didRejectOversized delivery: Delivery, bodySize: UInt64) {}
}

/// How the broker answered a publish.
package enum PublishOutcome: Sendable, Equatable {
    case confirmed
    case nacked
    /// Unroutable with `mandatory`: nothing stored it.
    case returned
    /// The channel went away before the confirm.
    case connectionLost
    /// The message could not be encoded (properties over a frame, a short string over 255
    /// bytes): nothing was sent, and the connection goes on.
    case unencodable
}

/// The worker's single AMQP connection and channel, driven from one serial channel queue.
///
/// Every call into rabbitmq-c happens on ``queue``. Incoming frames are read when a read source on
/// the socket fires; a timer calls into rabbitmq-c at a quarter of the heartbeat interval so it can
/// send heartbeats and notice missed ones, even when idle. Publishes and acks submitted from other
/// queues are `async` blocks on the channel queue, so they go out at once.
package final class BrokerSession: @unchecked Sendable {
    // @unchecked Sendable: all mutable state below is read and written only on `queue`, which
    // every entry point checks: with dispatchPrecondition on the lifecycle paths, with
    // `assertOnQueue()` (debug builds) on the per-message ones; `visible` is behind its own lock.
    // It is internal rather than private only for the extensions in BrokerSession+Connection.swift
    // (connecting, reconnecting, closing) and BrokerSession+Inbound.swift (reading frames).

    /// The serial channel queue: the only place rabbitmq-c is touched.
    package let queue = DispatchQueue(label: "image-fetch-worker.channel")
    static let channel: amqp_channel_t = 1

    let configuration: WorkerConfiguration
    let logger: Logger
    let consumerTag: String
    let connectionName: String
    let consume: Bool
    weak var delegate: (any BrokerSessionDelegate)?

    var lifecycle: ConnectionLifecycle
    var connection: AMQPConnection?
    var readSource: (any DispatchSourceRead)?
    var heartbeatTimer: (any DispatchSourceTimer)?
    var confirms = ConfirmTracker<@Sendable (PublishOutcome) -> Void>()
    /// Ends a connection attempt when the drain begins (any thread).
    let interrupter = ConnectInterrupter()
    /// The confirm timeout's clock, per connection.
    var confirmWatch: ConfirmWatch
    var confirmTimer: (any DispatchSourceTimer)?
    var assembler: ContentAssembler
    /// Acks go out in `multiple` runs: once per batch of work on the channel queue, and an ack
    /// stuck behind a slower job after at most 2 ms.
    var acks = AckBatcher(maxDelayNanoseconds: 2_000_000)
    private var ackFlushScheduled = false
    private var ackTimerDeadline: UInt64?
    var readScheduled = false
    /// Dead-letter copies of too-large jobs, streamed on their own channel.
    var deadCopies = DeadCopyStream()
    /// The drain's `basic.cancel` waits for the broker to unblock the connection: the consumer is
    /// still live, so a delivery handed back with requeue would come straight back to it.
    var cancelAwaitsUnblock = false

    /// The lifecycle state and the broker's resource alarm, for readers on any thread.
    let visible = Mutex((state: ConnectionLifecycle.State.idle, blocked: false))

    /// Creates a session; nothing happens until ``start()``.
    /// - Parameter consume: false for a publish-only session (the `publish` command).
    package init(
        configuration: WorkerConfiguration, logger: Logger, delegate: (any BrokerSessionDelegate)?,
        consume: Bool = true
    ) {
        self.configuration = configuration
        self.logger = logger
        self.delegate = delegate
        self.consume = consume
        self.lifecycle = ConnectionLifecycle(urlCount: configuration.amqp.urls.count)
        self.assembler = ContentAssembler(maxBodyBytes: configuration.queue.maxJobBytes)
        self.confirmWatch = ConfirmWatch(timeoutSeconds: configuration.amqp.confirmTimeout)
        let host = ProcessInfo.processInfo.hostName
        let pid = ProcessInfo.processInfo.processIdentifier
        self.consumerTag = "image-fetch-worker.\(host).\(pid)"
        self.connectionName = "image-fetch-worker \(host) pid \(pid)"
    }

    /// The channel-queue check of the per-message paths (each ack, publish, read): in debug builds
    /// only, since they run too often for a release-mode check.
    @inline(__always)
    func assertOnQueue() {
        assert(
            {
                dispatchPrecondition(condition: .onQueue(queue))
                return true
            }())
    }

    /// The lifecycle state, readable from any thread.
    package var isConsuming: Bool {
        visible.withLock {
            if case .consuming = $0.state { return !$0.blocked }
            return false
        }
    }

    /// Whether the broker blocks publishing on the current connection (`connection.blocked`): the
    /// one copy of it; admission reads it here. A lost connection clears it (``clearBlocked()``).
    package var isBlocked: Bool {
        visible.withLock { $0.blocked }
    }

    /// Whether the connection is up (consuming or draining).
    package var isConnected: Bool {
        visible.withLock {
            switch $0.state {
            case .consuming, .draining: return true
            default: return false
            }
        }
    }

    /// A one-word description of the connection state for logs and metrics.
    package var stateName: String {
        visible.withLock {
            switch $0.state {
            case .idle: return "idle"
            case .connecting: return "connecting"
            case .consuming: return $0.blocked ? "blocked" : "consuming"
            case .draining: return "draining"
            case .waiting: return "reconnecting"
            case .closed: return "closed"
            }
        }
    }

    /// Sets the delegate (held weakly).
    package func setDelegate(_ delegate: any BrokerSessionDelegate) {
        queue.sync { self.delegate = delegate }
    }

    /// Connects (synchronously, on the channel queue) and starts consuming. Throws the first
    /// attempt's error; with `retrying`, the session then keeps trying with backoff by itself,
    /// and it reconnects after later losses either way.
    package func start(retrying: Bool) throws(AMQPError) {
        let result: Result<Void, AMQPError> = queue.sync {
            guard case .connect(let index) = lifecycle.start() else { return .success(()) }
            do throws(AMQPError) {
                try connect(urlIndex: index)
                return .success(())
            } catch {
                // Said here, on the channel queue, before the drain's next step can run and end
                // the process: from the caller's thread it could come too late to be written.
                if error.code == .interrupted { logger.info("shutdown began while connecting to the broker") }
                if retrying {
                    perform(lifecycle.connectFailed(jitter: Double.random(in: 0..<1)))
                } else {
                    _ = lifecycle.close()
                }
                publishState()
                return .failure(error)
            }
        }
        try result.get()
    }

    // MARK: - Outbound, from any queue

    /// Publishes a message with `mandatory` and calls `completion` on the channel queue when the
    /// broker confirms, nacks or returns it, or when the channel is lost first.
    package func publish(_ message: OutboundMessage, completion: @escaping @Sendable (PublishOutcome) -> Void) {
        queue.async { self.publishOnQueue(message, completion: completion) }
    }

    /// Acks a delivery, unless it came from an older channel epoch (then the broker redelivers it).
    package func ack(_ delivery: Delivery) {
        queue.async { self.ackOnQueue(delivery) }
    }

    /// Nacks a delivery; `requeue` hands it back, otherwise it goes to the dead-letter queue.
    package func nack(_ delivery: Delivery, requeue: Bool) {
        queue.async { self.nackOnQueue(delivery, requeue: requeue) }
    }

    /// Whether `delivery` came on the channel that is open now.
    package func isCurrentOnQueue(_ delivery: Delivery) -> Bool {
        assertOnQueue()
        return connection != nil && delivery.epoch == lifecycle.epoch && isOpenEpoch
    }

    /// Acks on the channel queue (for completions that already run there).
    ///
    /// The frame goes out when the channel queue has finished its current batch of work, merged
    /// with the other acks of that batch into `multiple` acks where the tags allow (``AckBatcher``).
    package func ackOnQueue(_ delivery: Delivery) {
        assertOnQueue()
        guard connection != nil, delivery.epoch == lifecycle.epoch, isOpenEpoch else { return }
        guard acks.requestAck(delivery.tag, now: DispatchTime.now().uptimeNanoseconds) else { return }
        guard !ackFlushScheduled else { return }
        ackFlushScheduled = true
        queue.async {
            self.ackFlushScheduled = false
            self.flushAcks()
        }
    }

    /// Sends the acks the batcher hands out; with `force`, every pending one (before closing).
    func sendAcks(on connection: AMQPConnection, force: Bool) throws(AMQPError) {
        assertOnQueue()
        for ack in acks.flush(now: DispatchTime.now().uptimeNanoseconds, force: force) {
            try connection.ack(channel: Self.channel, tag: ack.tag, multiple: ack.multiple)
        }
    }

    /// Nacks on the channel queue.
    package func nackOnQueue(_ delivery: Delivery, requeue: Bool) {
        assertOnQueue()
        guard let connection, delivery.epoch == lifecycle.epoch, isOpenEpoch else { return }
        // Held instead, unanswered: the close hands it back once (it counts against the prefetch
        // window, so the broker sends no more than that).
        if requeue && cancelAwaitsUnblock { return }
        do {
            try connection.nack(channel: Self.channel, tag: delivery.tag, requeue: requeue)
            acks.settle(delivery.tag)
        } catch {
            handleLoss(error)
        }
    }

    /// Sends the acks that are due.
    private func flushAcks() {
        guard let connection, isOpenEpoch else { return }
        do {
            try sendAcks(on: connection, force: false)
        } catch {
            handleLoss(error)
            return
        }
        // Acks held behind a slower job: come back when they are due, unless a timer already will.
        guard let deadline = acks.nextDeadline, ackTimerDeadline.map({ deadline < $0 }) ?? true else { return }
        ackTimerDeadline = deadline
        queue.asyncAfter(deadline: DispatchTime(uptimeNanoseconds: deadline)) {
            if self.ackTimerDeadline == deadline { self.ackTimerDeadline = nil }
            self.flushAcks()
        }
    }

    /// The header that ties a `basic.return` to its publish.
    package static let publishSequenceHeader = "x-publish-seq"

    /// Publishes on the channel queue.
    package func publishOnQueue(_ message: OutboundMessage, completion: @escaping @Sendable (PublishOutcome) -> Void) {
        assertOnQueue()
        guard let connection, isOpenEpoch else {
            completion(.connectionLost)
            return
        }
        let sequence = confirms.published(completion, at: DispatchTime.now().uptimeNanoseconds)
        // basic.return carries no publish sequence number; this header ties a return to its
        // publish. Added as the message is encoded: set in `message`, it made a copy of its headers.
        do {
            try connection.publish(
                channel: Self.channel, message, adding: (Self.publishSequenceHeader, .int(Int64(sequence))))
        } catch  where error.code == .unencodable {
            // That message's failure, not the connection's: nothing of it went out.
            _ = confirms.withdrawLast()
            logger.warning("a message could not be encoded; not published", metadata: ["error": "\(error)"])
            completion(.unencodable)
        } catch {
            handleLoss(error)
        }
    }

    /// Cancels the consumer (drain step 1) and calls `completion` on the channel queue when the
    /// broker has confirmed it. Deliveries that were already on their way still arrive.
    package func stopConsuming(completion: @escaping @Sendable () -> Void) {
        // A connection attempt holds the channel queue for up to its timeouts: end it first.
        interrupter.interrupt()
        queue.async {
            self.perform(self.lifecycle.drain())
            self.publishState()
            completion()
        }
    }

    /// Closes the channel and the connection; safe to call more than once. Waits for the channel
    /// queue until `deadline`, and returns false if it did not get there: rabbitmq-c writes
    /// without a deadline, so a write that a broker does not read (it blocks the connection) holds
    /// the queue until the broker gives the connection up.
    @discardableResult
    package func close(deadline: DispatchTime = .distantFuture) -> Bool {
        interrupter.interrupt()
        let closed = DispatchSemaphore(value: 0)
        queue.async {
            self.perform(self.lifecycle.close())
            self.publishState()
            closed.signal()
        }
        return closed.wait(timeout: deadline) == .success
    }

    /// A passive declare on the worker's own connection: ready messages and consumers of a queue,
    /// or nil when it does not exist, the connection is down, or the broker blocks it. A blocked
    /// connection is not read by the broker, so the declare would wait out the RPC timeout on this
    /// queue, holding every publish, ack and liveness probe behind it, and then drop the connection.
    package func queueDepth(_ name: String, completion: @escaping @Sendable ((messages: Int, consumers: Int)?) -> Void)
    {
        queue.async {
            guard let connection = self.connection, self.isOpenEpoch, !self.isBlocked else { return completion(nil) }
            // A passive declare of a missing queue closes the channel, so it runs on a channel of its own.
            defer { self.readBufferedInput() }
            do throws(AMQPError) {
                try connection.openChannel(2)
                let depth = try connection.declareQueue(channel: 2, name: name, passive: true)
                connection.closeChannel(2)
                completion(depth)
            } catch  where error.code == .channelClosed {
                // The broker closed channel 2 (no such queue): confirm it, so the channel can be reused.
                connection.sendCloseOk(channel: 2, connection: false)
                completion(nil)
            } catch {
                // The connection's, not the sample's: a connection.close in answer (the broker
                // then waits for close-ok and sends nothing more), a socket error, an RPC timeout.
                if error.code == .connectionClosed { connection.sendCloseOk(channel: 0, connection: true) }
                completion(nil)
                self.handleLoss(error)
            }
        }
    }
}
