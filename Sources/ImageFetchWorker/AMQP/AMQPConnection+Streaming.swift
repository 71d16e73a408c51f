import CRabbitMQ
import CShims

/// Publishing a message whose body is not in memory: its method and content header first, then
/// the body frame by frame as it arrives. The session uses it to dead-letter a job over
/// `queue.max_job_bytes` with the reason, while the job's own frames are read, one at a time.
extension AMQPConnection {
    /// Opens `channel` in confirm mode without waiting for the broker's answers: the broker handles
    /// a channel's frames in order, so a publish may follow at once, and `channel.open-ok` and
    /// `confirm.select-ok` arrive later as frames for the reader.
    func openConfirmChannelPipelined(_ channel: UInt16) throws(AMQPError) {
        var open = amqp_channel_open_t(out_of_band: amqp_empty_bytes)
        var status = amqp_send_method(state, channel, AMQP_CHANNEL_OPEN_METHOD, &open)
        if status == AMQP_STATUS_OK.rawValue {
            var select = amqp_confirm_select_t(nowait: 0)
            status = amqp_send_method(state, channel, AMQP_CONFIRM_SELECT_METHOD, &select)
        }
        if status != AMQP_STATUS_OK.rawValue { throw AMQPError.status(status, operation: "channel.open \(channel)") }
    }

    /// Sends `basic.publish` and the content header of a message whose `bodySize` bytes follow
    /// in ``sendBody(channel:_:)`` calls; `message.body` is not sent. Nothing goes out when the
    /// message cannot be encoded (``AMQPError/Code/unencodable``).
    func beginPublish(
        channel: UInt16, _ message: OutboundMessage, bodySize: UInt64,
        adding header: AMQPHeader? = nil
    ) throws(AMQPError) {
        let arena = AMQPArena()
        var envelope = arena.envelope(of: message, adding: header)
        try checkEncodable(message, &envelope.properties, arenaBytes: arena.bytesHandedOut)
        var publish = amqp_basic_publish_t(
            ticket: 0, exchange: envelope.exchange, routing_key: envelope.routingKey,
            mandatory: message.mandatory ? 1 : 0, immediate: 0)
        var status = amqp_send_method(state, channel, AMQP_BASIC_PUBLISH_METHOD, &publish)
        if status == AMQP_STATUS_OK.rawValue {
            status = withUnsafeMutablePointer(to: &envelope.properties) { properties in
                var frame = amqp_frame_t()
                frame.frame_type = UInt8(AMQP_FRAME_HEADER)
                frame.channel = channel
                frame.payload.properties.class_id = UInt16(AMQP_BASIC_CLASS)
                frame.payload.properties.body_size = bodySize
                frame.payload.properties.decoded = UnsafeMutableRawPointer(properties)
                return amqp_send_frame(state, &frame)
            }
        }
        if status != AMQP_STATUS_OK.rawValue { throw AMQPError.status(status, operation: "basic.publish (streamed)") }
    }

    /// Sends one body frame of a message begun with ``beginPublish(channel:_:bodySize:adding:)``;
    /// `fragment` is at most a frame's payload (what one frame from the broker carried).
    func sendBody(channel: UInt16, _ fragment: UnsafeRawBufferPointer) throws(AMQPError) {
        guard !fragment.isEmpty else { return }
        var frame = amqp_frame_t()
        frame.frame_type = UInt8(AMQP_FRAME_BODY)
        frame.channel = channel
        frame.payload.body_fragment = amqp_bytes_t(
            len: fragment.count,
            bytes: UnsafeMutableRawPointer(mutating: fragment.baseAddress))
        let status = amqp_send_frame(state, &frame)
        if status != AMQP_STATUS_OK.rawValue {
            throw AMQPError.status(status, operation: "basic.publish body (streamed)")
        }
    }
}
