/// Which dead letters a redrive moves back to the jobs queue, and how each copy is changed.
///
/// Pure: no I/O, tested directly. The runner (``DeadLetterRedrive``) asks it about each message.
package struct RedrivePolicy: Sendable, Equatable {
    /// Only dead letters whose `x-error-code` header is this code; nil for any.
    package var code: String?
    /// Only jobs older than this many seconds (see ``age(of:now:)``); nil for any age.
    package var olderThan: Double?
    /// Move at most this many; nil for all that match.
    package var limit: Int?

    package init(code: String? = nil, olderThan: Double? = nil, limit: Int? = nil) {
        self.code = code
        self.olderThan = olderThan
        self.limit = limit
    }

    /// Headers that describe the failed attempts, dropped from the copy: the worker counts a
    /// redriven job's attempts afresh, and the broker writes its own `x-death` again if it
    /// dead-letters the copy.
    static let droppedHeaders: Set<String> = [
        JobHeaders.attempt, JobHeaders.firstSeen, JobHeaders.errorCode, JobHeaders.errorMessage, "x-publish-seq",
        "x-delivery-count", JobHeaders.death, "x-first-death-exchange", "x-first-death-queue", "x-first-death-reason",
        "x-last-death-exchange", "x-last-death-queue", "x-last-death-reason",
        // The deferral budget of origin-aware scheduling starts again too.
        OutcomePolicy.deferralsHeader, OutcomePolicy.deferredSecondsHeader,
    ]

    /// Whether the dead letter with these properties matches the filters at `now` (seconds since 1970).
    package func selects(_ properties: AMQPProperties, now: Double) -> Bool {
        if let code, properties.headers[JobHeaders.errorCode]?.stringValue != code {
            return false
        }
        if let olderThan {
            // A message whose age is unknown is not known to be older: it stays.
            guard let age = Self.age(of: properties, now: now), age > olderThan else { return false }
        }
        return true
    }

    /// The job's age in seconds: since the `timestamp` property (set by `publish` and most
    /// producers), else since the broker first dead-lettered it (`x-death[0].time`); nil if neither.
    package static func age(of properties: AMQPProperties, now: Double) -> Double? {
        if let timestamp = properties.timestamp {
            return now - Double(timestamp)
        }
        guard case .array(let deaths)? = properties.headers["x-death"], case .table(let first)? = deaths.first else {
            return nil
        }
        // RabbitMQ writes it as an AMQP timestamp; other writers may use an integer.
        switch first["time"] {
        case .timestamp(let seconds)?: return now - Double(seconds)
        case let time?: return time.intValue.map { now - Double($0) }
        case nil: return nil
        }
    }

    /// The properties of the copy published to the jobs queue: the attempt count reset, the
    /// failure headers dropped, and the redrive recorded in `x-redrive-count` (1 the first time),
    /// `x-redriven-at` (RFC 3339) and `x-redriven-code` (the code it was dead-lettered with).
    package static func redriven(_ properties: AMQPProperties, now: Double) -> AMQPProperties {
        var copy = properties
        copy.persistent = true
        let code = properties.headers[JobHeaders.errorCode]?.stringValue
        for name in droppedHeaders {
            copy.headers[name] = nil
        }
        let count = JobHeaders.count(properties.headers[JobHeaders.redriveCount]) ?? 0
        copy.headers[JobHeaders.redriveCount] = .int(Int64(count) + 1)
        copy.headers["x-redriven-at"] = .string(RFC3339.format(now))
        copy.headers["x-redriven-code"] = code.map(AMQPFieldValue.string)
        return copy
    }
}
