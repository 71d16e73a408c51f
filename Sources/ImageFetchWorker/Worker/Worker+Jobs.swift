import Crypto
import Dispatch
import Foundation
import Logging

/// Per-job state that outlives the closures of one job.
final class JobContext: @unchecked Sendable {
    // @unchecked Sendable: each `var` is written by one stage before the next stage is scheduled
    // (intake → admission → fetch completion → storage → publish), so the queue hand-offs order
    // every access.
    let delivery: Delivery
    let job: Job?
    var admittedAt: UInt64 = 0
    /// The checked URL, as libcurl is given it.
    var fetchURL: String?
    /// Its place at its origin while it fetches; not the ticket, which holds the context itself.
    var slot: OriginSlot?
    var slotReleased = false
    /// The job's W3C context and spans; its messages and log lines carry the context.
    let trace: JobTrace

    init(delivery: Delivery, job: Job?, trace: JobTrace) {
        self.delivery = delivery
        self.job = job
        self.trace = trace
    }
}

extension Worker {
    // MARK: - Intake (channel queue)

    /// Decodes the delivery and checks its URL; a valid job goes to admission under its origin,
    /// anything else is answered at once without a permit.
    func intake(_ delivery: Delivery) {
        let job: Job
        let trace = JobTrace(delivery: delivery, queue: configuration.queue.jobs)
        switch Job.decode(delivery, allowedHeaders: configuration.fetch.jobHeaders) {
        case .failure(let error):
            let context = beginUnscheduled(JobContext(delivery: delivery, job: nil, trace: trace))
            logger.warning("invalid job dead-lettered", metadata: trace.logMetadata.merging([
                "reason": "\(error.message)", "bytes": "\(delivery.body.count)",
            ]) { $1 })
            publishThenSettle(context, policy.invalid(delivery, error: error))
            return
        case .success(let decoded):
            job = decoded
        }
        let context = JobContext(delivery: delivery, job: job, trace: trace)
        if configuration.queue.type == .classic,
           redeliveries.withLock({ $0.record(identity: job.id, redelivered: job.redelivered) }) {
            logger.error("job redelivered too often; dead-lettered as poison", metadata: trace.logMetadata.merging([
                "job_id": "\(job.id)", "limit": "\(configuration.queue.deliveryLimit)",
            ]) { $1 })
            publishThenSettle(beginUnscheduled(context), policy.poison(delivery, job: job))
            return
        }
        switch URLPolicy.validate(job.url) {
        case .failure(let refusal):
            finish(beginUnscheduled(context), job: job, error: JobError(refusal), response: nil)
        case .success(let url):
            // Most URLs pass unchanged: then the job's string is shared instead of kept twice
            // for every prefetched job.
            context.fetchURL = url.url == job.url ? job.url : url.url
            admission.submit(context, origin: Origin(url), deferredBefore: Self.comesBackFromDeferral(delivery))
        }
    }

    /// Whether the delivery carries `x-deferrals`: its origin's demand counted it when it first came.
    static func comesBackFromDeferral(_ delivery: Delivery) -> Bool {
        guard let count = delivery.properties.headers[OutcomePolicy.deferralsHeader] else { return false }
        return (count.intValue ?? 1) > 0
    }

    /// A job answered without a fetch still counts in flight until it settles.
    private func beginUnscheduled(_ context: JobContext) -> JobContext {
        inFlight.enter()
        stats.admitted()
        context.admittedAt = DispatchTime.now().uptimeNanoseconds
        context.slotReleased = true  // it never took a permit
        return context
    }

    // MARK: - Admission (admission queue)

    /// Admission gave the job a permit: fetch it.
    func start(_ ticket: Admission<JobContext>.Ticket) {
        let context = ticket.element
        stats.admitted()
        guard let job = context.job, let url = context.fetchURL else {
            // Only decoded jobs with a checked URL are scheduled; should one ever lack them, it
            // gives its permit back and is handed back to the broker rather than lost.
            releaseSlot(context)
            admission.finished(ticket.slot, outcome: .other)
            return handBack(context)
        }
        context.admittedAt = DispatchTime.now().uptimeNanoseconds
        context.slot = ticket.slot
        var request = FetchRequest(url: url)
        request.headers = RequestHeaders.lines(configured: configuration.fetch.headers, job: job.headers)
        let maxPixels = configuration.fetch.maxPixels
        // Stops the download as soon as the header proves the image too large.
        request.inspector = { prefix in
            switch ImageSniffer.inspect(prefix, isComplete: false) {
            case .needMoreData: return .needMore
            case .notAnImage: return .accept
            case .image(let info): return Self.pixelLimitError(info, maxPixels: maxPixels).map { .reject(reason: $0.message) } ?? .accept
            }
        }
        // Completions arrive on the work queue, several small ones to a block.
        let fetchSpan = context.trace.fetch(url: url)
        fetchEngine.fetch(request) { response in
            // The pipeline's edge: the engine's failure becomes a result code here, once.
            let error = response.failure.map(JobError.init)
            JobTrace.endFetch(fetchSpan, httpStatus: response.httpStatus, errorCode: error?.code.rawValue)
            self.fetched(context, job: job, response: response, error: error)
        }
    }

    /// The scheduler gave the job up from the window: republish it to a delay queue, then ack it.
    func deferJob(_ context: JobContext, origin: Origin, atLeastSeconds: Double?,
                  reason: OriginScheduler<JobContext>.DeferralReason) {
        stats.admitted()
        context.admittedAt = DispatchTime.now().uptimeNanoseconds
        context.slotReleased = true
        guard let job = context.job else { return handBack(context) }
        guard let decision = policy.deferred(context.delivery, job: job, atLeastSeconds: atLeastSeconds) else {
            finish(context, job: job, error: policy.budgetSpent, response: nil)
            return
        }
        originMetrics.deferred(reason)
        if logger.logLevel <= .debug {
            logger.debug("job deferred", metadata: context.trace.logMetadata.merging(
                ["job_id": "\(job.id)", "origin": "\(origin)"]) { $1 })
        }
        publishThenSettle(context, decision)
    }

    /// `too_many_pixels` when what a decoder would allocate is over the limit: width × height, or
    /// the canvas that frames beyond a GIF's logical screen grow.
    static func pixelLimitError(_ info: ImageInfo, maxPixels: Int) -> JobError? {
        guard info.exceedsPixels(maxPixels) else { return nil }
        return JobError(.tooManyPixels, "the image needs \(info.canvasWidth ?? info.width) × \(info.canvasHeight ?? info.height) pixels, over fetch.max_pixels")
    }

    /// What a whole body is, or why it fails: `not_an_image`, `too_many_pixels`, or, when the
    /// headers are an image but the walk to its end is not (`ImageSniffer.checkStructure`),
    /// `truncated` or `corrupt_image`. The walk runs after the pixel limit, so a bomb is refused by
    /// its header alone. With `verify` `.decode`, libvips then decodes it (``ImageDecoder``).
    static func checkImage(_ body: [UInt8], maxPixels: Int,
                           verify: WorkerConfiguration.Image.Verify = .structure) -> Result<ImageInfo, JobError> {
        body.withUnsafeBytes { bytes in
            let info: ImageInfo
            switch ImageSniffer.inspect(bytes, isComplete: true) {
            case .image(let found):
                info = found
            case .notAnImage(let reason):
                return .failure(JobError(.notAnImage, "the body is not a supported image (\(reason))"))
            case .needMoreData:
                return .failure(JobError(.notAnImage, "the body is not a supported image"))
            }
            if let error = pixelLimitError(info, maxPixels: maxPixels) { return .failure(error) }
            if let problem = ImageSniffer.checkStructure(bytes, format: info.format) {
                return .failure(JobError(problem))
            }
            guard verify == .decode else { return .success(info) }
            return ImageDecoder.decode(bytes, format: info.format, maxPixels: maxPixels)
                .map { var decoded = info; decoded.decoded = $0; return decoded }
                .mapError(JobError.init)
        }
    }

    private func releaseSlot(_ context: JobContext) {
        guard !context.slotReleased else { return }
        context.slotReleased = true
        // At the end of the block of completions this runs in, with the others (one wake-up).
        CompletionBatch.signal(semaphore)
    }

    // MARK: - Fetched (work queue)

    private func fetched(_ context: JobContext, job: Job, response: FetchResponse, error: JobError?) {
        // One parse for both the origin's pause and the retry's delay.
        let retryAfter = Self.retryAfterSeconds(response, cap: configuration.scheduler.maxRetryAfter)
        if let slot = context.slot {
            admission.finished(slot, outcome: Self.originOutcome(response, error: error, retryAfterSeconds: retryAfter))
        }
        if let timings = response.timings {
            stats.metrics.fetchDuration.recordNanoseconds(Int64(timings.totalMs * 1_000_000))
        }
        fetchMetrics.record(response)
        if let status = response.httpStatus, status == 429 || status == 503 {
            originMetrics.overloadResponse(status: status)
        }
        if !response.body.isEmpty { stats.metrics.fetchedBytes.increment(by: response.body.count) }
        if let error {
            releaseSlot(context)
            if error.code == .aborted {
                handBack(context)
            } else {
                finish(context, job: job, error: error, response: response, retryAfterSeconds: retryAfter)
            }
            return
        }
        let info: ImageInfo
        let validateSpan = context.trace.stage("validate")
        defer { validateSpan.end() }
        switch Self.checkImage(response.body, maxPixels: configuration.fetch.maxPixels,
                               verify: configuration.image.verify) {
        case .success(let found):
            info = found
        case .failure(let error):
            releaseSlot(context)
            finish(context, job: job, error: error, response: response)
            return
        }
        JobTrace.endValidate(validateSpan, info: info)
        let digest = SHA256.hash(data: response.body).hexString
        let request = StorageRequest(body: response.body, sha256: digest, info: info, keyHint: job.key,
                                     jobID: job.id, sourceURL: job.url)
        let storeSpan = context.trace.stage("store")
        sink.store(request) { result in
            JobTrace.endStore(storeSpan, result)
            self.releaseSlot(context)
            switch result {
            case .success(let stored):
                self.finish(context, job: job, error: nil, response: response, image: info, digest: digest,
                            location: stored.location)
            case .failure(let error):
                self.finish(context, job: job, error: error, response: response)
            }
        }
    }

    /// The origin's `Retry-After` in seconds, capped, for a 429 or 503; nil for any other answer.
    static func retryAfterSeconds(_ response: FetchResponse, cap: Double) -> Double? {
        guard let status = response.httpStatus, status == 429 || status == 503 else { return nil }
        return RetryAfter.seconds(response.retryAfter, now: Date().timeIntervalSince1970, cap: cap)
    }

    /// What a fetch tells the scheduler about its origin; `error` is the response's failure as a
    /// result code, `retryAfterSeconds` its ``retryAfterSeconds(_:cap:)``.
    static func originOutcome(
        _ response: FetchResponse, error: JobError?, retryAfterSeconds: Double?
    ) -> OriginScheduler<JobContext>.FetchOutcome {
        if let status = response.httpStatus, status > 0 {
            let timings = response.timings
            // The origin's own time: first byte after the connection (and TLS) was set up.
            let latency = timings.map { max($0.ttfbMs - max($0.connectMs, $0.tlsMs), 0) }
            return .response(status: status, latencyNanoseconds: latency.map { UInt64($0 * 1e6) },
                             durationNanoseconds: UInt64((timings?.totalMs ?? 0) * 1e6), retryAfterSeconds: retryAfterSeconds)
        }
        switch error?.code {
        case .connectFailed?, .timeout?:
            return .connectFailure(durationNanoseconds: UInt64((response.timings?.totalMs ?? 0) * 1e6))
        default:
            return .other
        }
    }

    // MARK: - Results

    /// Publishes the job's result (or its retry) and settles the delivery; `retryAfterSeconds` is
    /// the origin's `Retry-After` of a 429 or 503, as ``retryAfterSeconds(_:cap:)`` read it.
    func finish(_ context: JobContext, job: Job, error: JobError?, response: FetchResponse?,
                retryAfterSeconds: Double? = nil,
                image: ImageInfo? = nil, digest: String? = nil, location: String? = nil) {
        let elapsed = Double(DispatchTime.now().uptimeNanoseconds - context.admittedAt) / 1e6
        var result = JobResult(job: job, status: error == nil ? .ok : .failed, durationMs: elapsed, worker: hostName,
                               finishedAt: Date().timeIntervalSince1970)
        if let response {
            result.httpStatus = response.httpStatus
            result.contentType = response.contentType
            result.finalURL = response.finalURL
            result.redirects = response.redirects
            result.timings = response.timings
        }
        result.image = image
        result.bytes = image == nil ? nil : response?.body.count
        result.sha256 = digest
        result.location = location
        result.error = error
        let decision = policy.finished(context.delivery, job: job, result: result, retryAfterSeconds: retryAfterSeconds)
        if logger.logLevel <= .debug {
            var metadata: Logger.Metadata = ["job_id": "\(job.id)", "outcome": "\(decision.outcome.name)",
                                             "duration_ms": "\(Int(elapsed))", "attempt": "\(job.attempt)"]
            // Parsed again here rather than kept in every prefetched job's context.
            if case .success(let url) = URLPolicy.validate(job.url) {
                metadata["url_host"] = "\(url.host)"
            }
            if let error { metadata["error"] = "\(error.code)" }
            metadata.merge(context.trace.logMetadata) { $1 }
            logger.debug("job finished", metadata: metadata)
        }
        publishThenSettle(context, decision)
    }

    /// The fetch was aborted at the drain deadline: the delivery goes back to the queue.
    func handBack(_ context: JobContext) {
        let delivery = context.delivery
        context.trace.end(errorCode: JobError.Code.aborted.rawValue)
        session.queue.async { [self] in
            session.nackOnQueue(delivery, requeue: true)
            stats.handedBack()
            stats.finished()
            inFlight.leave()
        }
    }

    /// Publishes every message of `decision`, and acks the delivery only when the broker confirmed
    /// all of them; otherwise it is nacked (`decision.ifUnconfirmed`), or, on a lost channel, left
    /// for redelivery. Then the job leaves the in-flight group.
    func publishThenSettle(_ context: JobContext, _ decision: consuming OutcomePolicy.Decision) {
        let trace = context.trace
        // The confirm callbacks keep only what settling needs, not the context, the delivery's
        // content or the messages: hundreds of results wait for their confirm at once.
        let receipt = context.delivery.withoutContent
        let jobOutcome = decision.outcome
        let requeueIfUnconfirmed = decision.ifUnconfirmed == .requeue
        let redeliveredJobID = context.job.flatMap { $0.redelivered ? $0.id : nil }
        // Only a decision with a copy of the delivery (and no result) keeps the job, for the
        // fallback result should that copy not fit in a frame; a result-only decision keeps none.
        let fallbackJob: Job?
        switch jobOutcome {
        case .retry, .deferred, .deadLettered: fallbackJob = context.job
        case .ok, .failed, .failedFinal: fallbackJob = nil
        }
        // Results, retry, deferral and dead-letter copies carry the job's trace context, set in
        // place: the decision is this call's own, so its messages are not copied.
        for index in decision.messages.indices {
            trace.carry(in: &decision.messages[index].properties.headers)
        }
        let messages = decision.messages
        let publishSpan = trace.publish(to: messages.first?.routingKey ?? "")
        // Inside a block of completions, the publishes of the block go to the channel queue together.
        CompletionBatch.async(on: session.queue) { [self] in
            let tally = PublishTally(remaining: messages.count)
            let publishedAt = DispatchTime.now().uptimeNanoseconds
            for message in messages {
                session.publishOnQueue(message) { [self] outcome in
                    let now = DispatchTime.now().uptimeNanoseconds
                    stats.metrics.confirmLatency.recordNanoseconds(Int64(now - publishedAt))
                    // Runs on the channel queue, like the loop above.
                    tally.remaining -= 1
                    if outcome != .confirmed { tally.failure = outcome }
                    guard tally.remaining == 0 else { return }
                    JobTrace.endPublish(publishSpan, failure: tally.failure.map { "\($0)" })
                    trace.end(errorCode: jobOutcome.errorCode ?? tally.failure.map { _ in "publish_unconfirmed" })
                    switch tally.failure {
                    case nil:
                        session.ackOnQueue(receipt)
                        stats.metrics.ackLatency.recordNanoseconds(Int64(now - receipt.receivedAt))
                        count(jobOutcome, redeliveredJobID: redeliveredJobID)
                    case .connectionLost:
                        break  // the broker redelivers it; the old tag cannot be used
                    case .unencodable:
                        return settleUnencodable(receipt, job: fallbackJob)  // leaves inFlight itself
                    default:
                        logger.warning("publish not confirmed; job handed back", metadata: [
                            "outcome": "\(tally.failure.map { "\($0)" } ?? "")",
                            "requeue": "\(requeueIfUnconfirmed)",
                        ])
                        session.nackOnQueue(receipt, requeue: requeueIfUnconfirmed)
                    }
                    stats.finished()
                    inFlight.leave()
                }
            }
        }
    }

    /// A message of the job could not be encoded: a copy whose properties (the delivery's, plus
    /// the worker's headers) do not fit in a frame. Nothing was sent and the connection goes on.
    /// The original is rejected to the jobs queue's dead-letter exchange as it came, which loses
    /// nothing (the broker adds `x-death`, reason `rejected`); for a job that had no result yet
    /// (`job`), a result with `properties_too_large` says why first. Runs on the channel queue.
    private func settleUnencodable(_ receipt: Delivery, job: Job?) {
        logger.error("a copy of the job does not fit in a frame; the job is dead-lettered as it came", metadata: [
            "job_id": "\(job?.id ?? "")", "error": "\(JobError.Code.propertiesTooLarge)",
        ])
        let reject: @Sendable () -> Void = { [self] in
            session.nackOnQueue(receipt, requeue: false)
            stats.failed(.propertiesTooLarge)
            stats.deadLettered()
            stats.finished()
            inFlight.leave()
        }
        guard let job else { return reject() }
        let elapsed = Double(DispatchTime.now().uptimeNanoseconds - receipt.receivedAt) / 1e6
        var result = JobResult(job: job, status: .failed, durationMs: elapsed, worker: hostName,
                               finishedAt: Date().timeIntervalSince1970)
        result.error = JobError(
            .propertiesTooLarge,
            "the job's properties leave no room in a frame for the worker's headers; dead-lettered as it came",
            retryable: false)
        session.publishOnQueue(policy.resultMessage(result, job: job)) { [self] outcome in
            guard outcome != .connectionLost else {
                stats.finished()
                inFlight.leave()
                return  // redelivered, and decided again
            }
            reject()
        }
    }

    private func count(_ outcome: OutcomePolicy.Outcome, redeliveredJobID: String?) {
        if let redeliveredJobID { redeliveries.withLock { $0.forget(identity: redeliveredJobID) } }
        switch outcome {
        case .ok: stats.succeeded()
        case .retry: stats.retried()
        case .failedFinal(let code): stats.failed(code); stats.deadLettered()
        case .failed(let code): stats.failed(code)
        case .deadLettered(let code):
            if code == .invalidJob { stats.failed(code) }
            stats.deadLettered()
        case .deferred: break
        }
    }
}

private final class PublishTally: @unchecked Sendable {
    // @unchecked Sendable: created and used only on the channel queue.
    var remaining: Int
    var failure: PublishOutcome?
    init(remaining: Int) { self.remaining = remaining }
}

extension Digest {
    /// Lowercase hex, written straight into the string's storage (one allocation).
    var hexString: String {
        String(unsafeUninitializedCapacity: Self.byteCount * 2) { out in
            var index = 0
            for byte in self {
                out[index] = Self.hexDigit(byte >> 4)
                out[index + 1] = Self.hexDigit(byte & 0x0F)
                index += 2
            }
            return index
        }
    }

    @inline(__always)
    private static func hexDigit(_ nibble: UInt8) -> UInt8 {
        nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") + nibble - 10
    }
}
