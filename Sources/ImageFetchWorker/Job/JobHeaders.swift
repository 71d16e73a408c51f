/// The headers the worker writes on its own copies of a job and reads back, and how it reads them.
///
/// A producer, a shovel or a hostile peer can set any of them to any AMQP value. So every read is
/// total: a value of another type counts as absent, and counts and seconds are clamped to a range
/// in which the worker's own arithmetic on them (`+ 1`, `+ delay`) cannot overflow.
package enum JobHeaders {
    /// 1 on the first delivery, counting retries.
    package static let attempt = "x-attempt"
    /// When the job was first seen (RFC 3339), kept across retries and deferrals.
    package static let firstSeen = "x-first-seen"
    /// How often the scheduler deferred the job, and for how many seconds in all.
    package static let deferrals = "x-deferrals"
    package static let deferredSeconds = "x-deferred-seconds"
    /// How often `redrive` moved the job back from the dead-letter queue.
    package static let redriveCount = "x-redrive-count"
    /// Why the job was dead-lettered, on the worker's dead copies.
    package static let errorCode = "x-error-code"
    package static let errorMessage = "x-error-message"

    /// The largest count or number of seconds read from a header. Far above any honest value (a
    /// million attempts, or 31 years of deferral), and far below the overflow of `Int64`.
    package static let maxCount = 1_000_000_000

    /// A count (`x-attempt`, `x-deferrals`, `x-redrive-count`), clamped to `0...maxCount`; nil
    /// when the header is absent or holds no integer.
    package static func count(_ value: AMQPFieldValue?) -> Int? {
        guard let number = value?.intValue else { return nil }
        return Int(min(max(number, 0), Int64(maxCount)))
    }

    /// `x-first-seen`, when it is a plausible timestamp; anything longer than an RFC 3339 time with
    /// nanoseconds and an offset is dropped, so that copies do not carry it on.
    package static func firstSeen(_ value: AMQPFieldValue?) -> String? {
        guard let text = value?.stringValue, !text.isEmpty, text.utf8.count <= 40 else { return nil }
        return text
    }
}

extension JobHeaders {
    /// The broker's own dead-letter history. Retry and deferral copies pass through a delay queue
    /// whose TTL dead-letters them back, and RabbitMQ then updates this header in place; an
    /// `x-death` that is not as the broker writes it (an array of tables, each `count` an integer,
    /// each queue and reason once) makes that queue process crash on every such copy, which stops
    /// the whole delay queue (seen with RabbitMQ 3.10: `function_clause` in `rabbit_dead_letter`).
    package static let death = "x-death"

    /// Whether `value` is an `x-death` the broker can update.
    package static func isWellFormedDeath(_ value: AMQPFieldValue) -> Bool {
        guard case .array(let entries) = value else { return false }
        var seen: Set<[String]> = []
        for entry in entries {
            guard case .table(let fields) = entry else { return false }
            if let count = fields["count"], count.intValue == nil || count.stringValue != nil { return false }
            // The broker matches an entry by queue and reason, and expects at most one match.
            let key = [fields["queue"]?.stringValue ?? "", fields["reason"]?.stringValue ?? ""]
            guard seen.insert(key).inserted else { return false }
        }
        return true
    }

    /// Drops an `x-death` the broker could not update from the headers of a copy that will be
    /// dead-lettered by a delay queue. A well-formed one is kept as it is.
    package static func dropMalformedDeath(from headers: inout [String: AMQPFieldValue]) {
        if let value = headers[death], !isWellFormedDeath(value) { headers[death] = nil }
    }
}
