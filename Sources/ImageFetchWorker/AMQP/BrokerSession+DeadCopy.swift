import CRabbitMQ
import CShims
import Dispatch
import Logging

/// The dead-letter copy of a job over `queue.max_job_bytes`, published on a channel of its own
/// while the job's frames are read: the copy's content header as the job's arrives, then each body
/// frame as it is read, so the job costs a frame of memory and its copy in `queue.dead` says why
/// (`x-error-code: job_too_large`), as every other dead copy does. The original is acked once the
/// copy is confirmed; a copy that is nacked, returned or cannot be begun leaves the original to
/// be rejected, so the jobs queue's dead-letter exchange moves it as it came. Pure state; the
/// channel queue owns it.
struct DeadCopyStream {
    /// Which connection (channel epoch) has the copy channel open; nil: none.
    private(set) var openEpoch: UInt64?
    private var nextSequence: UInt64 = 1
    /// The copy being streamed: its job's delivery tag, the body bytes still to send, its number.
    private(set) var current: (tag: UInt64, remaining: UInt64, sequence: UInt64)?
    /// Copies sent whole and not yet confirmed: sequence → the original's tag, when the copy was
    /// sent whole, and whether the broker returned it (unroutable).
    private var pending: [UInt64: (tag: UInt64, sentAt: UInt64, returned: Bool)] = [:]

    /// What to do with an original once its copy is answered.
    enum Settle: Equatable {
        /// The copy is in `queue.dead`: ack the original.
        case ack(UInt64)
        /// The copy is not: reject the original to the dead-letter exchange.
        case reject(UInt64)
    }

    /// Whether the channel must be opened on the connection of `epoch` first; forgets what
    /// belonged to an earlier connection (its originals are redelivered).
    mutating func needsChannel(epoch: UInt64) -> Bool {
        guard openEpoch != epoch else { return false }
        self = DeadCopyStream()
        openEpoch = epoch
        return true
    }

    /// A copy begins; returns its sequence number (the `x-publish-seq` of its headers).
    mutating func begin(tag: UInt64, bodySize: UInt64) -> UInt64 {
        let sequence = nextSequence
        nextSequence += 1
        current = (tag, bodySize, sequence)
        return sequence
    }

    /// How many bytes of a body frame of `tag` go to the copy (0: none is being streamed).
    mutating func forward(tag: UInt64, fragment: Int) -> Int {
        guard let copy = current, copy.tag == tag else { return 0 }
        let count = Int(min(UInt64(fragment), copy.remaining))
        current?.remaining -= UInt64(count)
        return count
    }

    /// The original `tag` has been read whole at `now`: true when its copy was sent whole and now
    /// waits for its confirm (the caller then settles it on ``confirmed(sequence:multiple:ack:)``),
    /// false when it has no copy and must be rejected now.
    mutating func finished(tag: UInt64, now: UInt64) -> Bool {
        guard let copy = current, copy.tag == tag else { return false }
        current = nil
        guard copy.remaining == 0 else { return false }
        pending[copy.sequence] = (tag, now, false)
        return true
    }

    /// When the copy that has waited longest for its confirm was sent whole; nil: none waits. The
    /// confirm timeout watches these as it watches the results (a broker that confirms nothing on
    /// this channel would otherwise hold their originals unacked for as long as the connection
    /// lives).
    var oldestUnconfirmedAt: UInt64? {
        pending.values.lazy.map(\.sentAt).min()
    }

    /// How many copies wait for their confirm.
    var unconfirmedCount: Int { pending.count }

    /// A copy came back in a `basic.return` (its confirm follows).
    mutating func returned(sequence: UInt64) {
        pending[sequence]?.returned = true
    }

    /// The broker's `basic.ack` or `basic.nack` on the copy channel.
    mutating func confirmed(sequence: UInt64, multiple: Bool, ack: Bool) -> [Settle] {
        let answered = multiple ? pending.keys.filter { $0 <= sequence }.sorted() : [sequence]
        return answered.compactMap { number in
            guard let copy = pending.removeValue(forKey: number) else { return nil }
            return ack && !copy.returned ? .ack(copy.tag) : .reject(copy.tag)
        }
    }

    /// The copy being streamed was abandoned (a send failed): the original is rejected when read.
    mutating func abandon() {
        current = nil
    }

    /// The copy just begun was never sent (it could not be encoded): the original is rejected when
    /// read, and its number goes back, since the broker numbers only the publishes it receives.
    mutating func withdraw() {
        guard let copy = current, copy.sequence == nextSequence - 1 else { return abandon() }
        current = nil
        nextSequence -= 1
    }
}

extension BrokerSession {
    /// The channel of dead-letter copies of too-large jobs (1 consumes and publishes, 2 is the
    /// depth sampler's).
    static let deadCopyChannel: amqp_channel_t = 3

    /// The header of a delivery over `queue.max_job_bytes` arrived: begin its dead copy.
    func beginDeadCopy(tag: UInt64, properties: AMQPProperties, bodySize: UInt64) {
        // A copy made from what was read lossily would not be the job: with no copy begun, the
        // original is rejected as it came when read.
        guard let connection, !properties.readLossily else { return }
        let attempt = Int(clamping: properties.headers[JobHeaders.attempt]?.intValue ?? 1)
        let original = Delivery(tag: tag, epoch: lifecycle.epoch, redelivered: false, properties: properties, body: [])
        let copy = OutcomePolicy(configuration).oversizedDeadCopy(
            of: original, bodySize: bodySize, attempt: max(attempt, 1))
        do {
            if deadCopies.needsChannel(epoch: lifecycle.epoch) {
                try connection.openConfirmChannelPipelined(Self.deadCopyChannel)
            }
            let sequence = deadCopies.begin(tag: tag, bodySize: bodySize)
            do {
                try connection.beginPublish(
                    channel: Self.deadCopyChannel, copy, bodySize: bodySize,
                    adding: (Self.publishSequenceHeader, .int(Int64(sequence))))
            } catch  where error.code == .unencodable {
                deadCopies.withdraw()  // rejected as it came when read
            }
        } catch {
            handleLoss(error)
        }
    }

    /// A body frame of the delivery `tag`, which is not kept: its bytes go on to the copy.
    func forwardToDeadCopy(tag: UInt64, _ fragment: UnsafeRawBufferPointer) {
        let count = deadCopies.forward(tag: tag, fragment: fragment.count)
        guard count > 0, let connection else { return }
        do {
            let part = UnsafeRawBufferPointer(rebasing: fragment.prefix(count))
            try connection.sendBody(channel: Self.deadCopyChannel, part)
        } catch {
            handleLoss(error)
        }
    }

    /// A frame on the copy channel: confirms and returns of copies; the channel's own answers
    /// (`open-ok`, `select-ok`) and a returned copy's content need nothing.
    func handleDeadCopyFrame(_ frame: amqp_frame_t) {
        switch Int32(frame.frame_type) {
        case AMQP_FRAME_METHOD:
            let method = frame.payload.method
            switch method.id {
            case AMQP_BASIC_ACK_METHOD:
                guard let ack = method.decoded?.assumingMemoryBound(to: amqp_basic_ack_t.self).pointee else { return }
                settle(deadCopies.confirmed(sequence: ack.delivery_tag, multiple: ack.multiple != 0, ack: true))
            case AMQP_BASIC_NACK_METHOD:
                guard let nack = method.decoded?.assumingMemoryBound(to: amqp_basic_nack_t.self).pointee else { return }
                settle(deadCopies.confirmed(sequence: nack.delivery_tag, multiple: nack.multiple != 0, ack: false))
            case AMQP_CHANNEL_CLOSE_METHOD:
                let close = method.decoded?.assumingMemoryBound(to: amqp_channel_close_t.self).pointee
                connection?.sendCloseOk(channel: Self.deadCopyChannel, connection: false)
                handleLoss(
                    AMQPError(
                        .channelClosed, operation: "dead-copy channel",
                        message: close?.reply_text.stringValue ?? "closed", replyCode: close?.reply_code))
            default:
                break
            }
        case AMQP_FRAME_HEADER:
            // A returned copy's header: its x-publish-seq says which.
            let decoded = frame.payload.properties.decoded?
                .assumingMemoryBound(to: amqp_basic_properties_t.self).pointee
            let headers = decoded.map(AMQPProperties.init(decoding:))?.headers
            if let sequence = headers?[Self.publishSequenceHeader]?.intValue, sequence > 0 {
                deadCopies.returned(sequence: UInt64(sequence))
            }
        default:
            break
        }
    }

    private func settle(_ actions: [DeadCopyStream.Settle]) {
        for action in actions {
            switch action {
            case .ack(let tag):
                ackOnQueue(Delivery(tag: tag, epoch: lifecycle.epoch, redelivered: false, body: []))
            case .reject(let tag):
                logger.warning("the dead copy of a too-large job was not confirmed; rejecting the original as it came")
                nackOnQueue(Delivery(tag: tag, epoch: lifecycle.epoch, redelivered: false, body: []), requeue: false)
            }
        }
    }
}
