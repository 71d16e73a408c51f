import Dispatch
import Foundation
import Logging
import Synchronization

/// The worker the executable runs: the job runner over the real broker session and fetch engine.
package typealias Worker = JobRunner<BrokerSession, FetchEngine>

/// The worker: consumes jobs, admits them per origin under the global concurrency limit, fetches
/// and stores images, publishes results with confirms, acks only confirmed work, and drains on
/// request. The process around it (signals, exit, allocator settings) is the executable's.
///
/// Queues (docs/architecture.md, "Threading rules"):
/// - the channel queue (``BrokerSession/queue``) is the only one that touches rabbitmq-c; it also
///   decodes each job and checks its URL (microseconds), so that admission knows its origin;
/// - the admission queue (``Admission``) is the only place that waits on ``semaphore``;
/// - the work queue runs the CPU work after the fetch (sniff, hash, encode), and the file write
///   when `storage.fsync` is off;
/// - the fetch engine's own queue drives libcurl; the sink has lanes of its own for disk writes;
/// - the control queue runs the drain and the timers.
///
/// Generic over its broker session and fetch engine (the seams ``JobBroker`` and ``JobFetcher``):
/// the worker the executable runs is ``Worker``, over ``BrokerSession`` and ``FetchEngine``; the
/// tests also run it in process over fakes.
package final class JobRunner<Broker: JobBroker, Fetcher: JobFetcher>: JobBrokerDelegate, @unchecked Sendable {
    // @unchecked Sendable: the stored properties are immutable or thread-safe themselves (queues,
    // semaphore, group, locked values, admission); `drainCompletion`, the timers and
    // `healthServer` are touched only at start-up or on `control`.

    package let configuration: WorkerConfiguration
    package let stats: WorkerStats
    let logger: Logger
    let session: Broker
    let fetchEngine: Fetcher
    let sink: any ImageSink
    let semaphore: DispatchSemaphore
    let inFlight = DispatchGroup()
    /// Where fetch completions run (the engine is given it), then the checks and the hash.
    let workQueue: DispatchQueue
    let control = DispatchQueue(label: "image-fetch-worker.control")
    let hostName = ProcessInfo.processInfo.hostName
    let policy: OutcomePolicy
    let originMetrics: OriginMetrics
    /// `metrics.tenants` > 0: the per-tenant metrics.
    let tenantMetrics: TenantMetrics?
    let fetchMetrics: FetchMetrics
    /// Opt-out signals (`Fetch/OptOut/`): the response-header checks every image fetch carries,
    /// and the robots.txt gate when `fetch.robots` is `respect`.
    let optOutPolicy: OptOutPolicy?
    let robotsGate: RobotsGate?
    let optOutMetrics: OptOutMetrics
    /// Identical requests waiting or in flight, which later jobs follow (Worker+SharedFetch.swift).
    let sharedFetches: SharedFetches
    /// Set once `init` returns; admission's handlers call back into the worker.
    private(set) var admission: Admission<JobContext>!

    let redeliveries: Mutex<RedeliveryCounter>
    /// The longest the drain waits for the broker connection to close before the process exits
    /// without it.
    static var closeTimeout: Double { 5 }
    /// The drain's state; its one copy: readiness and intake read it from other queues.
    private let drain = Mutex(DrainStateMachine())
    private var drainCompletion: (@Sendable (Int32) -> Void)?
    var summaryTimer: (any DispatchSourceTimer)?
    var depthTimer: (any DispatchSourceTimer)?
    private var healthServer: HealthServer?
    let lastSummary = Mutex((count: 0, time: DispatchTime.now().uptimeNanoseconds))
    let originLog = OriginLogLimiter()

    /// Builds the runner around a broker session and a fetch engine that are not started yet; the
    /// engine's completions run on `workQueue`, each block inside ``CompletionBatch/run(_:)``.
    package init(
        configuration: WorkerConfiguration, logger: Logger, session: Broker, fetchEngine: Fetcher,
        sink: any ImageSink, workQueue: DispatchQueue
    ) throws {
        // libvips starts once, here, so that decode mode fails at start rather than on every job.
        if configuration.image.verify == .decode, !ImageDecoder.start() {
            throw ConfigurationError(key: "image.verify", problem: "is decode, but libvips could not be started")
        }
        self.configuration = configuration
        self.logger = logger
        self.session = session
        self.fetchEngine = fetchEngine
        self.sink = sink
        self.workQueue = workQueue
        let concurrency = configuration.worker.concurrency
        self.semaphore = DispatchSemaphore(value: concurrency)
        let metrics = WorkerMetrics(concurrency: concurrency)
        self.stats = WorkerStats(metrics: metrics)
        self.originMetrics = OriginMetrics(registry: metrics.registry)
        self.tenantMetrics =
            configuration.metrics.tenants > 0 ? TenantMetrics(maxLabels: configuration.metrics.tenants) : nil
        self.fetchMetrics = FetchMetrics(registry: metrics.registry)
        self.optOutMetrics = OptOutMetrics(registry: metrics.registry)
        self.sharedFetches = SharedFetches(registry: metrics.registry)
        self.optOutPolicy = configuration.fetch.optOut.policy
        self.policy = OutcomePolicy(configuration)
        self.redeliveries = Mutex(RedeliveryCounter(limit: configuration.queue.deliveryLimit))
        self.robotsGate =
            configuration.fetch.robots == .respect
            ? RobotsGate(configuration: configuration.fetch, engine: fetchEngine, metrics: optOutMetrics) : nil
        self.admission = Admission(
            settings: Self.schedulerSettings(configuration), semaphore: semaphore, inFlight: inFlight,
            tenantMetrics: tenantMetrics,
            isBlocked: { [session] in session.isBlocked },
            followers: { [sharedFetches] in sharedFetches.followers },
            handlers: .init(
                start: { [unowned self] ticket in self.start(ticket) },
                deferJob: { [unowned self] context, origin, atLeast, reason in
                    self.deferJob(context, origin: origin, atLeastSeconds: atLeast, reason: reason)
                },
                events: { [unowned self] events in self.originEvents(events) }))
        session.attach(self)
    }

    static func schedulerSettings(_ configuration: WorkerConfiguration) -> OriginScheduler<JobContext>.Settings {
        let scheduler = configuration.scheduler
        let concurrency = configuration.worker.concurrency
        var limiter = OriginLimiter.Settings(
            minLimit: scheduler.minLimit, maxLimit: scheduler.resolvedMaxLimit(concurrency: concurrency),
            initialLimit: scheduler.initialLimit)
        limiter.probeIntervalNanoseconds = UInt64(scheduler.probeInterval * 1e9)
        var settings = OriginScheduler<JobContext>.Settings(limiter: limiter, window: configuration.amqp.prefetch)
        settings.adaptive = scheduler.adaptive
        settings.maxWaitNanoseconds = UInt64(scheduler.maxWait * 1e9)
        settings.maxPauseNanoseconds = UInt64(scheduler.maxRetryAfter * 1e9)
        settings.overloadPauseNanoseconds = UInt64(scheduler.overloadPause * 1e9)
        settings.maxOverloadPauseNanoseconds = UInt64(scheduler.maxOverloadPause * 1e9)
        settings.tenants = TenantShares.Settings(
            limit: scheduler.tenantLimit > 0 ? scheduler.tenantLimit : nil, limits: scheduler.tenantLimits)
        return settings
    }

    /// Whether the worker is connected, consuming and not draining (`/readyz`).
    package var isReady: Bool { !isDraining && session.isConsuming }

    var isDraining: Bool { drain.withLock { $0.isDraining } }

    // MARK: - Running

    /// Connects and starts consuming.
    ///
    /// A failed first connection is retried with backoff, except for errors that retrying
    /// cannot fix (credentials, TLS files, a queue that exists with other arguments): those are
    /// thrown.
    package func start() throws {
        if !configuration.amqp.tls.verify {
            logger.warning(
                configuration.amqp.urls.contains(where: \.tls)
                    ? "INSECURE: amqp.tls.verify=false: the broker's certificate and host name are NOT checked; anyone on the network path can impersonate the broker and read the credentials and jobs"
                    : "amqp.tls.verify=false has no effect: no amqps:// broker URL is configured")
        }
        if configuration.http.port > 0 {
            healthServer = try HealthServer(
                host: configuration.http.host, port: configuration.http.port,
                probes: probes, logger: logger)
        }
        do throws(AMQPError) {
            try session.start(retrying: true)
        } catch  where error.code == .login || error.code == .tls {
            throw error
        } catch  where error.code == .channelClosed && error.replyCode == 406 {
            // A queue exists with other arguments (such as another type): no retry declares it.
            throw ConfigurationError(
                key: "queue.declare",
                problem: "the broker refuses to declare the topology as configured (\(error.message)); "
                    + "delete the queue, or set queue.declare=false to use it as it is")
        } catch  where error.code == .interrupted {
            // The session said so; the drain goes on.
        } catch {
            logger.warning("the broker is not reachable yet; retrying", metadata: ["error": "\(error)"])
        }
        startSummaryTimer()
        startDepthSampling()
        logger.info(
            "worker started",
            metadata: [
                "concurrency": "\(configuration.worker.concurrency)", "prefetch": "\(configuration.amqp.prefetch)",
                "queue": "\(configuration.queue.jobs)", "storage": "\(configuration.storage.kind.rawValue)",
                "adaptive_limits": "\(configuration.scheduler.adaptive)",
            ])
    }

    /// Drains and closes, as SIGTERM does; `completion` runs once with the exit status. Further
    /// calls while draining change nothing.
    package func shutdown(completion: @escaping @Sendable (Int32) -> Void) {
        control.async { [self] in
            guard !isDraining else { return }
            drainCompletion = completion
            modifyDrain { $0.shutdownRequested() }
        }
    }

    // MARK: - The drain (control queue)

    /// The drain's one entry: the state machine changes state under the lock, and the action runs
    /// after it, on the control queue.
    private func modifyDrain(_ event: (inout DrainStateMachine) -> DrainStateMachine.Action) {
        dispatchPrecondition(condition: .onQueue(control))
        perform(drain.withLock { event(&$0) })
    }

    private func perform(_ action: DrainStateMachine.Action) {
        dispatchPrecondition(condition: .onQueue(control))
        switch action {
        case .none:
            break
        case .stopConsumingAndWait:
            session.stopConsuming { [self] in control.async { self.modifyDrain { $0.consumerStopped() } } }
            let timeout = configuration.worker.drainTimeout
            // Waits on a queue of its own, so the channel queue keeps serving confirms and heartbeats.
            DispatchQueue.global().async { [self] in
                let drained = inFlight.wait(timeout: .now() + timeout) == .success
                control.async { self.modifyDrain { drained ? $0.jobsDrained() : $0.deadlinePassed() } }
            }
        case .handBackWaiting:
            session.queue.async { [self] in
                let count = dropWaitingJobs(nack: true)
                if count > 0 {
                    logger.info("handed back deliveries that were not admitted", metadata: ["count": "\(count)"])
                }
            }
        case .abortFetches:
            logger.warning(
                "drain timeout: aborting fetches still running",
                metadata: [
                    "in_flight": "\(stats.snapshot.inFlight)"
                ])
            fetchEngine.cancelAll()
            DispatchQueue.global().async { [self] in
                let drained = inFlight.wait(timeout: .now() + 5) == .success
                control.async { self.modifyDrain { drained ? $0.jobsDrained() : $0.abortGraceEnded() } }
            }
        case .close:
            summaryTimer?.cancel()
            depthTimer?.cancel()
            logSummary()
            if !session.close(deadline: .now() + Self.closeTimeout) {
                // Unacked deliveries go back to the queue when the process ends: nothing is lost.
                logger.error(
                    "the broker connection did not close in time (a write the broker does not read); exiting without it",
                    metadata: ["close_timeout_seconds": "\(Int(Self.closeTimeout))"]
                )
            }
            fetchEngine.shutdown()
            modifyDrain { $0.closed() }
        case .finish(let status):
            logger.info("drained; exiting")
            drainCompletion?(status)
            drainCompletion = nil
        }
    }

    /// Takes every job still waiting for admission out, to go back to the broker unanswered
    /// (nacked with requeue if `nack`, else left to a lost channel's redelivery); each ends its
    /// span as `aborted`, like a fetch aborted at the drain deadline, and leaves the group it held
    /// since admission took it in (docs/architecture.md). Channel queue; returns how many.
    private func dropWaitingJobs(nack: Bool) -> Int {
        let waiting = admission.takeAll()
        for context in waiting { run(context) { $0.takenBack(nack: nack) } }
        return waiting.count
    }

    // MARK: - JobBrokerDelegate (channel queue)

    package func brokerDelivered(_ delivery: Delivery) {
        stats.received()
        if isDraining {
            stats.handedBack()
            session.nackOnQueue(delivery, requeue: true)
            return
        }
        intake(delivery)
    }

    package func brokerRejectedUnread(_ delivery: Delivery, bodySize: UInt64) {
        // Over queue.max_job_bytes: the session rejected it to the dead-letter exchange unread.
        let error = policy.oversized(bodySize: bodySize)
        stats.received()
        stats.failed(error.code)
        stats.deadLettered()
        logger.warning("job over queue.max_job_bytes dead-lettered unread", metadata: ["error": "\(error.code)"])
    }

    package func brokerConnected(epoch: UInt64) {
        stats.metrics.connected.record(1)
        stats.metrics.connectionState(session.stateName)
        if epoch > 1 { stats.metrics.reconnects.increment() }
    }

    package func brokerLostConnection(_ error: AMQPError) {
        stats.metrics.connected.record(0)
        stats.metrics.connectionState(session.stateName)
        // Deliveries still waiting for admission belong to the dead channel: the broker redelivers
        // them, so they must not be worked on (their tags can never be acked).
        let dropped = dropWaitingJobs(nack: false)
        if dropped > 0 {
            logger.info(
                "dropped deliveries of the lost channel; the broker redelivers them", metadata: ["count": "\(dropped)"])
        }
    }

    package func brokerBlockedChanged(_ blocked: Bool) {
        stats.metrics.blocked.record(blocked ? 1 : 0)
        stats.metrics.connectionState(blocked ? "blocked" : session.stateName)
        admission.blockedChanged()
    }
}

extension JobRunner where Broker == BrokerSession, Fetcher == FetchEngine {
    /// Builds the worker from its configuration: the fetch engine, the sink, the session, then
    /// admission.
    package convenience init(configuration: WorkerConfiguration, logger: Logger) throws {
        let concurrency = configuration.worker.concurrency
        let workQueue = DispatchQueue(label: "image-fetch-worker.work", attributes: .concurrent)
        let policy = AddressPolicy(
            allowPrivateNetworks: configuration.fetch.allowPrivateNetworks,
            allowedNetworks: configuration.fetch.allowedNetworks.compactMap { CIDR($0) })
        let fetchEngine: FetchEngine
        do {
            fetchEngine = try FetchEngine(
                configuration: configuration.fetch,
                addressPolicy: { address in
                    // Unknown address families are refused: the guard only allows what it can judge.
                    guard let ip = IPAddress(sockaddr: address) else { return "non-IP" }
                    return policy.deniedClass(of: ip)
                }, maxConnections: concurrency, completionQueue: workQueue,
                maxWaitingBodies: FetchEngine.defaultMaxWaitingBodies,
                runBatch: { CompletionBatch.run($0) })
        } catch {
            throw StartupError(error.message)
        }
        let sink: any ImageSink
        switch configuration.storage.kind {
        case .file:
            sink = try FileSink(root: configuration.storage.path, fsync: configuration.storage.fsync)
        case .none:
            sink = NoneSink()
        case .s3:
            // Its own engine: uploads skip the address veto, so they must not share connections
            // with fetches. The semaphore is signalled only when the upload completes.
            sink = try S3Sink(settings: configuration.s3, fetch: configuration.fetch, maxConnections: concurrency)
        }
        try self.init(
            configuration: configuration, logger: logger,
            session: BrokerSession(configuration: configuration, logger: logger, delegate: nil),
            fetchEngine: fetchEngine, sink: sink, workQueue: workQueue)
    }
}
