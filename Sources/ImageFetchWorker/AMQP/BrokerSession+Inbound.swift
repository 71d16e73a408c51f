import CRabbitMQ
import CShims
import Dispatch
import Logging
import Synchronization

// The inbound side: reading frames without blocking, assembling deliveries and returns from their
// frames, dispatching confirms and the broker's own methods. Everything here runs on the channel queue.
extension BrokerSession {
    /// After a synchronous RPC: the frames for channel 1 that rabbitmq-c read while it waited for
    /// the reply sit in its buffer, and no socket event will announce them (without heartbeats,
    /// nothing else would), so they are read now.
    func readBufferedInput() {
        assertOnQueue()
        if connection?.hasBufferedInput == true { scheduleRead() }
    }

    func scheduleRead() {
        assertOnQueue()
        guard !readScheduled else { return }
        readScheduled = true
        queue.async {
            self.readScheduled = false
            self.readAvailable()
        }
    }

    /// Reads what is there without blocking, in bounded batches so that publishes and acks queued
    /// behind it are not starved.
    func readAvailable() {
        assertOnQueue()
        guard let connection else { return }
        var budget = 512
        var heldBodyPages = 0
        do {
            while budget > 0 {
                budget -= 1
                switch try connection.readFrame(timeout: 0) {
                case .none:
                    connection.releaseBuffers()
                    return
                case .frame(let frame):
                    handle(frame)
                    guard self.connection != nil else { return }
                    // rabbitmq-c gives every frame a page of frame_max bytes from the channel's
                    // pool and frees nothing until released; the assembler has copied what it
                    // keeps. Otherwise a batch of 512 body frames (a 64 MiB job, refused unread)
                    // held 64 MiB, and the pool keeps its pages for good. Released every few body
                    // frames, not after each: a release per job's one body frame cost about 2,000
                    // instructions a message (callgrind), and a few pages are still bounded.
                    if Int32(frame.frame_type) == AMQP_FRAME_BODY {
                        heldBodyPages += 1
                        if heldBodyPages == Self.bodyPagesHeld {
                            heldBodyPages = 0
                            connection.releaseBuffers()
                        }
                    }
                }
            }
            connection.releaseBuffers()
            scheduleRead()
        } catch {
            handleLoss(error)
        }
    }

    /// Body frames whose pages a read batch may hold before it releases them.
    static let bodyPagesHeld = 8

    private func handle(_ frame: amqp_frame_t) {
        if frame.channel == Self.deadCopyChannel { return handleDeadCopyFrame(frame) }
        switch Int32(frame.frame_type) {
        case AMQP_FRAME_METHOD:
            handleMethod(frame.payload.method, channel: frame.channel)
        case AMQP_FRAME_HEADER:
            let properties = frame.payload.properties
            let decoded = properties.decoded?.assumingMemoryBound(to: amqp_basic_properties_t.self).pointee
            let decodedProperties = decoded.map(AMQPProperties.init(decoding:)) ?? AMQPProperties()
            let message = assembler.header(bodySize: properties.body_size, properties: decodedProperties)
            if let message { return complete(message) }
            if let tag = assembler.droppedDeliveryTag {
                beginDeadCopy(tag: tag, properties: decodedProperties, bodySize: properties.body_size)
            }
        case AMQP_FRAME_BODY:
            let fragment = frame.payload.body_fragment
            if let tag = assembler.droppedDeliveryTag { fragment.withBuffer { forwardToDeadCopy(tag: tag, $0) } }
            let message = fragment.withBuffer { assembler.body($0) }
            if let message { complete(message) }
        default:
            break
        }
    }

    private func handleMethod(_ method: amqp_method_t, channel: amqp_channel_t) {
        switch method.id {
        case AMQP_BASIC_DELIVER_METHOD:
            guard let deliver = method.decoded?.assumingMemoryBound(to: amqp_basic_deliver_t.self).pointee else {
                return
            }
            let interrupted = assembler.begin(
                .delivery(
                    tag: deliver.delivery_tag, redelivered: deliver.redelivered != 0,
                    exchange: deliver.exchange.stringValue ?? "",
                    routingKey: deliver.routing_key.stringValue ?? ""))
            if interrupted != nil { return protocolViolation(Self.interruptedContent) }
        case AMQP_BASIC_RETURN_METHOD:
            guard let returned = method.decoded?.assumingMemoryBound(to: amqp_basic_return_t.self).pointee else {
                return
            }
            let interrupted = assembler.begin(
                .returned(
                    replyCode: returned.reply_code, replyText: returned.reply_text.stringValue ?? "",
                    routingKey: returned.routing_key.stringValue ?? ""))
            if interrupted != nil { return protocolViolation(Self.interruptedContent) }
        case AMQP_BASIC_ACK_METHOD:
            guard let ack = method.decoded?.assumingMemoryBound(to: amqp_basic_ack_t.self).pointee else { return }
            for (completion, outcome) in confirms.confirm(
                sequence: ack.delivery_tag, multiple: ack.multiple != 0, ack: true)
            {
                completion(outcome == .confirmed ? .confirmed : .returned)
            }
        case AMQP_BASIC_NACK_METHOD:
            guard let nack = method.decoded?.assumingMemoryBound(to: amqp_basic_nack_t.self).pointee else { return }
            for (completion, _) in confirms.confirm(
                sequence: nack.delivery_tag, multiple: nack.multiple != 0, ack: false)
            {
                completion(.nacked)
            }
        case AMQP_BASIC_CANCEL_METHOD:
            // The broker cancelled our consumer (queue deleted, failover). Re-subscribe with backoff
            // by recycling the connection, so that the topology is declared again.
            logger.warning(
                "the broker cancelled the consumer; re-subscribing", metadata: ["queue": "\(configuration.queue.jobs)"])
            handleLoss(
                AMQPError(.channelClosed, operation: "basic.cancel from the broker", message: "consumer cancelled"))
        case AMQP_CHANNEL_CLOSE_METHOD:
            let close = method.decoded?.assumingMemoryBound(to: amqp_channel_close_t.self).pointee
            connection?.sendCloseOk(channel: channel, connection: false)
            handleLoss(
                AMQPError(
                    .channelClosed, operation: "channel", message: close?.reply_text.stringValue ?? "closed",
                    replyCode: close?.reply_code))
        case AMQP_CONNECTION_CLOSE_METHOD:
            let close = method.decoded?.assumingMemoryBound(to: amqp_connection_close_t.self).pointee
            connection?.sendCloseOk(channel: 0, connection: true)
            handleLoss(
                AMQPError(
                    .connectionClosed, operation: "connection", message: close?.reply_text.stringValue ?? "closed",
                    replyCode: close?.reply_code))
        case AMQP_CONNECTION_BLOCKED_METHOD:
            let blocked = method.decoded?.assumingMemoryBound(to: amqp_connection_blocked_t.self).pointee
            logger.warning(
                "the broker blocked the connection (resource alarm); admission paused",
                metadata: ["reason": "\(blocked?.reason.stringValue ?? "")"])
            visible.withLock { $0.blocked = true }
            delegate?.session(self, blocked: true)
        case AMQP_CONNECTION_UNBLOCKED_METHOD:
            logger.notice("the broker unblocked the connection; admission resumed")
            let wasBlocked = visible.withLock { state in
                defer { state.blocked = false }
                return state.blocked
            }
            if wasBlocked { confirmWatch.unblocked(at: DispatchTime.now().uptimeNanoseconds) }
            delegate?.session(self, blocked: false)
            if cancelAwaitsUnblock { cancelConsumer() }
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
            let delivery = Delivery(
                tag: tag, epoch: lifecycle.epoch, redelivered: redelivered, exchange: exchange,
                routingKey: routingKey, properties: message.properties, body: message.body,
                receivedAt: DispatchTime.now().uptimeNanoseconds)
            guard message.bodyKept else { return rejectOversized(delivery, bodySize: message.bodySize) }
            delegate?.session(self, didReceive: delivery)
        case .returned(let replyCode, let replyText, _):
            logger.warning(
                "the broker returned an unroutable publish",
                metadata: [
                    "reply_code": "\(replyCode)", "reply_text": "\(replyText)",
                ])
            if let sequence = message.properties.headers[Self.publishSequenceHeader]?.intValue, sequence > 0 {
                confirms.returned(sequence: UInt64(sequence))
            }
        }
    }

    /// A job over `queue.max_job_bytes`, whose body was never buffered. Its dead copy was
    /// streamed as its frames came (``beginDeadCopy(tag:properties:bodySize:)``): the original is
    /// acked when the copy is confirmed. Without a copy (it could not be begun), it is rejected
    /// without requeue, so the jobs queue's dead-letter exchange moves it, byte for byte, to the
    /// dead queue (with `x-death`, reason `rejected`). The worker goes on with the next job.
    private func rejectOversized(_ delivery: Delivery, bodySize: UInt64) {
        let limit = configuration.queue.maxJobBytes
        logger.error(
            "job too large; dead-lettered unread",
            metadata: [
                "error_code": "\(JobError.Code.jobTooLarge)", "bytes": "\(bodySize)", "limit": "\(limit)",
                "message_id": "\(delivery.properties.messageID ?? "")",
            ])
        if deadCopies.finished(tag: delivery.tag, now: DispatchTime.now().uptimeNanoseconds) {
            delegate?.session(self, didRejectOversized: delivery, bodySize: bodySize)
            return
        }
        guard let connection else { return }
        do {
            try connection.nack(channel: Self.channel, tag: delivery.tag, requeue: false)
            acks.settle(delivery.tag)
        } catch {
            return handleLoss(error)
        }
        delegate?.session(self, didRejectOversized: delivery, bodySize: bodySize)
    }

    static let interruptedContent = "a content method came before the previous content was complete"

    /// The broker broke the protocol: close the connection (reply code 505, unexpected frame)
    /// and reconnect, as after any loss. Costs a reconnect, never the process.
    private func protocolViolation(_ message: String) {
        logger.error("the broker broke the protocol; reconnecting", metadata: ["reason": "\(message)"])
        connection?.close(replyCode: 505)
        handleLoss(AMQPError(.protocolViolation, operation: "read", message: message))
    }
}

extension amqp_bytes_t {
    func withBuffer<T>(_ body: (UnsafeRawBufferPointer) -> T) -> T {
        body(UnsafeRawBufferPointer(start: bytes, count: bytes == nil ? 0 : len))
    }
}
