import Foundation

/// Ready messages and consumers per queue, by passive declares, and optionally unacked messages and
/// rates from the RabbitMQ management API (the `depth` command).
package enum QueueDepth {
    /// One queue's depth; nil counts when the queue does not exist (or, for the management fields,
    /// when the management API was not asked or reports no such value).
    package struct Row: Sendable, Equatable {
        /// The queue name.
        package var queue: String
        /// Ready messages, from a passive declare.
        package var ready: Int?
        /// Consumers, from a passive declare.
        package var consumers: Int?
        /// Delivered but not yet acknowledged messages (management API).
        package var unacked: Int?
        /// Messages published into the queue per second (management API, `publish_details.rate`).
        package var publishRate: Double?
        /// Messages delivered or fetched per second (management API, `deliver_get_details.rate`).
        package var deliverRate: Double?
        /// Acknowledgements per second (management API, `ack_details.rate`).
        package var ackRate: Double?

        /// Creates a row.
        package init(
            queue: String, ready: Int?, consumers: Int?, unacked: Int? = nil, publishRate: Double? = nil,
            deliverRate: Double? = nil, ackRate: Double? = nil
        ) {
            self.queue = queue
            self.ready = ready
            self.consumers = consumers
            self.unacked = unacked
            self.publishRate = publishRate
            self.deliverRate = deliverRate
            self.ackRate = ackRate
        }

        /// Adds what the management API reported for this queue.
        mutating func merge(_ stats: ManagementAPI.QueueStats) {
            unacked = stats.unacked
            publishRate = stats.publishRate
            deliverRate = stats.deliverRate
            ackRate = stats.ackRate
        }
    }

    /// The exit statuses of the `depth` command.
    package enum ExitStatus {
        /// Every queue was read and none holds more than `--max-ready` ready messages.
        package static let ok: Int32 = 0
        /// A queue holds more than `--max-ready` ready messages.
        package static let overMaxReady: Int32 = 1
        /// The depth could not be read: the broker or the management API did not answer, refused
        /// the credentials, or answered with something unexpected.
        package static let cannotRead: Int32 = 2
    }

    /// The queues of the topology: jobs, its retry queues, dead and results.
    package static func queueNames(_ configuration: WorkerConfiguration) -> [String] {
        let queues = configuration.queue
        return [queues.jobs] + Topology.delayQueues(configuration).map(\.name) + [queues.dead, queues.results]
    }

    /// Samples every queue on a short-lived connection.
    package static func sample(_ configuration: WorkerConfiguration) throws(AMQPError) -> [Row] {
        let connection = try AMQPConnection()
        let amqp = configuration.amqp
        try connection.open(
            url: amqp.urls[0],
            tls: .init(
                caFile: amqp.tls.caFile, certFile: amqp.tls.certFile, keyFile: amqp.tls.keyFile, verify: amqp.tls.verify
            ),
            heartbeat: 0, connectionName: "image-fetch-worker depth")
        defer { connection.close() }
        var rows: [Row] = []
        var channel: UInt16 = 1
        for name in queueNames(configuration) {
            // A passive declare of a missing queue closes its channel: one channel per queue.
            try connection.openChannel(channel)
            do throws(AMQPError) {
                let depth = try connection.declareQueue(channel: channel, name: name, passive: true)
                rows.append(Row(queue: name, ready: depth.messages, consumers: depth.consumers))
                connection.closeChannel(channel)
            } catch  where error.replyCode == 404 {
                rows.append(Row(queue: name, ready: nil, consumers: nil))
            }
            channel += 1
        }
        return rows
    }

    /// Adds unacked messages and rates from the management API to `rows`, in the vhost of the
    /// first `amqp.url`.
    package static func addManagementStats(
        _ rows: [Row], api: ManagementAPI,
        configuration: WorkerConfiguration
    ) throws(ManagementAPI.Failure) -> [Row] {
        let vhost = configuration.amqp.urls[0].vhost
        var out = rows
        // A queue the broker does not have has no statistics to ask for. One it has must be known
        // to the API: a 404 for it is a wrong path prefix or another cluster, whose silence would
        // print a table without statistics and exit 0.
        for index in out.indices where out[index].ready != nil {
            let name = out[index].queue
            guard let stats = try api.queue(vhost: vhost, name: name) else {
                throw ManagementAPI.Failure(
                    description:
                        "\(api.queueURL(vhost: vhost, name: name)) answered 404 for a queue the broker has: check the path and the host"
                )
            }
            out[index].merge(stats)
        }
        return out
    }

    /// Whether any queue holds more than `maxReady` ready messages.
    package static func exceeds(_ rows: [Row], maxReady: Int) -> Bool {
        rows.contains { ($0.ready ?? 0) > maxReady }
    }

    /// A JSON array with one object per queue: `queue`, `ready`, `consumers`, and with the
    /// management API also `unacked`, `publish_rate`, `deliver_rate`, `ack_rate` (per second).
    /// Missing values are `null`.
    package static func json(_ rows: [Row], management: Bool) -> String {
        var json = JSONWriter(capacity: 128 * rows.count)
        json.beginArray()
        for row in rows {
            json.beginObject()
            json.field("queue", row.queue)
            optional(&json, "ready", row.ready)
            optional(&json, "consumers", row.consumers)
            if management {
                optional(&json, "unacked", row.unacked)
                optional(&json, "publish_rate", row.publishRate)
                optional(&json, "deliver_rate", row.deliverRate)
                optional(&json, "ack_rate", row.ackRate)
            }
            json.endObject()
        }
        json.endArray()
        return String(decoding: json.takeBytes(), as: UTF8.self)
    }

    /// A table for people; `-` marks a missing value.
    package static func table(_ rows: [Row], management: Bool) -> String {
        var header = ["QUEUE", "READY", "CONSUMERS"]
        if management { header += ["UNACKED", "PUBLISH/S", "DELIVER/S", "ACK/S"] }
        var lines = [header]
        for row in rows {
            var line = [row.queue, text(row.ready), text(row.consumers)]
            if management {
                line += [text(row.unacked), text(row.publishRate), text(row.deliverRate), text(row.ackRate)]
            }
            lines.append(line)
        }
        let widths = header.indices.map { column in lines.map { $0[column].count }.max() ?? 0 }
        return lines.map { line in
            line.enumerated().map { column, cell in
                column == line.count - 1 ? cell : cell.padding(toLength: widths[column], withPad: " ", startingAt: 0)
            }.joined(separator: "  ")
        }.joined(separator: "\n")
    }

    private static func text(_ value: Int?) -> String { value.map(String.init) ?? "-" }
    private static func text(_ value: Double?) -> String { value.map { String(format: "%.1f", $0) } ?? "-" }

    private static func optional(_ json: inout JSONWriter, _ name: StaticString, _ value: Int?) {
        if let value { json.field(name, value) } else { json.null(name) }
    }

    private static func optional(_ json: inout JSONWriter, _ name: StaticString, _ value: Double?) {
        if let value { json.field(name, decimal: value) } else { json.null(name) }
    }
}
