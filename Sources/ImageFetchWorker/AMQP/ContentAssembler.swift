/// Assembles AMQP content (a method frame, a header frame, then body frames) into whole messages.
///
/// Pure state: it copies what it is given, so rabbitmq-c's frame memory can be released as soon as
/// a call returns. The header's body size comes from the broker and is not trusted: a delivery
/// whose body is over `maxBodyBytes` is counted through but never buffered, and a returned
/// publish keeps no body (only its headers are read).
struct ContentAssembler {
    /// What started the content.
    enum Kind: Equatable {
        case delivery(tag: UInt64, redelivered: Bool, exchange: String, routingKey: String)
        case returned(replyCode: UInt16, replyText: String, routingKey: String)
    }

    /// A complete message.
    struct Message {
        var kind: Kind
        var properties: AMQPProperties
        /// The body; empty when it was not kept (see ``bodyKept``).
        var body: [UInt8]
        /// The size the header declared.
        var bodySize: UInt64
        /// False when the body was dropped: a delivery over the limit, or a return.
        var bodyKept: Bool
    }

    /// The largest delivery body kept.
    let maxBodyBytes: Int

    private var kind: Kind?
    private var properties = AMQPProperties()
    private var expected: UInt64 = 0
    private var received: UInt64 = 0
    private var keep = false
    private var body: [UInt8] = []
    private var haveHeader = false

    init(maxBodyBytes: Int = 1 << 20) {
        self.maxBodyBytes = max(maxBodyBytes, 0)
    }

    /// The delivery whose body is being counted through unkept (over the limit), while its
    /// frames arrive.
    var droppedDeliveryTag: UInt64? {
        guard haveHeader, !keep, case .delivery(let tag, _, _, _)? = kind else { return nil }
        return tag
    }

    /// A content-bearing method arrived. Returns what it interrupted: a content whose header or
    /// body had not all come, which is dropped. AMQP forbids that (a channel's content frames are
    /// never mixed with its methods), so the session treats it as a protocol violation: a dropped
    /// delivery would never be settled, and a later ack of several tags would settle it unrun.
    @discardableResult
    mutating func begin(_ kind: Kind) -> Kind? {
        let interrupted = self.kind
        self.kind = kind
        haveHeader = false
        body = []
        expected = 0
        received = 0
        return interrupted
    }

    /// The header frame. Returns the message at once when its body is empty.
    mutating func header(bodySize: UInt64, properties: AMQPProperties) -> Message? {
        guard let kind, !haveHeader else { return nil }
        haveHeader = true
        self.properties = properties
        expected = bodySize
        received = 0
        body = []
        if case .delivery = kind, bodySize <= UInt64(maxBodyBytes) {
            keep = true
            // Bounded by the limit, so a claim can cost at most `maxBodyBytes`.
            body.reserveCapacity(Int(bodySize))
        } else {
            keep = false
        }
        return expected == 0 ? finish() : nil
    }

    /// A body frame. Returns the message when the body is complete.
    mutating func body(_ fragment: UnsafeRawBufferPointer) -> Message? {
        guard kind != nil, haveHeader else { return nil }
        received &+= UInt64(fragment.count)
        // A broker that sends more than it declared gets no more memory than the declared size.
        if keep, body.count < expected {
            body.append(contentsOf: fragment.prefix(Int(expected) - body.count))
        }
        return received >= expected ? finish() : nil
    }

    private mutating func finish() -> Message? {
        guard let kind else { return nil }
        let message = Message(
            kind: kind, properties: properties, body: keep ? body : [], bodySize: expected,
            bodyKept: keep)
        self.kind = nil
        haveHeader = false
        keep = false
        body = []
        expected = 0
        received = 0
        return message
    }
}
