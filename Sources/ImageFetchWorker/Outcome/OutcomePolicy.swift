/// What a job's end sends to the broker, and how its delivery is settled. Pure: it builds
/// messages and makes no I/O, so every route is tested directly.
///
/// The routes:
/// - **ok, or a failure not worth retrying**: the result;
/// - **not modified** (a refetch that found the image unchanged: a 304, or the same SHA-256): the
///   result, never a retry, whatever the status;
/// - **a retryable failure with attempts left**: a copy to the retry queue whose delay is the
///   attempt's (`retry.delays`, the last repeating), or the first one as long as the origin's
///   `Retry-After`, and no result;
/// - **a retryable failure on the last attempt, or `origin_busy`**: the result and a copy to the
///   dead-letter queue with the reason;
/// - **an invalid job, or a poison job** (redelivered past `queue.delivery_limit`): a dead-letter copy
///   with the reason;
/// - **a deferral**: a copy to the delay queue, attempt unchanged.
///
/// In every case the delivery is acked only once the broker has confirmed every message.
package struct OutcomePolicy: Sendable {
    package let queues: WorkerConfiguration.Queues
    package let retry: WorkerConfiguration.Retry
    package let deferral: DeferralPolicy

    package init(_ configuration: WorkerConfiguration) {
        self.queues = configuration.queue
        self.retry = configuration.retry
        self.deferral = DeferralPolicy(configuration.scheduler)
    }

    /// What a finished job produced, for counters and logs.
    package enum Outcome: Equatable, Sendable {
        case ok
        /// A refetch that found the image unchanged; nothing was stored.
        case notModified
        case retry
        case failed(JobError.Code)
        /// Failed for good with a dead-letter copy: after the last attempt, or `origin_busy`.
        case failedFinal(JobError.Code)
        case deadLettered(JobError.Code)
        case deferred

        package var name: String {
            switch self {
            case .ok: "ok"
            case .notModified: "not_modified"
            case .retry: "retry"
            case .failed: "failed"
            case .failedFinal: "failed_final"
            case .deadLettered: "dead_lettered"
            case .deferred: "deferred"
            }
        }
    }

    /// What happens to a delivery whose messages were not all confirmed.
    package enum Unconfirmed: Equatable, Sendable {
        /// Nack with requeue: the job runs again.
        case requeue
        /// Reject without requeue: the queue's dead-letter exchange takes it, without the reason.
        case reject
    }

    /// The messages to publish, then the settlement.
    package struct Decision: Sendable {
        package var messages: [OutboundMessage]
        package var outcome: Outcome
        package var ifUnconfirmed: Unconfirmed = .requeue
    }

    // MARK: - Routes

    /// A job that ran: `result.error` nil for ok. `retryAfterSeconds` is the origin's
    /// `Retry-After`, if it sent one.
    package func finished(
        _ delivery: Delivery, job: Job, result: JobResult, retryAfterSeconds: Double? = nil
    ) -> Decision {
        guard let error = result.error else {
            return Decision(
                messages: [resultMessage(result, job: job)],
                outcome: result.status == .notModified ? .notModified : .ok)
        }
        if error.retryable, job.attempt < retry.maxAttempts {
            let delay = retryDelay(attempt: job.attempt, atLeastSeconds: retryAfterSeconds)
            return Decision(messages: [retryCopy(of: delivery, job: job, delaySeconds: delay)], outcome: .retry)
        }
        if error.retryable || error.code == .originBusy {
            return Decision(
                messages: [
                    resultMessage(result, job: job),
                    deadCopy(of: delivery, error: error, attempt: job.attempt),
                ],
                outcome: .failedFinal(error.code))
        }
        return Decision(messages: [resultMessage(result, job: job)], outcome: .failed(error.code))
    }

    /// Whether a fetch of `job` ends `not_modified`: the origin answered 304 to the validators the
    /// job sent (`etag`, `last_modified`), or the body's SHA-256 (`digest`, once hashed) is the
    /// job's `sha256`. A 304 to a request that sent none is no answer to it, and stays `http_error`.
    package static func isNotModified(_ job: Job, httpStatus: Int?, digest: String?) -> Bool {
        if httpStatus == 304 { return job.etag != nil || job.lastModified != nil }
        guard let digest, let previous = job.previousSHA256 else { return false }
        return digest == previous
    }

    /// A body that is no job: a dead-letter copy with the reason; should its publish fail, the
    /// original is rejected to the queue's dead-letter exchange instead. Nothing is lost either way.
    package func invalid(_ delivery: Delivery, error: JobError) -> Decision {
        // The attempt it ended on: a later attempt's checks can refuse what the first passed.
        let attempt = max(JobHeaders.count(delivery.properties.headers[JobHeaders.attempt]) ?? 1, 1)
        return Decision(
            messages: [deadCopy(of: delivery, error: error, attempt: attempt)], outcome: .deadLettered(error.code),
            ifUnconfirmed: .reject)
    }

    /// A job redelivered more than `queue.delivery_limit` times.
    package func poison(_ delivery: Delivery, job: Job) -> Decision {
        let error = JobError(
            .deliveryLimit, "redelivered more than \(queues.deliveryLimit) times (queue.delivery_limit)",
            retryable: false)
        return Decision(
            messages: [deadCopy(of: delivery, error: error, attempt: job.attempt)],
            outcome: .deadLettered(error.code))
    }

    /// A job the scheduler gives up from the window: a copy to a delay queue, or nil when the
    /// deferral budget is spent (the caller then finishes the job with `origin_busy`).
    package func deferred(_ delivery: Delivery, job: Job, atLeastSeconds: Double?) -> Decision? {
        // Both are clamped to 0...JobHeaders.maxCount: a producer's 2^63 - 1 must not trap below,
        // and a negative time must not buy a job more budget.
        let count = JobHeaders.count(delivery.properties.headers[JobHeaders.deferrals]) ?? 0
        let spent = JobHeaders.count(delivery.properties.headers[JobHeaders.deferredSeconds]) ?? 0
        guard
            case .wait(let seconds) = deferral.decide(
                count: count, spentSeconds: Double(spent),
                atLeastSeconds: atLeastSeconds)
        else { return nil }
        var properties = delivery.properties
        properties.persistent = true
        properties.headers[JobHeaders.deferrals] = .int(Int64(count) + 1)
        properties.headers[JobHeaders.deferredSeconds] = .int(Int64(spent) + Int64(seconds))
        properties.headers[JobHeaders.firstSeen] = .string(job.firstSeen ?? RFC3339.now())
        JobHeaders.dropMalformedDeath(from: &properties.headers)
        let message = OutboundMessage(
            routingKey: Topology.deferQueueName(jobs: queues.jobs, delaySeconds: seconds),
            properties: properties, body: delivery.body)
        return Decision(messages: [message], outcome: .deferred)
    }

    /// The error of a job whose body is `bodySize` bytes, over `queue.max_job_bytes`. The channel
    /// queue dead-letters such a job unread; it says only how large the body is, and the code is
    /// decided here, with the other dead-letter reasons.
    package func oversized(bodySize: UInt64) -> JobError {
        JobError(.jobTooLarge, "the job body is \(bodySize) bytes, over queue.max_job_bytes (\(queues.maxJobBytes))")
    }

    /// The dead-letter copy of a job over `queue.max_job_bytes` (``oversized(bodySize:)``), sent
    /// with the body of `original`'s frames as they come.
    package func oversizedDeadCopy(of original: Delivery, bodySize: UInt64, attempt: Int) -> OutboundMessage {
        deadCopy(of: original, error: oversized(bodySize: bodySize), attempt: attempt)
    }

    /// The error of a job whose deferral budget is spent.
    package var budgetSpent: JobError {
        JobError(
            .originBusy,
            "the origin stayed paused or busy past scheduler.defer_budget (\(Int(deferral.budgetSeconds)) s)")
    }

    // MARK: - Messages

    /// The retry delay for `attempt` (1 = the first): `retry.delays`, the last repeating, but no
    /// shorter than `atLeastSeconds` if a configured delay is that long.
    package func retryDelay(attempt: Int, atLeastSeconds: Double?) -> Int {
        let delays = retry.delays.isEmpty ? [5] : retry.delays
        let delay = delays[min(max(attempt - 1, 0), delays.count - 1)]
        guard let atLeastSeconds, Double(delay) < atLeastSeconds else { return delay }
        return delays.sorted().first { Double($0) >= atLeastSeconds } ?? delays.max() ?? delay
    }

    package func resultMessage(_ result: JobResult, job: Job) -> OutboundMessage {
        var properties = AMQPProperties()
        properties.contentType = "application/json"
        properties.persistent = true
        // correlation_id is a short string: an id over 255 bytes is in the body only.
        properties.correlationID = job.correlationID ?? (job.id.utf8.count <= 255 ? job.id : nil)
        return OutboundMessage(
            routingKey: job.replyTo ?? queues.results, properties: properties, body: result.encoded())
    }

    package func retryCopy(of delivery: Delivery, job: Job, delaySeconds: Int) -> OutboundMessage {
        var properties = delivery.properties
        properties.persistent = true
        properties.headers[JobHeaders.attempt] = .int(Int64(job.attempt) + 1)
        properties.headers[JobHeaders.firstSeen] = .string(job.firstSeen ?? RFC3339.now())
        JobHeaders.dropMalformedDeath(from: &properties.headers)
        return OutboundMessage(
            routingKey: Topology.retryQueueName(jobs: queues.jobs, delaySeconds: delaySeconds),
            properties: properties, body: delivery.body)
    }

    package func deadCopy(of delivery: Delivery, error: JobError, attempt: Int) -> OutboundMessage {
        var properties = delivery.properties
        properties.persistent = true
        properties.headers[JobHeaders.errorCode] = .string(error.code.rawValue)
        properties.headers[JobHeaders.errorMessage] = .string(error.message)
        properties.headers[JobHeaders.attempt] = .int(Int64(attempt))
        return OutboundMessage(routingKey: queues.dead, properties: properties, body: delivery.body)
    }

    /// Headers of a deferred job: how often, and for how many seconds in all.
    package static let deferralsHeader = JobHeaders.deferrals
    package static let deferredSecondsHeader = JobHeaders.deferredSeconds
}
