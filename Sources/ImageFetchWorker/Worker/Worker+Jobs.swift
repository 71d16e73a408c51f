import Crypto
import Dispatch
import Foundation
import Logging

extension JobRunner {
    // MARK: - Intake (channel queue)

    /// Decodes the delivery and checks its URL; a valid job goes to admission under its origin,
    /// anything else is answered at once without a permit.
    func intake(_ delivery: Delivery) {
        let job: Job
        let trace = JobTrace(delivery: delivery, queue: configuration.queue.jobs)
        let tenantHeader = configuration.scheduler.tenantHeader
        if let reading = delivery.properties.lossyReading {
            logger.warning(
                "job dead-lettered as it came: its properties could not be read as they came, so no copy could carry them",
                metadata: trace.logMetadata.merging([
                    "reason": "\(reading)", "error": "\(JobError.Code.invalidJob)",
                ]) { $1 })
            run(JobContext(delivery: delivery, job: nil, trace: trace)) { $0.refusedUnread(.invalidJob) }
            return
        }
        switch Job.decode(delivery, allowedHeaders: configuration.fetch.jobHeaders, tenantHeader: tenantHeader) {
        case .failure(let error):
            let context = JobContext(delivery: delivery, job: nil, trace: trace)
            run(context) { $0.answeredWithoutFetch() }
            logger.warning(
                "invalid job dead-lettered",
                metadata: trace.logMetadata.merging([
                    "reason": "\(error.message)", "bytes": "\(delivery.body.count)",
                ]) { $1 })
            publishThenSettle(context, policy.invalid(delivery, error: error))
            return
        case .success(let decoded):
            job = decoded
        }
        let context = JobContext(delivery: delivery, job: job, trace: trace)
        if configuration.queue.type == .classic,
            redeliveries.withLock({ $0.record(identity: job.id, redelivered: job.redelivered) })
        {
            logger.error(
                "job redelivered too often; dead-lettered as poison",
                metadata: trace.logMetadata.merging([
                    "job_id": "\(job.id)", "limit": "\(configuration.queue.deliveryLimit)",
                ]) { $1 })
            run(context) { $0.answeredWithoutFetch() }
            publishThenSettle(context, policy.poison(delivery, job: job))
            return
        }
        switch URLPolicy.validate(job.url) {
        case .failure(let refusal):
            run(context) { $0.answeredWithoutFetch() }
            finish(context, job: job, error: JobError(refusal), response: nil)
        case .success(let url):
            // Most URLs pass unchanged: then the job's string is shared instead of kept twice
            // for every prefetched job.
            context.fetchURL = url.url == job.url ? job.url : url.url
            // An identical request waiting or in flight: this job takes its outcome (Worker+SharedFetch.swift).
            if joinSharedFetch(context, job: job, url: url.url) { return }
            run(context) { $0.submitted() }
            admission.submit(
                context, origin: Origin(url), tenant: job.tenant, deferredBefore: Self.comesBackFromDeferral(delivery))
        }
    }

    /// Whether the delivery carries `x-deferrals`: its origin's demand counted it when it first came.
    /// A value that is no integer counts as absent, as everywhere else (message-contract.md).
    static func comesBackFromDeferral(_ delivery: Delivery) -> Bool {
        (JobHeaders.count(delivery.properties.headers[OutcomePolicy.deferralsHeader]) ?? 0) > 0
    }

    // MARK: - Admission (admission queue)

    /// Admission gave the job a permit and its origin's slot. Only decoded jobs with a checked URL
    /// are scheduled; should one ever lack them, it gives both back and is handed back to the
    /// broker rather than lost.
    func start(_ ticket: Admission<JobContext>.Ticket) {
        let context = ticket.element
        let canStart = context.job != nil && context.fetchURL != nil
        run(context) { $0.admitted(ticket.slot, canStart: canStart) }
    }

    /// The lifecycle's ``JobLifecycle/Action/fetch``: the job holds a permit and its origin's slot.
    func startFetch(_ context: JobContext) {
        guard let job = context.job, let url = context.fetchURL, let slot = context.lifecycle.slot else { return }
        context.admittedAt = DispatchTime.now().uptimeNanoseconds
        var request = FetchRequest(url: url)
        // A refetch sends its validators (If-None-Match, If-Modified-Since) with the job's headers.
        let jobHeaders = CacheValidators.requestHeaders(job.headers, etag: job.etag, lastModified: job.lastModified)
        request.headers = RequestHeaders.lines(configured: configuration.fetch.headers, job: jobHeaders)
        let maxPixels = configuration.fetch.maxPixels
        // Stops the download as soon as the header proves the image too large.
        request.inspector = { prefix in
            switch ImagePolicy.checkPrefix(prefix, maxPixels: maxPixels) {
            case .needMore: return .needMore
            case .accept: return .accept
            case .refuse(.tooManyPixels(let width, let height)):
                return .reject(.tooManyPixels(width: width, height: height))
            // The prefix check refuses on pixels only; the whole body gets every other check.
            case .refuse: return .accept
            }
        }
        // The response's opt-out headers stop the transfer before its body (Fetch/OptOut/).
        request.optOut = optOutPolicy
        // fetch.robots = respect: the origin's robots.txt decides first (Worker+OptOut.swift).
        checkRobots(context, job: job, url: url, slot: slot) { [self, request] in
            // Completions arrive on the work queue, several small ones to a block.
            let fetchSpan = context.trace.fetch(url: url)
            fetchEngine.fetch(request) { response in
                // The pipeline's edge: the engine's failure becomes a result code here, once. An
                // aborted transfer has none; `conclude` hands its job back.
                let error = response.failure.flatMap(JobError.init(fetchFailure:))
                JobTrace.endFetch(
                    fetchSpan, httpStatus: response.httpStatus,
                    errorCode: response.failure == .aborted ? JobTrace.handedBack : error?.code.rawValue)
                self.fetched(context, job: job, response: response, error: error)
            }
        }
    }

    /// The scheduler gave the job up from the window: republish it to a delay queue, then ack it.
    func deferJob(
        _ context: JobContext, origin: Origin, atLeastSeconds: Double?,
        reason: OriginScheduler<JobContext>.DeferralReason
    ) {
        run(context) { $0.deferred() }
        context.admittedAt = DispatchTime.now().uptimeNanoseconds
        // Followers go where their leader goes, each with its own deferral count.
        for follower in takeFollowers(context) {
            deferJob(follower, origin: origin, atLeastSeconds: atLeastSeconds, reason: reason)
        }
        guard let job = context.job else { return run(context) { $0.handBack() } }
        guard let decision = policy.deferred(context.delivery, job: job, atLeastSeconds: atLeastSeconds) else {
            finish(context, job: job, error: policy.budgetSpent, response: nil)
            return
        }
        originMetrics.deferred(reason)
        if logger.logLevel <= .debug {
            logger.debug(
                "job deferred",
                metadata: context.trace.logMetadata.merging(
                    ["job_id": "\(job.id)", "origin": "\(origin)"]) { $1 })
        }
        publishThenSettle(context, decision)
    }

    // MARK: - Fetched (work queue)

    private func fetched(_ context: JobContext, job: Job, response: FetchResponse, error: JobError?) {
        // One parse for both the origin's pause and the retry's delay.
        let retryAfter = Self.retryAfterSeconds(response, cap: configuration.scheduler.maxRetryAfter)
        let originOutcome = Self.originOutcome(response, error: error, retryAfterSeconds: retryAfter)
        run(context) { $0.fetched(originOutcome) }
        if let timings = response.timings {
            stats.metrics.fetchDuration.recordNanoseconds(Int64(timings.totalMs * 1_000_000))
        }
        fetchMetrics.record(response)
        if let status = response.httpStatus, status == 429 || status == 503 {
            originMetrics.overloadResponse(status: status)
        }
        if !response.body.isEmpty { stats.metrics.fetchedBytes.increment(by: response.body.count) }
        // Taken before the leader's own store, which so comes first (Worker+SharedFetch.swift).
        let followers = takeFollowers(context)
        conclude(context, job: job, response: response, error: error, retryAfterSeconds: retryAfter)
        shareOutcome(followers, response: response, error: error, retryAfterSeconds: retryAfter)
    }

    /// What a fetch's response means for one job: its checks, its store, its result. The leader of
    /// a shared fetch and each of its followers come here with the same response.
    func conclude(
        _ context: JobContext, job: Job, response: FetchResponse, error: JobError?,
        retryAfterSeconds retryAfter: Double?
    ) {
        optOutMetrics.record(response)
        if response.failure == .aborted {
            // The worker stopped the transfer itself (the drain's deadline): no result, the
            // delivery goes back to the broker.
            run(context) { $0.handBack() }
            return
        }
        if let error {
            // Only a 304 that ended the transfer: libcurl follows a 304's `Location` and keeps the
            // status when that hop fails, and then the hop's failure is the answer. At the redirect
            // limit it makes no hop and says so: the 304 stands.
            var ended304 = response.failure == .httpStatus(304)
            if case .tooManyRedirects = response.failure { ended304 = true }
            if ended304, OutcomePolicy.isNotModified(job, httpStatus: response.httpStatus, digest: nil) {
                // A refetch's 304: nothing to store.
                run(context) { $0.decided() }
                finish(context, job: job, error: nil, response: response, notModified: true)
            } else {
                run(context) { $0.decided() }
                finish(context, job: job, error: error, response: response, retryAfterSeconds: retryAfter)
            }
            return
        }
        let info: ImageInfo
        let validateSpan = context.trace.stage("validate")
        defer { validateSpan.end() }
        switch Self.checkImage(
            response.body, endedByClose: response.endedByClose, maxPixels: configuration.fetch.maxPixels,
            verify: configuration.image.verify)
        {
        case .success(let found):
            info = found
        case .failure(let error):
            run(context) { $0.decided() }
            finish(context, job: job, error: error, response: response)
            return
        }
        JobTrace.endValidate(validateSpan, info: info)
        let digest = SHA256.hash(data: response.body).hexString
        if OutcomePolicy.isNotModified(job, httpStatus: response.httpStatus, digest: digest) {
            // The bytes the job's last fetch had: nothing to store.
            run(context) { $0.decided() }
            finish(context, job: job, error: nil, response: response, digest: digest, notModified: true)
            return
        }
        let request = StorageRequest(
            body: response.body, sha256: digest, info: info, keyHint: job.key,
            jobID: job.id, sourceURL: job.url)
        let storeSpan = context.trace.stage("store")
        sink.store(request) { stored in
            let result = stored.mapError(JobError.init)
            JobTrace.endStore(storeSpan, result)
            self.run(context) { $0.decided() }
            switch result {
            case .success(let stored):
                self.finish(
                    context, job: job, error: nil, response: response, image: info, digest: digest,
                    location: stored.location, stored: stored.location == nil ? nil : stored.wrote)
            case .failure(let error):
                self.finish(context, job: job, error: error, response: response)
            }
        }
    }

    // MARK: - Results

    /// Publishes the job's result (or its retry) and settles the delivery; `retryAfterSeconds` is
    /// the origin's `Retry-After` of a 429 or 503, as ``retryAfterSeconds(_:cap:)`` read it.
    /// `notModified`: a refetch found the image unchanged (``OutcomePolicy/isNotModified(_:httpStatus:digest:)``).
    func finish(
        _ context: JobContext, job: Job, error: JobError?, response: FetchResponse?,
        retryAfterSeconds: Double? = nil,
        image: ImageInfo? = nil, digest: String? = nil, location: String? = nil, stored: Bool? = nil,
        notModified: Bool = false
    ) {
        let elapsed = Double(DispatchTime.now().uptimeNanoseconds - context.admittedAt) / 1e6
        let status: JobResult.Status = error != nil ? .failed : notModified ? .notModified : .ok
        var result = JobResult(
            job: job, status: status, durationMs: elapsed, worker: hostName,
            finishedAt: Date().timeIntervalSince1970)
        if let response {
            result.httpStatus = response.httpStatus
            result.contentType = response.contentType
            result.finalURL = response.finalURL
            result.redirects = response.redirects
            result.timings = response.timings
            // The validators for the next refetch, on every success.
            if error == nil {
                result.etag = response.etag
                result.lastModified = response.lastModified
            }
        }
        result.image = image
        result.bytes = image == nil ? nil : response?.body.count
        result.sha256 = digest
        result.location = location
        result.stored = stored
        result.error = error
        let decision = policy.finished(context.delivery, job: job, result: result, retryAfterSeconds: retryAfterSeconds)
        if logger.logLevel <= .debug {
            var metadata: Logger.Metadata = [
                "job_id": "\(job.id)", "outcome": "\(decision.outcome.name)",
                "duration_ms": "\(Int(elapsed))", "attempt": "\(job.attempt)",
            ]
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

    /// Publishes every message of `decision`; the job's lifecycle settles its delivery once the
    /// broker has answered them all (``JobLifecycle/publishAnswered(_:)``).
    func publishThenSettle(_ context: JobContext, _ decision: consuming OutcomePolicy.Decision) {
        let trace = context.trace
        let outcome = decision.outcome
        let requeueIfUnconfirmed = decision.ifUnconfirmed == .requeue
        // Results, retry, deferral and dead-letter copies carry the job's trace context, set in
        // place: the decision is this call's own, so its messages are not copied.
        for index in decision.messages.indices {
            trace.carry(in: &decision.messages[index].properties.headers)
        }
        let messages = decision.messages
        context.publishSpan = trace.publish(to: messages.first?.routingKey ?? "")
        run(context) { $0.publishing(messages.count, outcome: outcome, requeueIfUnconfirmed: requeueIfUnconfirmed) }
        // The confirms keep the context, but not the delivery's content, the job (unless settling
        // needs it) or the messages: hundreds of results wait for their confirm at once.
        context.dropContent(keepingJob: JobLifecycle.hasFallbackResult(outcome))
        // Inside a block of completions, the publishes of the block go to the channel queue together.
        CompletionBatch.async(on: session.queue) { [self] in
            // A job of a lost channel is redelivered and decided again: its copies published now
            // would fork it (two retry lines, two dead letters), and its result would come twice.
            guard session.isCurrentOnQueue(context.delivery) else {
                for _ in messages { run(context) { $0.publishAnswered(.connectionLost) } }
                return
            }
            let publishedAt = DispatchTime.now().uptimeNanoseconds
            for message in messages {
                session.publishOnQueue(message) { [self] answer in
                    // Runs on the channel queue, like the loop above.
                    let now = DispatchTime.now().uptimeNanoseconds
                    stats.metrics.confirmLatency.recordNanoseconds(Int64(now - publishedAt))
                    run(context) { $0.publishAnswered(answer) }
                }
            }
        }
    }

    func count(_ outcome: OutcomePolicy.Outcome, redeliveredJobID: String?) {
        if let redeliveredJobID { redeliveries.withLock { $0.forget(identity: redeliveredJobID) } }
        switch outcome {
        case .ok: stats.succeeded()
        case .notModified: stats.notModified()
        case .retry: stats.retried()
        case .failedFinal(let code):
            stats.failed(code)
            stats.deadLettered()
        case .failed(let code): stats.failed(code)
        case .deadLettered(let code):
            if code == .invalidJob { stats.failed(code) }
            stats.deadLettered()
        case .deferred: break
        }
    }
}
