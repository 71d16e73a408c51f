import Testing

@testable import ImageFetchWorker

@Suite struct OutcomePolicyTests {
    static func policy(maxAttempts: Int = 3, delays: [Int] = [5, 30, 120]) -> OutcomePolicy {
        var configuration = WorkerConfiguration()
        configuration.retry.maxAttempts = maxAttempts
        configuration.retry.delays = delays
        configuration.scheduler.deferDelays = [1, 5]
        configuration.scheduler.deferBudget = 10
        return OutcomePolicy(configuration)
    }

    static func delivery(headers: [String: AMQPFieldValue] = [:]) -> Delivery {
        var properties = AMQPProperties()
        properties.headers = headers
        properties.headers["x-custom"] = .string("kept")
        return Delivery(
            tag: 7, epoch: 1, redelivered: false, properties: properties,
            body: Array(#"{"id":"j1","url":"https://a.example/x.png"}"#.utf8))
    }

    static func result(_ job: Job, error: JobError?) -> JobResult {
        var result = JobResult(
            job: job, status: error == nil ? .ok : .failed, durationMs: 1, worker: "w", finishedAt: 0)
        result.error = error
        return result
    }

    @Test func okPublishesTheResultOnly() {
        let job = Job(id: "j1", url: "https://a.example/x.png", correlationID: "c1")
        let decision = Self.policy().finished(Self.delivery(), job: job, result: Self.result(job, error: nil))
        #expect(decision.outcome == .ok)
        #expect(decision.messages.map(\.routingKey) == ["image-fetch.results"])
        #expect(decision.messages[0].properties.correlationID == "c1")
        #expect(decision.messages[0].properties.persistent)
    }

    /// correlation_id is a short string (255 bytes at most): a longer job id cannot be one, and a
    /// result carrying it could not be encoded at all (the body still has the id).
    @Test func anIDOverAShortStringIsNoCorrelationID() {
        let long = String(repeating: "i", count: 256)
        let job = Job(id: long, url: "https://a.example/x.png")
        let decision = Self.policy().finished(Self.delivery(), job: job, result: Self.result(job, error: nil))
        #expect(decision.messages[0].properties.correlationID == nil)
        let fits = Job(id: String(repeating: "i", count: 255), url: "https://a.example/x.png")
        let kept = Self.policy().finished(Self.delivery(), job: fits, result: Self.result(fits, error: nil))
        #expect(kept.messages[0].properties.correlationID == fits.id)
    }

    @Test func aResultGoesToReplyTo() {
        let job = Job(id: "j1", url: "https://a.example/x.png", replyTo: "mine")
        let decision = Self.policy().finished(Self.delivery(), job: job, result: Self.result(job, error: nil))
        #expect(decision.messages.map(\.routingKey) == ["mine"])
        #expect(decision.messages[0].properties.correlationID == "j1")
    }

    @Test func aRetryableFailureRetriesWithTheAttemptsDelayAndKeepsTheHeaders() {
        let job = Job(id: "j1", url: "https://a.example/x.png", attempt: 2, firstSeen: "2026-11-24T00:00:00Z")
        let decision = Self.policy().finished(
            Self.delivery(), job: job,
            result: Self.result(job, error: JobError(.timeout, "slow")))
        #expect(decision.outcome == .retry)
        #expect(decision.messages.count == 1)
        let copy = decision.messages[0]
        #expect(copy.routingKey == "image-fetch.jobs.retry.30s")
        #expect(copy.properties.headers["x-attempt"] == .int(3))
        #expect(copy.properties.headers["x-first-seen"] == .string("2026-11-24T00:00:00Z"))
        #expect(copy.properties.headers["x-custom"] == .string("kept"))
        #expect(copy.body == Self.delivery().body)
    }

    @Test func theLastDelayRepeats() {
        #expect(Self.policy().retryDelay(attempt: 9, atLeastSeconds: nil) == 120)
        #expect(Self.policy(delays: []).retryDelay(attempt: 1, atLeastSeconds: nil) == 5)
    }

    @Test func retryAfterLengthensTheRetryDelay() {
        let policy = Self.policy()
        #expect(policy.retryDelay(attempt: 1, atLeastSeconds: 3) == 5)
        #expect(policy.retryDelay(attempt: 1, atLeastSeconds: 6) == 30)
        #expect(policy.retryDelay(attempt: 1, atLeastSeconds: 1_000) == 120)
        #expect(policy.retryDelay(attempt: 3, atLeastSeconds: 6) == 120)
    }

    @Test func theLastAttemptPublishesTheResultAndADeadCopy() {
        let job = Job(id: "j1", url: "https://a.example/x.png", attempt: 3)
        let decision = Self.policy().finished(
            Self.delivery(), job: job,
            result: Self.result(job, error: JobError(.connectFailed, "refused")))
        #expect(decision.outcome == .failedFinal(.connectFailed))
        #expect(decision.messages.map(\.routingKey) == ["image-fetch.results", "image-fetch.dead"])
        let dead = decision.messages[1]
        #expect(dead.properties.headers["x-error-code"] == .string("connect_failed"))
        #expect(dead.properties.headers["x-attempt"] == .int(3))
        #expect(dead.properties.headers["x-custom"] == .string("kept"))
    }

    @Test func aFailureNotWorthRetryingPublishesTheResultOnly() {
        let job = Job(id: "j1", url: "https://a.example/x.png")
        let decision = Self.policy().finished(
            Self.delivery(), job: job,
            result: Self.result(job, error: JobError(.notAnImage, "text")))
        #expect(decision.outcome == .failed(.notAnImage))
        #expect(decision.messages.map(\.routingKey) == ["image-fetch.results"])
    }

    @Test func anInvalidJobIsDeadLetteredAndRejectedIfThatFails() {
        let decision = Self.policy().invalid(Self.delivery(), error: JobError(.invalidJob, "no url"))
        #expect(decision.outcome == .deadLettered(.invalidJob))
        #expect(decision.ifUnconfirmed == .reject)
        #expect(decision.messages.map(\.routingKey) == ["image-fetch.dead"])
        #expect(decision.messages[0].properties.headers["x-error-code"] == .string("invalid_job"))
        #expect(decision.messages[0].properties.headers["x-attempt"] == .int(1))
    }

    /// A job can pass its first attempt's checks and fail a later one's (a rolling deploy with a
    /// stricter `fetch.job_headers`): its dead copy says the attempt it ended on, not 1.
    @Test func anInvalidJobsDeadCopyKeepsItsAttempt() {
        let delivery = Self.delivery(headers: ["x-attempt": .int(3)])
        let decision = Self.policy().invalid(delivery, error: JobError(.invalidJob, "header not allowed"))
        #expect(decision.messages[0].properties.headers["x-attempt"] == .int(3))
        let nonsense = Self.delivery(headers: ["x-attempt": .string("three")])
        #expect(
            Self.policy().invalid(nonsense, error: JobError(.invalidJob, "x")).messages[0].properties.headers[
                "x-attempt"] == .int(1))
    }

    /// An `x-deferrals` that is not an integer counts as absent (message-contract.md), also for
    /// the demand count at admission.
    @Test func onlyAnIntegerDeferralCountMeansTheJobCameBack() {
        func comesBack(_ value: AMQPFieldValue?) -> Bool {
            JobRunner<FakeBroker, FakeFetcher>.comesBackFromDeferral(
                Self.delivery(headers: value.map { ["x-deferrals": $0] } ?? [:]))
        }
        #expect(comesBack(.int(2)))
        #expect(!comesBack(.int(0)))
        #expect(!comesBack(nil))
        #expect(!comesBack(.string("abc")))
        #expect(!comesBack(.bool(true)))
    }

    @Test func aPoisonJobIsDeadLettered() {
        let job = Job(id: "j1", url: "https://a.example/x.png", redelivered: true)
        let decision = Self.policy().poison(Self.delivery(), job: job)
        #expect(decision.outcome == .deadLettered(.deliveryLimit))
        #expect(decision.messages[0].properties.headers["x-error-code"] == .string("delivery_limit"))
    }

    @Test func aDeferralUsesNoAttemptAndBacksOff() throws {
        let job = Job(id: "j1", url: "https://a.example/x.png", attempt: 2)
        let policy = Self.policy()
        let first = try #require(
            policy.deferred(Self.delivery(headers: ["x-attempt": .int(2)]), job: job, atLeastSeconds: nil))
        #expect(first.outcome == .deferred)
        let copy = first.messages[0]
        #expect(copy.routingKey == "image-fetch.jobs.defer.1s")
        #expect(copy.properties.headers["x-attempt"] == .int(2))
        #expect(copy.properties.headers["x-deferrals"] == .int(1))
        #expect(copy.properties.headers["x-deferred-seconds"] == .int(1))
        let second = try #require(
            policy.deferred(
                Self.delivery(headers: copy.properties.headers), job: job, atLeastSeconds: nil))
        #expect(second.messages[0].routingKey == "image-fetch.jobs.defer.5s")
        #expect(second.messages[0].properties.headers["x-deferred-seconds"] == .int(6))
        // 6 + 5 > 10: the budget is spent.
        #expect(
            policy.deferred(
                Self.delivery(headers: second.messages[0].properties.headers), job: job, atLeastSeconds: nil) == nil)
    }

    @Test func originBusyIsDeadLetteredWithItsResult() {
        let policy = Self.policy()
        let job = Job(id: "j1", url: "https://a.example/x.png")
        let decision = policy.finished(Self.delivery(), job: job, result: Self.result(job, error: policy.budgetSpent))
        #expect(decision.outcome == .failedFinal(.originBusy))
        #expect(decision.messages.map(\.routingKey) == ["image-fetch.results", "image-fetch.dead"])
    }

    /// The channel queue reports a job over `queue.max_job_bytes` by its size; the code and the
    /// message of its dead copy are decided here, as they were when the channel queue minted them.
    @Test func anOversizedJobsDeadCopySaysJobTooLarge() {
        var configuration = WorkerConfiguration()
        configuration.queue.maxJobBytes = 1000
        let policy = OutcomePolicy(configuration)
        let error = policy.oversized(bodySize: 5000)
        #expect(error == JobError(.jobTooLarge, "the job body is 5000 bytes, over queue.max_job_bytes (1000)"))
        #expect(!error.retryable)
        let copy = policy.oversizedDeadCopy(of: Self.delivery(), bodySize: 5000, attempt: 2)
        #expect(copy.routingKey == "image-fetch.dead")
        #expect(copy.properties.headers["x-error-code"] == .string("job_too_large"))
        #expect(copy.properties.headers["x-error-message"] == .string(error.message))
        #expect(copy.properties.headers["x-attempt"] == .int(2))
        #expect(copy.properties.headers["x-custom"] == .string("kept"))
    }
}
