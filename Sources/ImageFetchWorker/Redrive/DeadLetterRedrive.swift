import Foundation

/// Moves dead letters from `queue.dead` back to `queue.jobs` (the `redrive` command).
///
/// One pass over the messages the dead-letter queue holds at the start, fetched one by one with
/// `basic.get`. A message the ``RedrivePolicy`` selects is published to the jobs queue and acked
/// in the same AMQP transaction; `tx.commit-ok` comes once the broker has stored the copies. So
/// every message ends in exactly one of the two queues whatever happens: if the process dies
/// before a commit, the broker drops that batch's copies and requeues its originals. (Publishing
/// with a confirm and then acking would leave a window, between the confirm and the ack, in which
/// a kill leaves the message in both queues.) Messages not selected stay unacknowledged until the
/// end, so the pass never sees them twice; closing the channel puts them back in their places.
package final class DeadLetterRedrive {
    /// One dead letter the pass looked at.
    package struct Entry: Sendable {
        /// The job id from the body, or the `message_id` property.
        package var id: String?
        package var code: String?
        package var attempt: Int64?
        package var moved: Bool
        /// Why it stayed in the dead-letter queue although selected: its copy cannot be written.
        package var kept: String? = nil
    }

    /// What a pass did.
    package struct Summary: Sendable, Equatable {
        /// Dead letters looked at.
        package var scanned = 0
        /// Moved to the jobs queue (with `dryRun`: selected, and left in place).
        package var moved = 0
        /// Selected, but left in place: the copy could not be written.
        package var kept = 0
    }

    private let configuration: WorkerConfiguration
    private let policy: RedrivePolicy
    private let dryRun: Bool
    private let batchSize: Int

    /// - Parameters:
    ///   - dryRun: Select and report, but move nothing.
    ///   - batchSize: Messages per transaction; a larger batch commits less often.
    package init(configuration: WorkerConfiguration, policy: RedrivePolicy, dryRun: Bool, batchSize: Int = 50) {
        self.configuration = configuration
        self.policy = policy
        self.dryRun = dryRun
        self.batchSize = max(1, batchSize)
    }

    /// Runs one pass; `report` is called for each selected message once it has moved (for a dry
    /// run: once selected), in order.
    package func run(now: Date = Date(), report: (Entry) -> Void) throws(AMQPError) -> Summary {
        let connection = try connect()
        defer { connection.close() }
        let channel: UInt16 = 1
        try connection.openChannel(channel)
        let queues = configuration.queue
        let count = try connection.declareQueue(channel: channel, name: queues.dead, passive: true).messages
        // Without it the copies would be dropped as unroutable, and the originals acked.
        try connection.declareQueue(channel: channel, name: queues.jobs, passive: true)
        if !dryRun { try connection.selectTransactions(channel: channel) }

        var summary = Summary()
        var pending: [Entry] = []
        let seconds = now.timeIntervalSince1970
        while summary.scanned < count, policy.limit.map({ summary.moved < $0 }) ?? true {
            guard let message = try connection.get(channel: channel, queue: queues.dead) else { break }
            summary.scanned += 1
            guard policy.selects(message.properties, now: seconds) else { continue }
            var entry = Self.entry(message)
            if message.properties.readLossily {
                // A property or header name that is not UTF-8, a header that nests too deep or a
                // name given twice was read other than it came: a copy would change the letter.
                // It stays, unacked.
                summary.kept += 1
                entry.moved = false
                entry.kept =
                    "its properties or headers cannot be read as they came: not UTF-8, nested too deep, or a name given twice"
                report(entry)
                continue
            }
            if dryRun {
                summary.moved += 1
                report(entry)
                continue
            }
            do throws(AMQPError) {
                try connection.publish(
                    channel: channel,
                    OutboundMessage(
                        routingKey: queues.jobs, properties: RedrivePolicy.redriven(message.properties, now: seconds),
                        body: message.body))
            } catch  where error.code == .unencodable {
                // Refused before anything was sent (a property or header past what a frame or a
                // short string holds), so the channel is whole: the message stays unacked, goes
                // back to the dead-letter queue at the end, and the pass goes on. Stopping here
                // would stop every later pass at it too.
                summary.kept += 1
                entry.moved = false
                entry.kept = error.message
                report(entry)
                continue
            }
            summary.moved += 1
            try connection.ack(channel: channel, tag: message.tag)
            pending.append(entry)
            if pending.count >= batchSize {
                try connection.commit(channel: channel)
                pending.forEach(report)
                pending.removeAll()
            }
        }
        if !pending.isEmpty {
            try connection.commit(channel: channel)
            pending.forEach(report)
        }
        // Closing the channel returns the messages left unacknowledged to the dead-letter queue.
        connection.closeChannel(channel)
        return summary
    }

    /// The first broker of `amqp.url` that answers.
    private func connect() throws(AMQPError) -> AMQPConnection {
        let amqp = configuration.amqp
        var lastError = AMQPError(.socket, operation: "connect", message: "no broker URL")
        for url in amqp.urls {
            do throws(AMQPError) {
                let connection = try AMQPConnection()
                try connection.open(
                    url: url,
                    tls: .init(
                        caFile: amqp.tls.caFile, certFile: amqp.tls.certFile, keyFile: amqp.tls.keyFile,
                        verify: amqp.tls.verify),
                    heartbeat: amqp.heartbeat, connectionName: "image-fetch-worker redrive")
                return connection
            } catch {
                lastError = error
            }
        }
        throw lastError
    }

    private static func entry(_ message: AMQPConnection.Fetched) -> Entry {
        let object = try? JSONSerialization.jsonObject(with: Data(message.body)) as? [String: Any]
        let id = (object?["id"] as? String) ?? (object?["id"] as? NSNumber)?.stringValue ?? message.properties.messageID
        return Entry(
            id: id, code: message.properties.headers[JobHeaders.errorCode]?.stringValue,
            attempt: message.properties.headers[JobHeaders.attempt]?.intValue, moved: true)
    }
}

extension DeadLetterRedrive.Entry {
    /// The entry as one line of the command's report: `<id> code=<code> attempt=<n>`.
    ///
    /// The id and code come from the dead letter. Characters that could end the line, forge
    /// another or reorder it on a terminal (controls, line separators, bidi and other format
    /// characters) are written as `\u{…}`, and a long field is cut.
    package var reportLine: String {
        let id = id.map(Self.printable) ?? "(no id)"
        let code = code.map(Self.printable) ?? "-"
        return "\(id) code=\(code) attempt=\(attempt.map(String.init) ?? "-")"
    }

    static func printable(_ field: String) -> String {
        var written = ""
        for (index, scalar) in field.unicodeScalars.enumerated() {
            if index == 120 {
                written += "…"
                break
            }
            switch scalar.properties.generalCategory {
            case .control, .format, .lineSeparator, .paragraphSeparator, .surrogate, .privateUse, .unassigned:
                let hex = String(scalar.value, radix: 16, uppercase: true)
                written += "\\u{" + String(repeating: "0", count: max(0, 2 - hex.count)) + hex + "}"
            default:
                written.unicodeScalars.append(scalar)
            }
        }
        return written
    }
}
