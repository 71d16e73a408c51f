import CRabbitMQ
import Dispatch
import Foundation
import Logging
import Synchronization

/// What a ``BrokerSession`` tells its owner. Every call arrives on the channel queue and must
/// return promptly: it may hand work to other queues but never wait.
public protocol BrokerSessionDelegate: AnyObject, Sendable {
    /// A delivery arrived on the consumer.
    func session(_ session: BrokerSession, didReceive delivery: Delivery)
    /// The connection is up and consuming on a new channel epoch.
    func session(_ session: BrokerSession, didConnect epoch: UInt64)
    /// The connection was lost; deliveries of older epochs can no longer be acked.
    func session(_ session: BrokerSession, didLoseConnection error: AMQPError)
    /// The broker raised or cleared a resource alarm (`connection.blocked` / `unblocked`).
    func session(_ session: BrokerSession, blocked: Bool)
    /// The session dead-lettered a delivery by itself, unread (its body is over
    /// `queue.max_job_bytes`): `delivery.body` is empty, and `error` says why. For counting only;
    /// the delivery is settled already.
    func session(_ session: BrokerSession, didReject delivery: Delivery, error: JobError)
}

extension BrokerSessionDelegate {
    public func session(_ session: BrokerSession, didReject delivery: Delivery, error: JobError) {}
}

/// How the broker answered a publish.
public enum PublishOutcome: Sendable, Equatable {
    case confirmed
    case nacked
    /// Unroutable with `mandatory`: nothing stored it.
    case returned
    /// The channel went away before the confirm.
    case connectionLost
}

/// The worker's single AMQP connection and channel, driven from one serial channel queue.
///
/// Every call into rabbitmq-c happens on ``queue``. Incoming frames are read when a read source on
/// the socket fires; a timer calls into rabbitmq-c at a quarter of the heartbeat interval so it can
/// send heartbeats and notice missed ones, even when idle. Publishes and acks submitted from other
/// queues are `async` blocks on the channel queue, so they go out at once.
public final class BrokerSession: @unchecked Sendable {
    // @unchecked Sendable: all mutable state below is read and written only on `queue`
    // (checked with dispatchPrecondition in debug builds); `visible` is behind its own lock.

    /// The serial channel queue: the only place rabbitmq-c is touched.
    public let queue = DispatchQueue(label: "image-fetch-worker.channel")
    static let channel: amqp_channel_t = 1

    private let configuration: WorkerConfiguration
    private let logger: Logger
    private let consumerTag: String
    private let connectionName: String
    private let consume: Bool
    private weak var delegate: (any BrokerSessionDelegate)?

    private var lifecycle: ConnectionLifecycle
    private var connection: AMQPConnection?
    private var readSource: (any DispatchSourceRead)?
    private var heartbeatTimer: (any DispatchSourceTimer)?
    private var confirms = ConfirmTracker<@Sendable (PublishOutcome) -> Void>()
    private var assembler: ContentAssembler
    /// Acks go out in `multiple` runs: once per batch of work on the channel queue, and an ack
    /// stuck behind a slower job after at most 2 ms.
    private var acks = AckBatcher(maxDelayNanoseconds: 2_000_000)
    private var ackFlushScheduled = false
    private var ackTimerDeadline: UInt64?
    private var readScheduled = false
    private var closeWaiters: [@Sendable () -> Void] = []

    /// The lifecycle state and the broker's resource alarm, for readers on any thread.
    private let visible = Mutex((state: ConnectionLifecycle.State.idle, blocked: false))

    /// Creates a session; nothing happens until ``start()``.
    /// - Parameter consume: false for a publish-only session (the `publish` command).
    public init(configuration: WorkerConfiguration, logger: Logger, delegate: (any BrokerSessionDelegate)?,
                consume: Bool = true) {
        self.configuration = configuration
        self.logger = logger
        self.delegate = delegate
        self.consume = consume
        self.lifecycle = ConnectionLifecycle(urlCount: configuration.amqp.urls.count)
        self.assembler = ContentAssembler(maxBodyBytes: configuration.queue.maxJobBytes)
        let host = ProcessInfo.processInfo.hostName
        let pid = ProcessInfo.processInfo.processIdentifier
        self.consumerTag = "image-fetch-worker.\(host).\(pid)"
        self.connectionName = "image-fetch-worker \(host) pid \(pid)"
    }

    /// The lifecycle state, readable from any thread.
    public var isConsuming: Bool {
        visible.withLock {
            if case .consuming = $0.state { return !$0.blocked }
            return false
        }
    }

    /// Whether the connection is up (consuming or draining).
    public var isConnected: Bool {
        visible.withLock {
            switch $0.state {
            case .consuming, .draining: return true
            default: return false
            }
        }
    }

    /// A one-word description of the connection state for logs and metrics.
    public var stateName: String {
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
    public func setDelegate(_ delegate: any BrokerSessionDelegate) {
        queue.sync { self.delegate = delegate }
    }

    /// Connects (synchronously, on the channel queue) and starts consuming. Throws the first
    /// attempt's error; with `retrying`, the session then keeps trying with backoff by itself,
    /// and it reconnects after later losses either way.
    public func start(retrying: Bool) throws(AMQPError) {
        let result: Result<Void, AMQPError> = queue.sync {
            guard case .connect(let index) = lifecycle.start() else { return .success(()) }
            do throws(AMQPError) {
                try connect(urlIndex: index)
                return .success(())
            } catch {
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
    public func publish(_ message: OutboundMessage, completion: @escaping @Sendable (PublishOutcome) -> Void) {
        queue.async { self.publishOnQueue(message, completion: completion) }
    }

    /// Acks a delivery, unless it came from an older channel epoch (then the broker redelivers it).
    public func ack(_ delivery: Delivery) {
        queue.async { self.ackOnQueue(delivery) }
    }

    /// Nacks a delivery; `requeue` hands it back, otherwise it goes to the dead-letter queue.
    public func nack(_ delivery: Delivery, requeue: Bool) {
        queue.async { self.nackOnQueue(delivery, requeue: requeue) }
    }

    /// Acks on the channel queue (for completions that already run there).
    ///
    /// The frame goes out when the channel queue has finished its current batch of work, merged
    /// with the other acks of that batch into `multiple` acks where the tags allow (``AckBatcher``).
    public func ackOnQueue(_ delivery: Delivery) {
        dispatchPrecondition(condition: .onQueue(queue))
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
    private func sendAcks(on connection: AMQPConnection, force: Bool) throws(AMQPError) {
        for ack in acks.flush(now: DispatchTime.now().uptimeNanoseconds, force: force) {
            try connection.ack(channel: Self.channel, tag: ack.tag, multiple: ack.multiple)
        }
    }

    /// Nacks on the channel queue.
    public func nackOnQueue(_ delivery: Delivery, requeue: Bool) {
        dispatchPrecondition(condition: .onQueue(queue))
        guard let connection, delivery.epoch == lifecycle.epoch, isOpenEpoch else { return }
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

    /// Publishes on the channel queue.
    public func publishOnQueue(_ message: OutboundMessage, completion: @escaping @Sendable (PublishOutcome) -> Void) {
        dispatchPrecondition(condition: .onQueue(queue))
        guard let connection, isOpenEpoch else {
            completion(.connectionLost)
            return
        }
        let sequence = confirms.published(completion)
        var message = message
        // basic.return carries no publish sequence number; this header ties a return to its publish.
        message.properties.headers["x-publish-seq"] = .int(Int64(sequence))
        do {
            try connection.publish(channel: Self.channel, message)
        } catch {
            handleLoss(error)
        }
    }

    /// Cancels the consumer (drain step 1) and calls `completion` on the channel queue when the
    /// broker has confirmed it. Deliveries that were already on their way still arrive.
    public func stopConsuming(completion: @escaping @Sendable () -> Void) {
        queue.async {
            self.perform(self.lifecycle.drain())
            self.publishState()
            completion()
        }
    }

    /// Number of publishes waiting for their confirm.
    public var outstandingConfirms: Int {
        queue.sync { confirms.pendingCount }
    }

    /// Closes the channel and the connection; safe to call more than once.
    public func close() {
        queue.sync {
            perform(lifecycle.close())
            publishState()
        }
    }

    /// A passive declare on the worker's own connection: ready messages and consumers of a queue,
    /// or nil when it does not exist or the connection is down.
    public func queueDepth(_ name: String, completion: @escaping @Sendable ((messages: Int, consumers: Int)?) -> Void) {
        queue.async {
            guard let connection = self.connection, self.isOpenEpoch else { return completion(nil) }
            // A passive declare of a missing queue closes the channel, so it runs on a channel of its own.
            defer { self.readBufferedInput() }
            do throws(AMQPError) {
                try connection.openChannel(2)
                let depth = try connection.declareQueue(channel: 2, name: name, passive: true)
                connection.closeChannel(2)
                completion(depth)
            } catch where error.code == .channelClosed {
                // The broker closed channel 2 (no such queue): confirm it, so the channel can be reused.
                connection.sendCloseOk(channel: 2, connection: false)
                completion(nil)
            } catch {
                completion(nil)
            }
        }
    }

    /// After a synchronous RPC: the frames for channel 1 that rabbitmq-c read while it waited for
    /// the reply sit in its buffer, and no socket event will announce them (without heartbeats,
    /// nothing else would), so they are read now.
    private func readBufferedInput() {
        if connection?.hasBufferedInput == true { scheduleRead() }
    }

    // MARK: - Connection

    private var isOpenEpoch: Bool {
        switch lifecycle.state {
        case .consuming, .draining: return true
        default: return false
        }
    }

    private func perform(_ action: ConnectionLifecycle.Action) {
        switch action {
        case .none:
            break
        case .connect(let index):
            do throws(AMQPError) {
                try connect(urlIndex: index)
            } catch {
                let url = configuration.amqp.urls[index % configuration.amqp.urls.count]
                logger.warning("broker connection failed", metadata: [
                    "broker": "\(url.host):\(url.port)", "error": "\(error)",
                ])
                perform(lifecycle.connectFailed(jitter: Double.random(in: 0..<1)))
                publishState()
            }
        case .scheduleReconnect(let delay):
            logger.info("reconnecting to the broker", metadata: ["in_seconds": "\(String(format: "%.1f", delay))"])
            queue.asyncAfter(deadline: .now() + delay) {
                self.perform(self.lifecycle.reconnectTimerFired())
                self.publishState()
            }
        case .cancelConsumer:
            guard let connection else { return }
            do {
                try connection.cancel(channel: Self.channel, consumerTag: consumerTag)
                logger.info("consumer cancelled", metadata: ["queue": "\(configuration.queue.jobs)"])
                readBufferedInput()
            } catch {
                handleLoss(error)
            }
        case .failOutstanding:
            teardown()
        case .failOutstandingAndReconnect(let delay):
            teardown()
            perform(.scheduleReconnect(delay: delay))
        case .close:
            // The lifecycle already says closed: send the acks still held back, then close.
            if let connection { try? sendAcks(on: connection, force: true) }
            teardownSources()
            connection?.close()
            connection = nil
            acks.reset()
            for completion in confirms.reset() { completion(.connectionLost) }
        }
    }

    private func connect(urlIndex: Int) throws(AMQPError) {
        let amqp = configuration.amqp
        let url = amqp.urls[urlIndex % amqp.urls.count]
        let connection = try AMQPConnection()
        try connection.open(
            url: url,
            tls: .init(caFile: amqp.tls.caFile, certFile: amqp.tls.certFile, keyFile: amqp.tls.keyFile,
                       verify: amqp.tls.verify),
            heartbeat: amqp.heartbeat, connectionName: connectionName)
        try connection.openChannel(Self.channel)
        try connection.confirmSelect(channel: Self.channel)
        if configuration.queue.declare {
            for queue in Topology(configuration: configuration).queues {
                try declare(queue, on: connection)
            }
        }
        if consume {
            try connection.qos(channel: Self.channel, prefetch: amqp.prefetch)
            _ = try connection.consume(channel: Self.channel, queue: configuration.queue.jobs, consumerTag: consumerTag)
        }
        self.connection = connection
        self.assembler = ContentAssembler(maxBodyBytes: configuration.queue.maxJobBytes)
        self.acks.reset()
        _ = lifecycle.connected()
        publishState()
        installSources(for: connection)
        logger.info("connected to the broker", metadata: [
            "broker": "\(url)", "queue": "\(configuration.queue.jobs)", "prefetch": "\(amqp.prefetch)",
        ])
        delegate?.session(self, didConnect: lifecycle.epoch)
        // Frames may already sit in rabbitmq-c's buffer after the RPCs above.
        scheduleRead()
    }

    /// Declares a queue. A delay queue that an older release declared with other arguments
    /// (PRECONDITION_FAILED) is used as it is, with a warning, so that an upgrade does not stop the
    /// worker; its hop keeps the old guarantee until the queue is deleted (docs/reliability.md).
    private func declare(_ queue: Topology.Queue, on connection: AMQPConnection) throws(AMQPError) {
        do {
            try connection.declareQueue(channel: Self.channel, name: queue.name, arguments: queue.arguments)
        } catch where queue.mayExistWithOtherArguments && error.code == .channelClosed && error.replyCode == 406 {
            // The broker closed the channel: confirm, open it again, and check that the queue is there.
            connection.sendCloseOk(channel: Self.channel, connection: false)
            try connection.openChannel(Self.channel)
            try connection.confirmSelect(channel: Self.channel)
            try connection.declareQueue(channel: Self.channel, name: queue.name, passive: true)
            logger.warning("a delay queue exists with other arguments; using it as it is", metadata: [
                "queue": "\(queue.name)", "broker_says": "\(error.message)",
                "fix": "delete the queue when it is empty; the worker declares it again (docs/reliability.md)",
            ])
        }
    }

    private func installSources(for connection: AMQPConnection) {
        let source = DispatchSource.makeReadSource(fileDescriptor: connection.fileDescriptor, queue: queue)
        source.setEventHandler { [unowned self] in self.readAvailable() }
        source.resume()
        readSource = source
        let heartbeat = configuration.amqp.heartbeat
        if heartbeat > 0 {
            let timer = DispatchSource.makeTimerSource(queue: queue)
            let interval = max(Double(heartbeat) / 4, 0.25)
            timer.schedule(deadline: .now() + interval, repeating: interval, leeway: .milliseconds(50))
            timer.setEventHandler { [unowned self] in self.readAvailable() }
            timer.resume()
            heartbeatTimer = timer
        }
    }

    private func teardownSources() {
        readSource?.cancel()
        readSource = nil
        heartbeatTimer?.cancel()
        heartbeatTimer = nil
    }

    private func teardown() {
        teardownSources()
        connection = nil
        acks.reset()
        for completion in confirms.reset() { completion(.connectionLost) }
    }

    private func handleLoss(_ error: AMQPError) {
        guard isOpenEpoch else { return }
        logger.error("lost the broker connection", metadata: ["error": "\(error)"])
        perform(lifecycle.connectionLost(jitter: Double.random(in: 0..<1)))
        publishState()
        delegate?.session(self, didLoseConnection: error)
    }

    /// A job over `queue.max_job_bytes`, whose body was never buffered: rejected without requeue,
    /// so the jobs queue's dead-letter exchange moves the original, byte for byte, to the dead
    /// queue (with `x-death`, reason `rejected`). The worker goes on with the next job.
    private func rejectOversized(_ delivery: Delivery, bodySize: UInt64) {
        let limit = configuration.queue.maxJobBytes
        let error = JobError(.jobTooLarge, "the job body is \(bodySize) bytes, over queue.max_job_bytes (\(limit))")
        logger.error("job too large; dead-lettered unread", metadata: [
            "error_code": "\(error.code)", "bytes": "\(bodySize)", "limit": "\(limit)",
            "message_id": "\(delivery.properties.messageID ?? "")",
        ])
        guard let connection else { return }
        do {
            try connection.nack(channel: Self.channel, tag: delivery.tag, requeue: false)
            acks.settle(delivery.tag)
        } catch {
            return handleLoss(error)
        }
        delegate?.session(self, didReject: delivery, error: error)
    }

    /// The broker broke the protocol: close the connection (reply code 505, unexpected frame)
    /// and reconnect, as after any loss. Costs a reconnect, never the process.
    private func protocolViolation(_ message: String) {
        logger.error("the broker broke the protocol; reconnecting", metadata: ["reason": "\(message)"])
        connection?.close(replyCode: 505)
        handleLoss(AMQPError(.protocolViolation, operation: "read", message: message))
    }

    private func publishState() {
        let state = lifecycle.state
        visible.withLock { $0.state = state }
    }

    // MARK: - Inbound

    private func scheduleRead() {
        guard !readScheduled else { return }
        readScheduled = true
        queue.async {
            self.readScheduled = false
            self.readAvailable()
        }
    }

    /// Reads what is there without blocking, in bounded batches so that publishes and acks queued
    /// behind it are not starved.
    private func readAvailable() {
        guard let connection else { return }
        var budget = 512
        do {
            while budget > 0 {
                budget -= 1
                switch try connection.readFrame(timeout: 0) {
                case .none:
                    connection.releaseBuffers()
                    return
                case .frame(let frame):
                    handle(frame)
                    if self.connection == nil { return }
                }
            }
            connection.releaseBuffers()
            scheduleRead()
        } catch {
            handleLoss(error)
        }
    }

    private func handle(_ frame: amqp_frame_t) {
        switch Int32(frame.frame_type) {
        case AMQP_FRAME_METHOD:
            handleMethod(frame.payload.method, channel: frame.channel)
        case AMQP_FRAME_HEADER:
            let properties = frame.payload.properties
            let decoded = properties.decoded?.assumingMemoryBound(to: amqp_basic_properties_t.self).pointee
            let message = assembler.header(bodySize: properties.body_size,
                                           properties: decoded.map(AMQPProperties.init(decoding:)) ?? AMQPProperties())
            if let message { complete(message) }
        case AMQP_FRAME_BODY:
            let fragment = frame.payload.body_fragment
            let message = fragment.withBuffer { assembler.body($0) }
            if let message { complete(message) }
        default:
            break
        }
    }

    private func handleMethod(_ method: amqp_method_t, channel: amqp_channel_t) {
        switch method.id {
        case AMQP_BASIC_DELIVER_METHOD:
            guard let deliver = method.decoded?.assumingMemoryBound(to: amqp_basic_deliver_t.self).pointee else { return }
            assembler.begin(.delivery(tag: deliver.delivery_tag, redelivered: deliver.redelivered != 0,
                                      exchange: deliver.exchange.stringValue ?? "",
                                      routingKey: deliver.routing_key.stringValue ?? ""))
        case AMQP_BASIC_RETURN_METHOD:
            guard let returned = method.decoded?.assumingMemoryBound(to: amqp_basic_return_t.self).pointee else { return }
            assembler.begin(.returned(replyCode: returned.reply_code, replyText: returned.reply_text.stringValue ?? "",
                                      routingKey: returned.routing_key.stringValue ?? ""))
        case AMQP_BASIC_ACK_METHOD:
            guard let ack = method.decoded?.assumingMemoryBound(to: amqp_basic_ack_t.self).pointee else { return }
            for (completion, outcome) in confirms.confirm(sequence: ack.delivery_tag, multiple: ack.multiple != 0, ack: true) {
                completion(outcome == .confirmed ? .confirmed : .returned)
            }
        case AMQP_BASIC_NACK_METHOD:
            guard let nack = method.decoded?.assumingMemoryBound(to: amqp_basic_nack_t.self).pointee else { return }
            for (completion, _) in confirms.confirm(sequence: nack.delivery_tag, multiple: nack.multiple != 0, ack: false) {
                completion(.nacked)
            }
        case AMQP_BASIC_CANCEL_METHOD:
            // The broker cancelled our consumer (queue deleted, failover). Re-subscribe with backoff
            // by recycling the connection, so that the topology is declared again.
            logger.warning("the broker cancelled the consumer; re-subscribing", metadata: ["queue": "\(configuration.queue.jobs)"])
            handleLoss(AMQPError(.channelClosed, operation: "basic.cancel from the broker", message: "consumer cancelled"))
        case AMQP_CHANNEL_CLOSE_METHOD:
            let close = method.decoded?.assumingMemoryBound(to: amqp_channel_close_t.self).pointee
            connection?.sendCloseOk(channel: channel, connection: false)
            handleLoss(AMQPError(.channelClosed, operation: "channel", message: close?.reply_text.stringValue ?? "closed",
                                 replyCode: close?.reply_code))
        case AMQP_CONNECTION_CLOSE_METHOD:
            let close = method.decoded?.assumingMemoryBound(to: amqp_connection_close_t.self).pointee
            connection?.sendCloseOk(channel: 0, connection: true)
            handleLoss(AMQPError(.connectionClosed, operation: "connection", message: close?.reply_text.stringValue ?? "closed",
                                 replyCode: close?.reply_code))
        case AMQP_CONNECTION_BLOCKED_METHOD:
            let blocked = method.decoded?.assumingMemoryBound(to: amqp_connection_blocked_t.self).pointee
            logger.warning("the broker blocked the connection (resource alarm); admission paused",
                           metadata: ["reason": "\(blocked?.reason.stringValue ?? "")"])
            visible.withLock { $0.blocked = true }
            delegate?.session(self, blocked: true)
        case AMQP_CONNECTION_UNBLOCKED_METHOD:
            logger.notice("the broker unblocked the connection; admission resumed")
            visible.withLock { $0.blocked = false }
            delegate?.session(self, blocked: false)
        default:
            break
        }
    }

    private func complete(_ message: ContentAssembler.Message) {
        switch message.kind {
        case .delivery(let tag, let redelivered, let exchange, let routingKey):
            guard acks.delivered(tag) else {
                // Acking by these tags could settle the wrong deliveries: start over on a new
                // connection, where the broker redelivers everything unacked.
                return protocolViolation("delivery tag \(tag) does not increase on the channel")
            }
            let delivery = Delivery(tag: tag, epoch: lifecycle.epoch, redelivered: redelivered, exchange: exchange,
                                    routingKey: routingKey, properties: message.properties, body: message.body,
                                    receivedAt: DispatchTime.now().uptimeNanoseconds)
            guard message.bodyKept else { return rejectOversized(delivery, bodySize: message.bodySize) }
            delegate?.session(self, didReceive: delivery)
        case .returned(let replyCode, let replyText, _):
            logger.warning("the broker returned an unroutable publish", metadata: [
                "reply_code": "\(replyCode)", "reply_text": "\(replyText)",
            ])
            if let sequence = message.properties.headers["x-publish-seq"]?.intValue, sequence > 0 {
                confirms.returned(sequence: UInt64(sequence))
            }
        }
    }
}

extension amqp_bytes_t {
    func withBuffer<T>(_ body: (UnsafeRawBufferPointer) -> T) -> T {
        body(UnsafeRawBufferPointer(start: bytes, count: bytes == nil ? 0 : len))
    }
}
