import Testing

@testable import ImageFetchWorker

@Suite("RedrivePolicy")
struct RedrivePolicyTests {
    static let now = 1_800_000_000.0

    static func deadLetter(code: String?, timestamp: Double?) -> AMQPProperties {
        var properties = AMQPProperties()
        properties.timestamp = timestamp.map { UInt64($0) }
        properties.headers["x-error-code"] = code.map(AMQPFieldValue.string)
        return properties
    }

    @Test func filters() {
        let old = Self.deadLetter(code: "timeout", timestamp: Self.now - 7200)
        let recent = Self.deadLetter(code: "timeout", timestamp: Self.now - 60)
        let dns = Self.deadLetter(code: "dns_failure", timestamp: Self.now - 7200)
        let undated = Self.deadLetter(code: "timeout", timestamp: nil)
        let any = RedrivePolicy()
        #expect([old, recent, dns, undated].allSatisfy { any.selects($0, now: Self.now) })
        let timeouts = RedrivePolicy(code: "timeout")
        #expect([old, recent, dns, undated].map { timeouts.selects($0, now: Self.now) } == [true, true, false, true])
        let olderThanAnHour = RedrivePolicy(olderThan: 3600)
        #expect(
            [old, recent, dns, undated].map { olderThanAnHour.selects($0, now: Self.now) } == [
                true, false, true, false,
            ])
        let both = RedrivePolicy(code: "timeout", olderThan: 3600)
        #expect([old, recent, dns, undated].map { both.selects($0, now: Self.now) } == [true, false, false, false])
    }

    /// RabbitMQ writes `x-death`'s `time` as an AMQP timestamp (`T`); an integer is read too. The
    /// timestamp was not read, so `--older-than` never chose a dead letter without a `timestamp`
    /// property.
    @Test(arguments: [AMQPFieldValue.timestamp(UInt64(now - 100)), .int(Int64(now - 100))])
    func ageFallsBackToTheBrokersDeadLetterTime(_ time: AMQPFieldValue) {
        var properties = AMQPProperties()
        properties.headers["x-death"] = .array([.table(["time": time, "reason": .string("rejected")])])
        #expect(RedrivePolicy.age(of: properties, now: Self.now) == 100)
        #expect(RedrivePolicy.age(of: AMQPProperties(), now: Self.now) == nil)
    }

    @Test func theCopyStartsItsAttemptsAgainAndRecordsTheRedrive() {
        var properties = Self.deadLetter(code: "timeout", timestamp: Self.now - 10)
        properties.correlationID = "req-7"
        properties.replyTo = "replies"
        properties.headers["x-attempt"] = .int(4)
        properties.headers["x-first-seen"] = .string("2027-01-15T08:00:00.000Z")
        properties.headers["x-error-message"] = .string("timed out")
        properties.headers["x-death"] = .array([])
        properties.headers["x-deferrals"] = .int(3)
        properties.headers["x-deferred-seconds"] = .int(8)
        properties.headers["tenant"] = .string("acme")
        let copy = RedrivePolicy.redriven(properties, now: Self.now)
        #expect(copy.persistent)
        #expect(copy.correlationID == "req-7")
        #expect(copy.replyTo == "replies")
        #expect(copy.timestamp == properties.timestamp)
        #expect(
            copy.headers == [
                "tenant": .string("acme"), "x-redrive-count": .int(1), "x-redriven-code": .string("timeout"),
                "x-redriven-at": .string(RFC3339.format(Self.now)),
            ])
        let again = RedrivePolicy.redriven(copy, now: Self.now)
        #expect(again.headers["x-redrive-count"] == .int(2))
        #expect(again.headers["x-redriven-code"] == nil)
    }

    /// The id and code come from the dead letter. A line break, an escape sequence or a bidi
    /// override in them must not end the report's line, forge another one, or reorder it.
    @Test func theReportLineKeepsHostileIDsOnOneVisibleLine() {
        func line(id: String?, code: String? = "timeout") -> String {
            DeadLetterRedrive.Entry(id: id, code: code, attempt: 2, moved: true).reportLine
        }
        #expect(line(id: "job-1") == "job-1 code=timeout attempt=2")
        #expect(line(id: nil, code: nil) == "(no id) code=- attempt=2")
        #expect(line(id: "ok id with spaces ü") == "ok id with spaces ü code=timeout attempt=2")
        let forged = line(id: "a\nmoved b code=ok attempt=1\r", code: "x\u{1B}[2K\u{202E}")
        #expect(forged == #"a\u{0A}moved b code=ok attempt=1\u{0D} code=x\u{1B}[2K\u{202E} attempt=2"#)
        for hostile: Unicode.Scalar in ["\u{85}", "\u{2028}", "\u{2029}", "\u{7F}", "\u{0}", "\u{2066}", "\u{9}"] {
            let written = line(id: "a\(hostile)b")
            #expect(!written.unicodeScalars.contains(hostile), "\(written.debugDescription)")
            #expect(written.hasPrefix("a\\u{"))
        }
        let long = line(id: String(repeating: "x", count: 10_000))
        #expect(long.count < 300 && long.contains("…"))
    }
}
