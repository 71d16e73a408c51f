/// Assembles AMQP content (a method frame, a header frame, then body frames) into whole messages.
///
/// Pure state: it copies what it is given, so rabbitmq-c's frame memory can be released as soon as
/// a call returns.
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
        var body: [UInt8]
    }

    private var kind: Kind?
    private var properties = AMQPProperties()
    private var expected = 0
    private var body: [UInt8] = []
    private var haveHeader = false

    /// A content-bearing method arrived; anything half-assembled is dropped.
    mutating func begin(_ kind: Kind) {
        self.kind = kind
        haveHeader = false
        body = []
        expected = 0
    }

    /// The header frame. Returns the message at once when its body is empty.
    mutating func header(bodySize: Int, properties: AMQPProperties) -> Message? {
        guard kind != nil, !haveHeader else { return nil }
        haveHeader = true
        self.properties = properties
        expected = max(bodySize, 0)
        body = []
        body.reserveCapacity(expected)
        return expected == 0 ? finish() : nil
    }

    /// A body frame. Returns the message when the body is complete.
    mutating func body(_ fragment: UnsafeRawBufferPointer) -> Message? {
        guard kind != nil, haveHeader else { return nil }
        body.append(contentsOf: fragment)
        return body.count >= expected ? finish() : nil
    }

    private mutating func finish() -> Message? {
        guard let kind else { return nil }
        let message = Message(kind: kind, properties: properties, body: body)
        self.kind = nil
        haveHeader = false
        body = []
        expected = 0
        return message
    }
}
