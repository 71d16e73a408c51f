import CRabbitMQ
import CShims

/// One header: a name and its value.
package typealias AMQPHeader = (key: String, value: AMQPFieldValue)

/// The AMQP basic properties the worker reads and writes.
public struct AMQPProperties: Sendable, Hashable {
    public var contentType: String? = nil
    /// `content_encoding`, `type` and `app_id` mean nothing to the worker: kept for the producer's
    /// consumers, on every copy. `user_id` is not kept (the broker refuses a copy whose `user_id`
    /// is not the worker's own user), nor `expiration` (it would cut a retry's delay short and
    /// let a dead letter expire).
    public var contentEncoding: String? {
        get { carried?.contentEncoding }
        set { carry(contentEncoding: newValue, type: type, appID: appID) }
    }
    public var type: String? {
        get { carried?.type }
        set { carry(contentEncoding: contentEncoding, type: newValue, appID: appID) }
    }
    public var appID: String? {
        get { carried?.appID }
        set { carry(contentEncoding: contentEncoding, type: type, appID: newValue) }
    }
    /// Those three in one box, nil when none is set: a delivery's properties are copied a few
    /// times a job, and three strings of their own cost every copy (callgrind, png32: +0.3 %).
    private var carried: Carried?
    public var messageID: String? = nil
    public var correlationID: String? = nil
    public var replyTo: String? = nil
    /// True for delivery mode 2.
    public var persistent: Bool = false
    public var timestamp: UInt64? = nil
    /// 0 to 255; a queue declared with `x-max-priority` delivers higher priorities first.
    public var priority: UInt8? = nil
    public var headers: [String: AMQPFieldValue] = [:]
    /// A received header nested tables or arrays deeper than ``AMQPTableDecoder/maxDepth`` (what
    /// was deeper is `.void` in ``headers``), had a name that is not UTF-8 (left out), or two
    /// names were equal as Strings (one kept): the job is rejected unread.
    package var headersCut = false
    /// The first of the text properties that was not UTF-8 (read with replacement characters):
    /// no copy of the job could carry it as it came, so the job is rejected unread.
    package var notUTF8: TextProperty?
    public init() {}

    /// The short-string properties the worker reads as text, by their AMQP names.
    package enum TextProperty: String, Sendable, Hashable {
        case contentType = "content_type", contentEncoding = "content_encoding", type, appID = "app_id"
        case messageID = "message_id", correlationID = "correlation_id", replyTo = "reply_to"
    }

    /// Whether something was read other than it came: a copy built from these properties would
    /// not be the delivery.
    package var readLossily: Bool { headersCut || notUTF8 != nil }

    /// What was read other than it came, for the log; nil when nothing was.
    package var lossyReading: String? {
        if let notUTF8 { return "the \(notUTF8.rawValue) property is not UTF-8" }
        if headersCut {
            return
                "a header nests deeper than \(AMQPTableDecoder.maxDepth) levels, has a name that is not UTF-8, or gives a name twice"
        }
        return nil
    }

    private mutating func carry(contentEncoding: String?, type: String?, appID: String?) {
        let none = contentEncoding == nil && type == nil && appID == nil
        carried = none ? nil : Carried(contentEncoding: contentEncoding, type: type, appID: appID)
    }

    /// Immutable, so a copy of the properties shares it safely.
    private final class Carried: Sendable, Hashable {
        let contentEncoding: String?
        let type: String?
        let appID: String?

        init(contentEncoding: String?, type: String?, appID: String?) {
            self.contentEncoding = contentEncoding
            self.type = type
            self.appID = appID
        }

        static func == (lhs: Carried, rhs: Carried) -> Bool {
            lhs.contentEncoding == rhs.contentEncoding && lhs.type == rhs.type && lhs.appID == rhs.appID
        }

        func hash(into hasher: inout Hasher) {
            hasher.combine(contentEncoding)
            hasher.combine(type)
            hasher.combine(appID)
        }
    }

    init(decoding properties: amqp_basic_properties_t) {
        let flags = properties._flags
        func has(_ flag: Int32) -> Bool { flags & amqp_flags_t(flag) != 0 }
        if has(AMQP_BASIC_CONTENT_TYPE_FLAG) { contentType = text(properties.content_type, .contentType) }
        if has(AMQP_BASIC_CONTENT_ENCODING_FLAG) || has(AMQP_BASIC_TYPE_FLAG) || has(AMQP_BASIC_APP_ID_FLAG) {
            let encoding =
                has(AMQP_BASIC_CONTENT_ENCODING_FLAG) ? text(properties.content_encoding, .contentEncoding) : nil
            let type = has(AMQP_BASIC_TYPE_FLAG) ? text(properties.type, .type) : nil
            let appID = has(AMQP_BASIC_APP_ID_FLAG) ? text(properties.app_id, .appID) : nil
            carry(contentEncoding: encoding, type: type, appID: appID)
        }
        if has(AMQP_BASIC_MESSAGE_ID_FLAG) { messageID = text(properties.message_id, .messageID) }
        if has(AMQP_BASIC_CORRELATION_ID_FLAG) { correlationID = text(properties.correlation_id, .correlationID) }
        if has(AMQP_BASIC_REPLY_TO_FLAG) { replyTo = text(properties.reply_to, .replyTo) }
        if has(AMQP_BASIC_DELIVERY_MODE_FLAG) { persistent = properties.delivery_mode == 2 }
        if has(AMQP_BASIC_TIMESTAMP_FLAG) { timestamp = properties.timestamp }
        if has(AMQP_BASIC_PRIORITY_FLAG) { priority = properties.priority }
        if has(AMQP_BASIC_HEADERS_FLAG) { headers = AMQPTableDecoder.decode(properties.headers, cut: &headersCut) }
    }

    /// A text property, nil when empty; one that is not UTF-8 is noted in ``notUTF8``.
    private mutating func text(_ bytes: amqp_bytes_t, _ property: TextProperty) -> String? {
        guard bytes.len > 0 else { return nil }
        if let text = bytes.validatedString { return text }
        if notUTF8 == nil { notUTF8 = property }
        return bytes.stringValue
    }

    /// The properties in arena memory; `header` is added to (or replaces one of) ``headers``.
    func encode(in arena: AMQPArena, adding header: AMQPHeader? = nil) -> amqp_basic_properties_t {
        var result = amqp_basic_properties_t()
        var flags: Int32 = 0
        // `inout` on the field, captures for the rest: no exclusive access overlaps.
        func put(_ value: String?, _ flag: Int32, _ field: inout amqp_bytes_t) {
            guard let value else { return }
            flags |= flag
            field = arena.bytes(value)
        }
        put(contentType, AMQP_BASIC_CONTENT_TYPE_FLAG, &result.content_type)
        if let carried {
            put(carried.contentEncoding, AMQP_BASIC_CONTENT_ENCODING_FLAG, &result.content_encoding)
            put(carried.type, AMQP_BASIC_TYPE_FLAG, &result.type)
            put(carried.appID, AMQP_BASIC_APP_ID_FLAG, &result.app_id)
        }
        put(messageID, AMQP_BASIC_MESSAGE_ID_FLAG, &result.message_id)
        put(correlationID, AMQP_BASIC_CORRELATION_ID_FLAG, &result.correlation_id)
        put(replyTo, AMQP_BASIC_REPLY_TO_FLAG, &result.reply_to)
        if persistent {
            flags |= AMQP_BASIC_DELIVERY_MODE_FLAG
            result.delivery_mode = 2
        }
        if let timestamp {
            flags |= AMQP_BASIC_TIMESTAMP_FLAG
            result.timestamp = timestamp
        }
        if let priority {
            flags |= AMQP_BASIC_PRIORITY_FLAG
            result.priority = priority
        }
        if !headers.isEmpty || header != nil {
            flags |= AMQP_BASIC_HEADERS_FLAG
            result.headers = arena.table(headers, adding: header)
        }
        result._flags = amqp_flags_t(flags)
        return result
    }
}

/// A message the broker delivered on the consumer.
public struct Delivery: Sendable {
    /// The delivery tag, valid only on the channel ``epoch`` it came from.
    public var tag: UInt64
    /// Which channel incarnation delivered it; a reconnect starts a new epoch, and tags of an
    /// old epoch are never acked.
    public var epoch: UInt64
    public var redelivered: Bool
    public var exchange: String
    public var routingKey: String
    public var properties: AMQPProperties
    public var body: [UInt8]
    /// When the delivery was read off the socket (`DispatchTime` uptime nanoseconds).
    public var receivedAt: UInt64

    public init(
        tag: UInt64, epoch: UInt64, redelivered: Bool, exchange: String = "", routingKey: String = "",
        properties: AMQPProperties = AMQPProperties(), body: [UInt8], receivedAt: UInt64 = 0
    ) {
        self.receivedAt = receivedAt
        self.tag = tag
        self.epoch = epoch
        self.redelivered = redelivered
        self.exchange = exchange
        self.routingKey = routingKey
        self.properties = properties
        self.body = body
    }

    /// The delivery without its body and properties: all that settling it needs (its tag, epoch
    /// and arrival time), for state that outlives the job's content.
    package var withoutContent: Delivery {
        Delivery(tag: tag, epoch: epoch, redelivered: redelivered, body: [], receivedAt: receivedAt)
    }
}

/// A message to publish.
public struct OutboundMessage: Sendable {
    public var exchange: String
    public var routingKey: String
    public var mandatory: Bool
    public var properties: AMQPProperties
    public var body: [UInt8]

    public init(
        exchange: String = "", routingKey: String, mandatory: Bool = true,
        properties: AMQPProperties, body: [UInt8]
    ) {
        self.exchange = exchange
        self.routingKey = routingKey
        self.mandatory = mandatory
        self.properties = properties
        self.body = body
    }
}

/// What `basic.publish` hands rabbitmq-c for one message, in an arena's memory: valid until the
/// arena's next ``AMQPArena/reset()``. The body is not copied; rabbitmq-c reads it in place.
@_spi(Benchmarks) public struct PublishEnvelope {
    var properties: amqp_basic_properties_t
    var exchange: amqp_bytes_t
    var routingKey: amqp_bytes_t
}

extension AMQPArena {
    /// Encodes all of `message` but its body, with `header` among its headers. Public as SPI so
    /// that the Benchmarks/ package can hold the publish path's allocations to a threshold.
    @_spi(Benchmarks) public func envelope(
        of message: OutboundMessage,
        adding header: (key: String, value: AMQPFieldValue)? = nil
    ) -> PublishEnvelope {
        let properties = message.properties.encode(in: self, adding: header)
        return PublishEnvelope(
            properties: properties, exchange: bytes(message.exchange),
            routingKey: bytes(message.routingKey))
    }
}
