import CRabbitMQ
import CShims

/// The synchronous calls the redrive needs: `basic.get` and transactions.
extension AMQPConnection {
    /// A message fetched with `basic.get`, not yet acknowledged.
    package struct Fetched: Sendable {
        package var tag: UInt64
        package var redelivered: Bool
        package var properties: AMQPProperties
        package var body: [UInt8]
    }

    /// Fetches one message from `queue` with manual ack (`basic.get`); nil when the queue is empty.
    package func get(channel: UInt16, queue: String) throws(AMQPError) -> Fetched? {
        let arena = AMQPArena()
        let reply = amqp_basic_get(state, channel, arena.bytes(queue), 0)
        if let error = AMQPError.reply(reply, operation: "basic.get \(queue)") { throw error }
        guard reply.reply.id == AMQP_BASIC_GET_OK_METHOD,
            let ok = reply.reply.decoded?.assumingMemoryBound(to: amqp_basic_get_ok_t.self)
        else { return nil }
        let tag = ok.pointee.delivery_tag
        let redelivered = ok.pointee.redelivered != 0
        var message = amqp_message_t()
        let read = amqp_read_message(state, channel, &message, 0)
        if let error = AMQPError.reply(read, operation: "basic.get \(queue): content") { throw error }
        defer {
            amqp_destroy_message(&message)
            amqp_maybe_release_buffers(state)
        }
        return Fetched(
            tag: tag, redelivered: redelivered, properties: AMQPProperties(decoding: message.properties),
            body: message.body.arrayValue)
    }

    /// Puts the channel in transaction mode (`tx.select`): its publishes and acks take effect
    /// together at ``commit(channel:)``, or not at all if the connection ends first.
    package func selectTransactions(channel: UInt16) throws(AMQPError) {
        _ = amqp_tx_select(state, channel)
        if let error = AMQPError.reply(amqp_get_rpc_reply(state), operation: "tx.select") { throw error }
    }

    /// Commits the channel's transaction and waits for `tx.commit-ok`, which the broker sends once
    /// the persistent messages published in it are stored.
    package func commit(channel: UInt16) throws(AMQPError) {
        _ = amqp_tx_commit(state, channel)
        if let error = AMQPError.reply(amqp_get_rpc_reply(state), operation: "tx.commit") { throw error }
    }
}
