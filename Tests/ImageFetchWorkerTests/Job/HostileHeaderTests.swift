import Testing

@testable import ImageFetchWorker

/// Every header the worker reads from a delivery, set to every extreme a producer, a shovel or a
/// hostile peer can send: the integer extremes of each width, negatives, every AMQP type, long
/// strings and nested tables. Each route of the outcome and redrive policies must end in messages
/// (a result, a copy or a dead copy) without trapping, and the counters it writes must stay sane.
@Suite struct HostileHeaderTests {
    static let names = [
        "x-attempt", "x-first-seen", "x-deferrals", "x-deferred-seconds", "x-redrive-count",
        "traceparent", "tracestate", "x-death",
    ]

    static let values: [AMQPFieldValue] = {
        let long = String(repeating: "9", count: 1 << 20)
        var values: [AMQPFieldValue] = [
            .bool(true), .int8(.min), .int8(.max), .uint8(.max), .int16(.min), .int16(.max), .uint16(.max),
            .int32(.min), .int32(.max), .uint32(.max), .int(.min), .int(.max), .int(-1), .int(0),
            .uint64(.max), .uint64(UInt64(Int64.max)), .float(.infinity), .float(.nan), .double(-.infinity),
            .double(.greatestFiniteMagnitude), .decimal(scale: 255, value: .max),
            .string("9223372036854775807"), .string("-9223372036854775808"), .string("99999999999999999999"),
            .string("-1"), .string(""), .string(long), .string("00-" + long), .longString([0xFF, 0xFE, 0x00]),
            .bytes(Array(repeating: 0, count: 1 << 20)), .timestamp(.max), .timestamp(0), .void,
            .array([]), .array([.void]), .array([.table([:])]),
            .array([.table(["time": .int(.min), "count": .int(.max)])]),
            .array([.table(["time": .uint64(.max)])]), .array([.table(["time": .string(long)])]),
        ]
        var nested: AMQPFieldValue = .table(["x": .int(.max)])
        for _ in 0..<64 { nested = .table(["x": nested, "a": .array([nested])]) }
        values.append(nested)
        return values
    }()

    static func policy() -> OutcomePolicy {
        var configuration = WorkerConfiguration()
        configuration.retry.maxAttempts = 3
        configuration.scheduler.deferDelays = [1, 5, 60]
        configuration.scheduler.deferBudget = 3600
        return OutcomePolicy(configuration)
    }

    static func delivery(_ name: String, _ value: AMQPFieldValue) -> Delivery {
        var properties = AMQPProperties()
        properties.headers = [name: value]
        return Delivery(
            tag: 1, epoch: 1, redelivered: true, properties: properties,
            body: Array(#"{"id":"h1","url":"https://a.example/x.png"}"#.utf8))
    }

    @Test(arguments: Self.names)
    func everyRouteSurvivesEveryValue(of name: String) throws {
        let policy = Self.policy()
        for value in Self.values {
            let delivery = Self.delivery(name, value)
            let job = try Job.decode(delivery).get()
            #expect(job.attempt >= 1 && job.attempt <= JobHeaders.maxCount)

            var ok = JobResult(job: job, status: .ok, durationMs: 1, worker: "w", finishedAt: 0)
            #expect(policy.finished(delivery, job: job, result: ok).messages.count == 1)
            ok.status = .failed
            for error in [JobError(.timeout, "slow"), JobError(.httpError, "404"), policy.budgetSpent] {
                var failed = ok
                failed.error = error
                let decision = policy.finished(delivery, job: job, result: failed, retryAfterSeconds: .infinity)
                #expect(!decision.messages.isEmpty)
                for message in decision.messages where message.routingKey.contains(".retry.") {
                    #expect(message.properties.headers["x-attempt"] == .int(Int64(job.attempt + 1)))
                    #expect(message.properties.headers["x-death"].map(JobHeaders.isWellFormedDeath) ?? true)
                }
            }
            #expect(policy.poison(delivery, job: job).messages.count == 1)
            #expect(policy.invalid(delivery, error: JobError(.invalidJob, "no")).messages.count == 1)

            for atLeast in [nil, 0, 30, Double.infinity, Double.nan, -1] as [Double?] {
                guard let decision = policy.deferred(delivery, job: job, atLeastSeconds: atLeast) else { continue }
                let headers = decision.messages[0].properties.headers
                #expect(headers["x-death"].map(JobHeaders.isWellFormedDeath) ?? true)
                let count = try #require(headers[OutcomePolicy.deferralsHeader]?.intValue)
                let spent = try #require(headers[OutcomePolicy.deferredSecondsHeader]?.intValue)
                #expect(count >= 1 && count <= Int64(JobHeaders.maxCount) + 1)
                #expect(spent >= 0 && spent <= Int64(policy.deferral.budgetSeconds))
            }

            let redriven = RedrivePolicy.redriven(delivery.properties, now: 1_800_000_000)
            let redrives = try #require(redriven.headers["x-redrive-count"]?.intValue)
            #expect(redrives >= 1 && redrives <= Int64(JobHeaders.maxCount) + 1)
            _ = RedrivePolicy(code: "timeout", olderThan: 60).selects(delivery.properties, now: 1_800_000_000)
            _ = RedrivePolicy.age(of: delivery.properties, now: 1_800_000_000)
            _ = TraceHeaders.extract(delivery.properties.headers)
        }
    }

    /// The reproduction of issue 33: a deferred job whose `x-deferrals` is 2^63 − 1 (as a long or
    /// as a string) trapped in `count + 1`, and one whose `x-deferred-seconds` is as large trapped
    /// in `Int64(spent)`. Each is a deferral or the end of the budget now.
    @Test(arguments: [AMQPFieldValue.int(.max), .string("9223372036854775807")])
    func aHugeDeferralCountIsCountedNotTrappedOn(_ value: AMQPFieldValue) throws {
        let delivery = Self.delivery(OutcomePolicy.deferralsHeader, value)
        let job = try Job.decode(delivery).get()
        let decision = try #require(Self.policy().deferred(delivery, job: job, atLeastSeconds: nil))
        #expect(decision.outcome == .deferred)
    }

    @Test(arguments: [AMQPFieldValue.int(.max), .string("9223372036854775807"), .int(.min), .double(1e300)])
    func aHugeOrNegativeDeferredTimeSpendsTheBudgetOrCountsAsNone(_ value: AMQPFieldValue) throws {
        let delivery = Self.delivery(OutcomePolicy.deferredSecondsHeader, value)
        let job = try Job.decode(delivery).get()
        let decision = Self.policy().deferred(delivery, job: job, atLeastSeconds: nil)
        if let huge = value.intValue, huge > 0 {
            #expect(decision == nil, "a job that says it was deferred for ages has spent its budget")
        } else {
            // Negative or not an integer: counted as no deferral so far, never as extra budget.
            let spent = decision?.messages[0].properties.headers[OutcomePolicy.deferredSecondsHeader]
            #expect(spent == .int(1))
        }
    }

    @Test func aHugeRedriveCountIsKeptAtTheCeiling() {
        var properties = AMQPProperties()
        properties.headers["x-redrive-count"] = .int(.max)
        let redriven = RedrivePolicy.redriven(properties, now: 0)
        #expect(redriven.headers["x-redrive-count"] == .int(Int64(JobHeaders.maxCount) + 1))
    }

    /// A copy that a delay queue dead-letters back keeps an `x-death` the broker can update, and
    /// loses one the broker's dead-lettering would crash on (issue 33: with an `x-death` of
    /// `[{...}, 2^63 - 1]`, RabbitMQ 3.10's retry queue crashed on every copy and stopped).
    @Test func aCopyThroughADelayQueueKeepsOnlyAnXDeathTheBrokerCanUpdate() throws {
        let written: AMQPFieldValue = .array([
            .table([
                "queue": .string("jobs"), "reason": .string("expired"), "count": .int(2),
                "time": .timestamp(1_800_000_000), "exchange": .string(""),
            ]),
            .table(["queue": .string("jobs.retry.5s"), "reason": .string("expired"), "count": .int(1)]),
        ])
        #expect(JobHeaders.isWellFormedDeath(written))
        for malformed: AMQPFieldValue in [
            .array([.table([:]), .int(.max)]), .string("x"), .table([:]),
            .array([.table(["count": .string("1")])]), .array([.table(["count": .uint64(.max)])]),
            .array([
                .table(["queue": .string("q"), "reason": .string("r")]),
                .table(["queue": .string("q"), "reason": .string("r")]),
            ]),
        ] {
            #expect(!JobHeaders.isWellFormedDeath(malformed), "\(malformed)")
            let delivery = Self.delivery("x-death", malformed)
            let job = try Job.decode(delivery).get()
            var result = JobResult(job: job, status: .failed, durationMs: 1, worker: "w", finishedAt: 0)
            result.error = JobError(.timeout, "slow")
            let retry = Self.policy().finished(delivery, job: job, result: result)
            #expect(retry.outcome == .retry)
            #expect(retry.messages[0].properties.headers["x-death"] == nil)
            let deferral = try #require(Self.policy().deferred(delivery, job: job, atLeastSeconds: nil))
            #expect(deferral.messages[0].properties.headers["x-death"] == nil)
        }
        let kept = Self.delivery("x-death", written)
        let job = try Job.decode(kept).get()
        let deferral = try #require(Self.policy().deferred(kept, job: job, atLeastSeconds: nil))
        #expect(deferral.messages[0].properties.headers["x-death"] == written)
    }
}
