import Crypto
import Dispatch
import Foundation
import Logging

/// The worker: consumes jobs, fetches and stores images under a concurrency limit, publishes
/// results with confirms, acks only confirmed work, and drains on SIGTERM.
///
/// Queues (see ARCHITECTURE.md, "Threading rules"):
/// - the channel queue (``BrokerSession/queue``) is the only one that touches rabbitmq-c;
/// - the admission queue is the only place that waits on ``semaphore``;
/// - the admission queue also decodes the job and checks its URL (microseconds) once admitted;
/// - the work queue runs the CPU work after the fetch (sniff, hash, encode), and the file write
///   when `storage.fsync` is off;
/// - the fetch engine's own queue drives libcurl; the sink has lanes of its own for disk writes.
public final class Worker: BrokerSessionDelegate, @unchecked Sendable {
    // @unchecked Sendable: the stored properties are immutable or thread-safe themselves
    // (queues, semaphore, group, locked values); `blocked` is guarded by `gate`, and
    // `shutdownPhase`, the timers and `healthServer` are touched only at start-up or on `control`.

    public let configuration: WorkerConfiguration
    public let stats: WorkerStats
    let logger: Logger
    let session: BrokerSession
    let fetchEngine: FetchEngine
    let sink: any ImageSink
    let semaphore: DispatchSemaphore
    let inFlight = DispatchGroup()
    let admissionQueue = DispatchQueue(label: "image-fetch-worker.admission")
    let workQueue = DispatchQueue(label: "image-fetch-worker.work", attributes: .concurrent)
    let control = DispatchQueue(label: "image-fetch-worker.control")
    let hostName = ProcessInfo.processInfo.hostName

    private let ledger = NSLockedValue(AdmissionLedger())
    private let redeliveries: NSLockedValue<RedeliveryCounter>
    private let gate = NSCondition()
    private var blocked = false
    private let drainingFlag = NSLockedValue(false)
    private var shutdownPhase = ShutdownPhase.running
    private var signalSources: [any DispatchSourceSignal] = []
    private var summaryTimer: (any DispatchSourceTimer)?
    private var depthTimer: (any DispatchSourceTimer)?
    private var healthServer: HealthServer?

    enum ShutdownPhase { case running, draining }

    /// Builds the worker from its configuration: the fetch engine, the sink and the session.
    public init(configuration: WorkerConfiguration, logger: Logger) throws {
        self.configuration = configuration
        self.logger = logger
        self.semaphore = DispatchSemaphore(value: configuration.worker.concurrency)
        self.stats = WorkerStats(metrics: WorkerMetrics(concurrency: configuration.worker.concurrency))
        self.redeliveries = NSLockedValue(RedeliveryCounter(limit: configuration.queue.deliveryLimit))
        let policy = AddressPolicy(
            allowPrivateNetworks: configuration.fetch.allowPrivateNetworks,
            allowedNetworks: configuration.fetch.allowedNetworks.compactMap { CIDR($0) })
        self.fetchEngine = try FetchEngine(configuration: configuration.fetch, addressPolicy: { address in
            // Unknown address families are refused: the guard only allows what it can judge.
            guard let ip = IPAddress(sockaddr: address) else { return "non-IP" }
            return policy.deniedClass(of: ip)
        }, maxConnections: configuration.worker.concurrency, completionQueue: workQueue,
        maxWaitingBodies: FetchEngine.defaultMaxWaitingBodies,
        runBatch: { CompletionBatch.run($0) })
        switch configuration.storage.kind {
        case .file:
            self.sink = try FileSink(root: configuration.storage.path, fsync: configuration.storage.fsync)
        case .none:
            self.sink = NoneSink()
        case .s3:
            // Its own engine: uploads skip the address veto, so they must not share connections
            // with fetches. The semaphore is signalled only when the upload completes.
            self.sink = try S3Sink(settings: configuration.s3, fetch: configuration.fetch,
                                   maxConnections: configuration.worker.concurrency)
        }
        self.session = BrokerSession(configuration: configuration, logger: logger, delegate: nil)
        self.session.setDelegate(self)
    }

    /// Whether the worker is connected, consuming and not draining (`/readyz`).
    public var isReady: Bool { !isDraining && session.isConsuming }

    var isDraining: Bool { drainingFlag.withLock { $0 } }

    // MARK: - Running

    /// Connects and starts consuming; a signal later drains the worker and exits the process.
    ///
    /// A failed first connection is retried with backoff, except for errors that retrying
    /// cannot fix (credentials, TLS files): those end the process with one clear line.
    public func start() throws {
        installSignalHandlers()
        if !configuration.amqp.tls.verify {
            logger.warning(configuration.amqp.urls.contains(where: \.tls)
                ? "INSECURE: amqp.tls.verify=false: the broker's certificate and host name are NOT checked; anyone on the network path can impersonate the broker and read the credentials and jobs"
                : "amqp.tls.verify=false has no effect: no amqps:// broker URL is configured")
        }
        if configuration.http.port > 0 {
            healthServer = try HealthServer(host: configuration.http.host, port: configuration.http.port,
                                            probes: probes, logger: logger)
        }
        do throws(AMQPError) {
            try session.start(retrying: true)
        } catch where error.code == .login || error.code == .tls {
            throw error
        } catch {
            logger.warning("the broker is not reachable yet; retrying", metadata: ["error": "\(error)"])
        }
        startSummaryTimer()
        startDepthSampling()
        logger.info("worker started", metadata: [
            "concurrency": "\(configuration.worker.concurrency)", "prefetch": "\(configuration.amqp.prefetch)",
            "queue": "\(configuration.queue.jobs)", "storage": "\(configuration.storage.kind.rawValue)",
        ])
    }

    /// Starts the drain, as SIGTERM does; `completion` runs with the exit status when it is done.
    public func shutdown(completion: @escaping @Sendable (Int32) -> Void) {
        control.async { self.beginDrain(completion: completion) }
    }

    private func installSignalHandlers() {
        signal(SIGPIPE, SIG_IGN)
        for signo in [SIGTERM, SIGINT] {
            signal(signo, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: signo, queue: control)
            source.setEventHandler { [unowned self] in
                if case .draining = self.shutdownPhase {
                    self.logger.warning("second signal: exiting at once; unacked jobs return to the queue")
                    exit(128 + signo)
                }
                self.logger.info("signal received: draining", metadata: ["signal": "\(signo == SIGTERM ? "SIGTERM" : "SIGINT")"])
                self.beginDrain { status in exit(status) }
            }
            source.resume()
            signalSources.append(source)
        }
    }

    private func beginDrain(completion: @escaping @Sendable (Int32) -> Void) {
        dispatchPrecondition(condition: .onQueue(control))
        guard case .running = shutdownPhase else { return }
        shutdownPhase = .draining
        drainingFlag.withLock { $0 = true }
        // Admission may be parked on a resource alarm; let it run so it can skip what is handed back.
        gate.lock(); blocked = false; gate.broadcast(); gate.unlock()

        // 1–2: cancel the consumer, then hand back whatever never got a permit.
        session.stopConsuming { [self] in
            let waiting = ledger.withLock { $0.takeAll() }
            for delivery in waiting { session.nackOnQueue(delivery, requeue: true) }
            stats.skippedAdmission(waiting.count)
            stats.handedBack(waiting.count)
            if !waiting.isEmpty { logger.info("handed back deliveries that were not admitted", metadata: ["count": "\(waiting.count)"]) }
        }
        // 3–5 wait on a queue of their own, so the channel queue keeps serving confirms and heartbeats.
        let drainTimeout = configuration.worker.drainTimeout
        DispatchQueue.global().async { [self] in
            if inFlight.wait(timeout: .now() + drainTimeout) == .timedOut {
                logger.warning("drain timeout: aborting fetches still running", metadata: [
                    "in_flight": "\(stats.snapshot.inFlight)",
                ])
                fetchEngine.cancelAll()
                _ = inFlight.wait(timeout: .now() + 5)
            }
            summaryTimer?.cancel()
            depthTimer?.cancel()
            logSummary()
            session.close()
            fetchEngine.shutdown()
            logger.info("drained; exiting")
            completion(0)
        }
    }

    // MARK: - BrokerSessionDelegate (channel queue)

    public func session(_ session: BrokerSession, didReceive delivery: Delivery) {
        stats.received()
        if isDraining {
            stats.skippedAdmission()
            stats.handedBack()
            session.nackOnQueue(delivery, requeue: true)
            return
        }
        ledger.withLock { $0.received(delivery) }
        admissionQueue.async { self.admit(delivery) }
    }

    public func session(_ session: BrokerSession, didConnect epoch: UInt64) {
        stats.metrics.connected.record(1)
        stats.metrics.connectionState(session.stateName)
        if epoch > 1 { stats.metrics.reconnects.increment() }
    }

    public func session(_ session: BrokerSession, didLoseConnection error: AMQPError) {
        stats.metrics.connected.record(0)
        stats.metrics.connectionState(session.stateName)
        // Deliveries still waiting for a permit belong to the dead channel: the broker redelivers
        // them, so they must not be worked on (their tags can never be acked).
        let dropped = ledger.withLock { $0.takeAll() }.count
        if dropped > 0 {
            stats.skippedAdmission(dropped)
            logger.info("dropped deliveries of the lost channel; the broker redelivers them", metadata: ["count": "\(dropped)"])
        }
    }

    public func session(_ session: BrokerSession, blocked: Bool) {
        stats.metrics.blocked.record(blocked ? 1 : 0)
        stats.metrics.connectionState(blocked ? "blocked" : session.stateName)
        gate.lock()
        self.blocked = blocked && !isDraining
        gate.broadcast()
        gate.unlock()
    }

    // MARK: - Admission (admission queue)

    private func admit(_ delivery: Delivery) {
        gate.lock()
        while blocked { gate.wait() }
        gate.unlock()
        semaphore.wait()
        guard ledger.withLock({ $0.claim(delivery) }) else {
            // Handed back by a drain or dropped with its channel: whoever took it out of the
            // ledger already counted it out of the waiting jobs.
            semaphore.signal()
            return
        }
        inFlight.enter()
        stats.admitted()
        // Decoding and checking the URL take a few microseconds: done here, the job goes straight
        // to the fetch engine without a hop through the work queue.
        process(JobContext(delivery: delivery, admittedAt: DispatchTime.now().uptimeNanoseconds))
    }

    // MARK: - Processing (admission queue, then the work queue once fetched)

    /// Per-job state that outlives the closures of one job.
    final class JobContext: @unchecked Sendable {
        // @unchecked Sendable: each field is written by one stage before the next stage is
        // scheduled, so accesses are ordered by the queue hand-offs.
        let delivery: Delivery
        let admittedAt: UInt64
        var urlHost: String?
        var slotReleased = false

        init(delivery: Delivery, admittedAt: UInt64) {
            self.delivery = delivery
            self.admittedAt = admittedAt
        }
    }

    private func releaseSlot(_ context: JobContext) {
        guard !context.slotReleased else { return }
        context.slotReleased = true
        // At the end of the block of completions this runs in, with the others (one wake-up).
        CompletionBatch.signal(semaphore)
    }

    private func process(_ context: JobContext) {
        let job: Job
        switch Job.decode(context.delivery) {
        case .failure(let error):
            releaseSlot(context)
            deadLetterInvalid(context, error)
            return
        case .success(let decoded):
            job = decoded
        }
        if configuration.queue.type == .classic,
           redeliveries.withLock({ $0.record(identity: job.id, redelivered: job.redelivered) }) {
            releaseSlot(context)
            deadLetterPoison(context, job: job)
            return
        }
        let validated: ValidatedURL
        switch URLPolicy.validate(job.url) {
        case .failure(let error):
            releaseSlot(context)
            finish(context, job: job, error: error, response: nil)
            return
        case .success(let url):
            validated = url
        }
        context.urlHost = validated.host
        var request = FetchRequest(url: validated.url)
        let maxPixels = configuration.fetch.maxPixels
        // Stops the download as soon as the header proves the image too large.
        request.inspector = { prefix in
            switch ImageSniffer.inspect(prefix, isComplete: false) {
            case .needMoreData: return .needMore
            case .notAnImage: return .accept
            case .image(let info): return Self.pixelLimitError(info, maxPixels: maxPixels).map { .reject($0) } ?? .accept
            }
        }
        // Completions arrive on the work queue, several small ones to a block.
        fetchEngine.fetch(request) { response in
            self.fetched(context, job: job, response: response)
        }
    }

    /// `too_many_pixels` when width × height is over the limit.
    static func pixelLimitError(_ info: ImageInfo, maxPixels: Int) -> JobError? {
        let (pixels, overflow) = info.width.multipliedReportingOverflow(by: info.height)
        guard overflow || pixels > maxPixels else { return nil }
        return JobError(.tooManyPixels, "the image is \(info.width) × \(info.height) pixels, over fetch.max_pixels")
    }

    private func fetched(_ context: JobContext, job: Job, response: FetchResponse) {
        if let timings = response.timings {
            stats.metrics.fetchDuration.recordNanoseconds(Int64(timings.totalMs * 1_000_000))
        }
        if !response.body.isEmpty { stats.metrics.fetchedBytes.increment(by: response.body.count) }
        if let error = response.error {
            releaseSlot(context)
            if error.code == .aborted {
                handBack(context)
            } else {
                finish(context, job: job, error: error, response: response)
            }
            return
        }
        let info: ImageInfo
        switch ImageSniffer.inspect(response.body) {
        case .image(let found):
            info = found
        case .notAnImage(let reason):
            releaseSlot(context)
            finish(context, job: job, error: JobError(.notAnImage, "the body is not a supported image (\(reason))"), response: response)
            return
        case .needMoreData:
            releaseSlot(context)
            finish(context, job: job, error: JobError(.notAnImage, "the body is not a supported image"), response: response)
            return
        }
        if let error = Self.pixelLimitError(info, maxPixels: configuration.fetch.maxPixels) {
            releaseSlot(context)
            finish(context, job: job, error: error, response: response)
            return
        }
        let digest = SHA256.hash(data: response.body).hexString
        let request = StorageRequest(body: response.body, sha256: digest, info: info, keyHint: job.key,
                                     jobID: job.id, sourceURL: job.url)
        sink.store(request) { result in
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

    // MARK: - Results

    private func finish(_ context: JobContext, job: Job, error: JobError?, response: FetchResponse?,
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

        var messages: [OutboundMessage] = []
        let outcome: JobOutcome
        if let error, error.retryable, job.attempt < configuration.retry.maxAttempts {
            messages.append(retryCopy(of: context.delivery, job: job))
            outcome = .retry
        } else {
            messages.append(resultMessage(result, job: job))
            if let error, error.retryable {
                messages.append(deadCopy(of: context.delivery, error: error, attempt: job.attempt))
                outcome = .failedFinal(error.code)
            } else if let error {
                outcome = .failed(error.code)
            } else {
                outcome = .ok
            }
        }
        if logger.logLevel <= .debug {
            var metadata: Logger.Metadata = ["job_id": "\(job.id)", "outcome": "\(outcome.name)",
                                             "duration_ms": "\(Int(elapsed))", "attempt": "\(job.attempt)"]
            if let host = context.urlHost { metadata["url_host"] = "\(host)" }
            if let error { metadata["error"] = "\(error.code)" }
            logger.debug("job finished", metadata: metadata)
        }
        publishThenSettle(context, messages) { [stats, redeliveries] confirmed in
            guard confirmed else { return }
            if job.redelivered { redeliveries.withLock { $0.forget(identity: job.id) } }
            switch outcome {
            case .ok: stats.succeeded()
            case .retry: stats.retried()
            case .failedFinal(let code): stats.failed(code); stats.deadLettered()
            case .failed(let code): stats.failed(code)
            }
        }
    }

    /// What a finished job produced, for counters and logs.
    enum JobOutcome {
        case ok
        case retry
        case failed(JobError.Code)
        /// Failed after the last attempt: result plus dead-letter copy.
        case failedFinal(JobError.Code)

        var name: String {
            switch self {
            case .ok: "ok"
            case .retry: "retry"
            case .failed: "failed"
            case .failedFinal: "failed_final"
            }
        }
    }

    private func resultMessage(_ result: JobResult, job: Job) -> OutboundMessage {
        var properties = AMQPProperties()
        properties.contentType = "application/json"
        properties.persistent = true
        properties.correlationID = job.correlationID ?? job.id
        return OutboundMessage(routingKey: job.replyTo ?? configuration.queue.results, properties: properties,
                               body: result.encoded())
    }

    private func retryCopy(of delivery: Delivery, job: Job) -> OutboundMessage {
        let delays = configuration.retry.delays
        let delay = delays.isEmpty ? 5 : delays[min(job.attempt - 1, delays.count - 1)]
        var properties = delivery.properties
        properties.persistent = true
        properties.headers["x-attempt"] = .int(Int64(job.attempt + 1))
        properties.headers["x-first-seen"] = .string(job.firstSeen ?? RFC3339.now())
        properties.headers["x-publish-seq"] = nil
        return OutboundMessage(routingKey: Topology.retryQueueName(jobs: configuration.queue.jobs, delaySeconds: delay),
                               properties: properties, body: delivery.body)
    }

    private func deadCopy(of delivery: Delivery, error: JobError, attempt: Int) -> OutboundMessage {
        var properties = delivery.properties
        properties.persistent = true
        properties.headers["x-error-code"] = .string(error.code.rawValue)
        properties.headers["x-error-message"] = .string(error.message)
        properties.headers["x-attempt"] = .int(Int64(attempt))
        properties.headers["x-publish-seq"] = nil
        return OutboundMessage(routingKey: configuration.queue.dead, properties: properties, body: delivery.body)
    }

    /// An undecodable job: a copy goes to the dead-letter queue with its reason, then the original
    /// is acked. Should that publish fail, the original is rejected instead, which dead-letters it
    /// through the queue's dead-letter exchange without the reason. Either way nothing is lost.
    private func deadLetterInvalid(_ context: JobContext, _ error: JobError) {
        logger.warning("invalid job dead-lettered", metadata: [
            "reason": "\(error.message)", "bytes": "\(context.delivery.body.count)",
        ])
        publishThenSettle(context, [deadCopy(of: context.delivery, error: error, attempt: 1)],
                          ifUnconfirmed: .reject) { [stats] confirmed in
            guard confirmed else { return }
            stats.failed(.invalidJob)
            stats.deadLettered()
        }
    }

    /// A job redelivered more than `queue.delivery_limit` times (a job that keeps crashing
    /// workers): a copy goes to the dead-letter queue with the reason, then the original is acked.
    private func deadLetterPoison(_ context: JobContext, job: Job) {
        logger.error("job redelivered too often; dead-lettered as poison", metadata: [
            "job_id": "\(job.id)", "limit": "\(configuration.queue.deliveryLimit)",
        ])
        let error = JobError(.init(rawValue: "delivery_limit"),
                             "redelivered more than \(configuration.queue.deliveryLimit) times (queue.delivery_limit)",
                             retryable: false)
        publishThenSettle(context, [deadCopy(of: context.delivery, error: error, attempt: job.attempt)]) { [stats, redeliveries] confirmed in
            guard confirmed else { return }
            stats.deadLettered()
            redeliveries.withLock { $0.forget(identity: job.id) }
        }
    }

    /// The fetch was aborted at the drain deadline: the delivery goes back to the queue.
    private func handBack(_ context: JobContext) {
        let delivery = context.delivery
        session.queue.async { [self] in
            session.nackOnQueue(delivery, requeue: true)
            stats.handedBack()
            stats.finished()
            inFlight.leave()
        }
    }

    /// What happens to a delivery whose messages were not all confirmed.
    enum Unconfirmed {
        /// Nack with requeue: the job runs again.
        case requeue
        /// Reject without requeue: the queue's dead-letter exchange takes it.
        case reject
    }

    /// Publishes every message, and acks the delivery only when the broker confirmed all of them;
    /// otherwise it is nacked (`ifUnconfirmed`), or, on a lost channel, left for redelivery.
    private func publishThenSettle(_ context: JobContext, _ messages: [OutboundMessage],
                                   ifUnconfirmed: Unconfirmed = .requeue,
                                   onConfirmed: @escaping @Sendable (Bool) -> Void) {
        let delivery = context.delivery
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
                    switch tally.failure {
                    case nil:
                        session.ackOnQueue(delivery)
                        stats.metrics.ackLatency.recordNanoseconds(Int64(now - delivery.receivedAt))
                    case .connectionLost:
                        break  // the broker redelivers it; the old tag cannot be used
                    default:
                        logger.warning("publish not confirmed; job handed back", metadata: [
                            "outcome": "\(tally.failure.map { "\($0)" } ?? "")", "requeue": "\(ifUnconfirmed == .requeue)",
                        ])
                        session.nackOnQueue(delivery, requeue: ifUnconfirmed == .requeue)
                    }
                    onConfirmed(tally.failure == nil)
                    stats.finished()
                    inFlight.leave()
                }
            }
        }
    }

    private final class PublishTally: @unchecked Sendable {
        // @unchecked Sendable: created and used only on the channel queue.
        var remaining: Int
        var failure: PublishOutcome?
        init(remaining: Int) { self.remaining = remaining }
    }

    // MARK: - Operations

    /// What `/readyz`, `/healthz` and `/metrics` report.
    public var probes: HealthServer.Probes {
        HealthServer.Probes(
            isReady: { [weak self] in self?.isReady ?? false },
            checkHealth: { [weak self] reply in
                guard let self else { return reply(false) }
                // Healthy when the channel, work and control queues each run a no-op; a stuck
                // queue never answers and the endpoint times out into 503.
                let answered = NSLockedValue(0)
                let queues = [self.session.queue, self.workQueue, self.control]
                for queue in queues {
                    queue.async {
                        if answered.withLock({ $0 += 1; return $0 }) == queues.count { reply(true) }
                    }
                }
            },
            metrics: { [stats, session] in
                // The session changes state in places that tell no delegate (connecting, waiting
                // to reconnect, draining, closed); read it at scrape time so the gauge is current.
                stats.metrics.connectionState(session.stateName)
                return stats.metrics.render()
            })
    }

    /// The port the operations endpoint listens on, if it runs.
    public var httpPort: Int? { healthServer?.port }

    /// Samples ready messages and consumers of every queue of the topology with passive declares
    /// on the worker's own connection, every `metrics.depth_interval` seconds.
    private func startDepthSampling() {
        let interval = configuration.metrics.depthInterval
        guard interval > 0 else { return }
        let names = QueueDepth.queueNames(configuration)
        let timer = DispatchSource.makeTimerSource(queue: control)
        timer.schedule(deadline: .now() + min(interval, 1), repeating: interval, leeway: .milliseconds(100))
        timer.setEventHandler { [unowned self] in
            for name in names {
                session.queueDepth(name) { [stats] depth in
                    if let depth { stats.metrics.depth(queue: name, ready: depth.messages, consumers: depth.consumers) }
                }
            }
        }
        timer.resume()
        depthTimer = timer
    }

    // MARK: - Summary

    private func startSummaryTimer() {
        let interval = configuration.log.summaryInterval
        guard interval > 0 else { return }
        let timer = DispatchSource.makeTimerSource(queue: control)
        timer.schedule(deadline: .now() + interval, repeating: interval, leeway: .seconds(1))
        timer.setEventHandler { [unowned self] in self.logSummary() }
        timer.resume()
        summaryTimer = timer
    }

    private let lastSummary = NSLockedValue((count: 0, time: DispatchTime.now().uptimeNanoseconds))

    private func logSummary() {
        let snapshot = stats.snapshot
        let done = snapshot.succeeded + snapshot.failed + snapshot.retried
        let now = DispatchTime.now().uptimeNanoseconds
        let rate = lastSummary.withLock { last -> Double in
            let seconds = Double(now - last.time) / 1e9
            let rate = seconds > 0 ? Double(done - last.count) / seconds : 0
            last = (done, now)
            return rate
        }
        // Failures by code, e.g. "http_error=2,not_an_image=1"; counts since the start, like ok and failed.
        let byCode = snapshot.failuresByCode.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
            .joined(separator: ",")
        logger.info("summary", metadata: [
            "rate_per_s": "\(String(format: "%.1f", rate))", "in_flight": "\(snapshot.inFlight)",
            "waiting": "\(snapshot.waiting)", "ok": "\(snapshot.succeeded)", "failed": "\(snapshot.failed)",
            "failed_by_code": "\(byCode)",
            "retried": "\(snapshot.retried)", "dead_lettered": "\(snapshot.deadLettered)",
            "requeued": "\(snapshot.handedBack)", "connection": "\(session.stateName)",
        ])
    }
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
