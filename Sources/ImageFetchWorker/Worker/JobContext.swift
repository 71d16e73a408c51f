import Tracing

/// One job's state across the queues it passes through: its delivery, its decoded job, and its
/// ``JobLifecycle``, which says what it holds (the group, a permit, its origin's slot).
final class JobContext: @unchecked Sendable {
    // @unchecked Sendable: each `var` is written by one stage before the next stage is scheduled
    // (intake → admission → fetch completion → storage → publish → confirms on the channel queue),
    // so the queue hand-offs order every access.

    /// The delivery; from publish on, only what settling it needs (``dropContent()``).
    private(set) var delivery: Delivery
    /// The decoded job, nil for an invalid one; from publish on, kept only where settling uses it.
    private(set) var job: Job?
    var admittedAt: UInt64 = 0
    /// The checked URL, as libcurl is given it.
    var fetchURL: String?
    /// Set while the job leads a request that identical jobs may follow (``SharedFetches``).
    var sharedRequest: InFlightRequests<JobContext>.Key?
    /// Where the job is in its life, and so what it holds. Changed only through ``Worker/run(_:_:)``.
    var lifecycle = JobLifecycle()
    /// The job's W3C context and spans; its messages and log lines carry the context.
    let trace: JobTrace
    /// The span of its publishes, from publish until they are all answered.
    var publishSpan: (any Span)?

    init(delivery: Delivery, job: Job?, trace: JobTrace) {
        self.delivery = delivery
        self.job = job
        self.trace = trace
    }

    /// Keeps only what settling needs once the job's messages are out: the delivery's receipt
    /// (tag, epoch, arrival) and, for a redelivery or a fallback result, the job. Hundreds of jobs
    /// wait for their confirms at once; their bodies and properties need not wait with them.
    func dropContent(keepingJob: Bool) {
        // A leader gives its followers their way on before its own messages go out.
        assert(sharedRequest == nil, "a leader's followers were left behind")
        delivery = delivery.withoutContent
        if !keepingJob, job?.redelivered != true { job = nil }
        fetchURL = nil
    }
}
