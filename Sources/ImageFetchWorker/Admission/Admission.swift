import Dispatch
import Foundation
import Synchronization

/// Runs the ``OriginScheduler`` against the global semaphore: the only place that waits on it.
///
/// Jobs come in from the channel queue (``submit(_:origin:)``) and wait in the scheduler. One pump
/// on the serial admission queue takes a permit whenever some origin may start a job, then asks the
/// scheduler which job gets it. A finished fetch (``finished(_:outcome:)``), the end of a pause and
/// a new job each wake the pump; it sleeps when nothing can start, so an idle worker uses no CPU.
/// While jobs wait, a timer sweeps the window every ``sweepInterval`` for jobs to defer.
///
/// A job holds the group `inFlight` from the moment it is submitted: admission enters it before
/// the job reaches the scheduler, and hands the membership on with the job, to ``Handlers/start``,
/// to ``Handlers/deferJob``, or to the caller of ``takeAll()``, who leaves it once the delivery is
/// handed back. So a drain's wait on the group cannot end while a job still waits here, or while
/// one is between the scheduler and its handler (issue 33, defect 7).
package final class Admission<Element: Sendable>: Sendable {
    package typealias Ticket = OriginScheduler<Element>.Start
    package typealias Event = OriginScheduler<Element>.Event

    /// What admission calls out to; each runs without admission's lock held.
    package struct Handlers: Sendable {
        /// On the admission queue, with a global permit taken; the job holds the group.
        package var start: @Sendable (Ticket) -> Void
        /// The job (holding the group) leaves the window (deferral), for at least this long, and why.
        package var deferJob: @Sendable (Element, Origin, Double?, OriginScheduler<Element>.DeferralReason) -> Void
        /// Limit cuts and pauses, for logs and metrics.
        package var events: @Sendable ([Event]) -> Void

        package init(
            start: @escaping @Sendable (Ticket) -> Void,
            deferJob:
                @escaping @Sendable (
                    Element, Origin, Double?,
                    OriginScheduler<Element>.DeferralReason
                ) -> Void,
            events: @escaping @Sendable ([Event]) -> Void
        ) {
            self.start = start
            self.deferJob = deferJob
            self.events = events
        }
    }

    private let queue = DispatchQueue(label: "image-fetch-worker.admission")
    private let timerQueue = DispatchQueue(label: "image-fetch-worker.admission-timer")
    private let semaphore: DispatchSemaphore
    private let inFlight: DispatchGroup
    private let scheduler: Mutex<OriginScheduler<Element>>
    private let handlers: Handlers
    private let clock: @Sendable () -> UInt64
    private let pumpScheduled = Atomic<Bool>(false)
    /// Set while the pump waits on the semaphore: the permit that a finished job gives back then
    /// wakes it, and a kick would only queue a second pass behind it.
    private let pumpWaitsForPermit = Atomic<Bool>(false)
    private let timerArmed = Atomic<Bool>(false)
    /// Whether the broker blocks publishing (`connection.blocked`): nothing is admitted then. Read,
    /// not kept: the broker session holds the one copy (issue 33, defect 1 came from a second).
    private let isBlocked: @Sendable () -> Bool
    /// Jobs that share another job's fetch (docs/architecture.md, "Shared fetches"): outside the
    /// scheduler's queues but in the prefetch window, so the window's rules count them. Read, not
    /// kept: the shared-fetch table holds the one count.
    private let followers: @Sendable () -> Int
    private let sweepInterval: DispatchTimeInterval
    /// Passes of the pump, for the tests of the kicks it is spared.
    private let pumpPasses = Atomic<Int>(0)
    /// The opt-in per-tenant metrics (`metrics.tenants`); nil costs nothing per job.
    private let tenantMetrics: TenantMetrics?

    package init(
        settings: OriginScheduler<Element>.Settings, semaphore: DispatchSemaphore, inFlight: DispatchGroup,
        sweepInterval: DispatchTimeInterval = .milliseconds(200),
        clock: @escaping @Sendable () -> UInt64 = { DispatchTime.now().uptimeNanoseconds },
        jitter: @escaping @Sendable () -> Double = { Double.random(in: 0..<1) },
        tenantMetrics: TenantMetrics? = nil,
        isBlocked: @escaping @Sendable () -> Bool = { false },
        followers: @escaping @Sendable () -> Int = { 0 },
        handlers: Handlers
    ) {
        self.tenantMetrics = tenantMetrics
        self.scheduler = Mutex(OriginScheduler(settings: settings, jitter: jitter))
        self.semaphore = semaphore
        self.inFlight = inFlight
        self.sweepInterval = sweepInterval
        self.clock = clock
        self.isBlocked = isBlocked
        self.followers = followers
        self.handlers = handlers
    }

    // MARK: - Events in

    /// A job for `origin` arrived (channel queue), of `tenant` (nil: the default tenant);
    /// `deferredBefore` when it carries `x-deferrals`. From here on it holds the group.
    package func submit(_ element: Element, origin: Origin, tenant: String? = nil, deferredBefore: Bool = false) {
        inFlight.enter()
        let now = clock()
        let followers = followers()
        if let deferral = scheduler.withLock({
            $0.followers = followers
            return $0.enqueue(element, origin: origin, tenant: tenant, now: now, deferredBefore: deferredBefore)
        }) {
            handlers.deferJob(deferral.element, deferral.origin, deferral.atLeastSeconds, deferral.reason)
            return
        }
        kick()
        armTimer()
    }

    /// A fetch started by admission ended: its origin's slot is free, and the outcome adapts the limit.
    package func finished(_ slot: OriginSlot, outcome: OriginScheduler<Element>.FetchOutcome) {
        let now = clock()
        let (events, waiting) = scheduler.withLock { ($0.finished(slot, outcome: outcome, now: now), $0.waitingCount) }
        // The freed origin slot matters only to a waiting job. With none, a kick would wake a
        // thread for nothing, once per job whenever the worker keeps up with its deliveries.
        if waiting > 0, !pumpWaitsForPermit.load(ordering: .acquiring) { kick() }
        if !events.isEmpty { handlers.events(events) }
    }

    /// The broker blocked or unblocked publishing: `isBlocked` says which. The pump reads it
    /// before each start and sleeps while it is true; this wakes it to read it again.
    package func blockedChanged() {
        kick()
    }

    /// Every waiting job, taken out (a drain hands them back). Each still holds the group: the
    /// caller leaves it for each, once it has handed the delivery back.
    package func takeAll() -> [Element] {
        scheduler.withLock { $0.takeAll() }
    }

    /// The last sample of the jobs queue: how many jobs are ready behind the window.
    package func queueSampled(ready: Int) {
        scheduler.withLock { $0.queueBehind = ready > 0 }
    }

    // MARK: - Observation

    package func busiest(_ count: Int) -> [OriginScheduler<Element>.OriginSnapshot] {
        let now = clock()
        return scheduler.withLock { $0.busiest(count, now: now) }
    }

    package func gauges() -> (known: Int, paused: Int, limits: [(limit: Int, origins: Int)], waiting: Int) {
        let now = clock()
        return scheduler.withLock { state in
            let gauges = state.gauges(now: now)
            return (gauges.known, gauges.paused, gauges.limits, state.waitingCount)
        }
    }

    /// Each known tenant's running and waiting jobs (the default tenant first), for the opt-in
    /// per-tenant metrics.
    package func tenants() -> [(tenant: String, inFlight: Int, waiting: Int)] {
        scheduler.withLock { $0.tenants.snapshot() }
    }

    // MARK: - The pump (admission queue)

    private func kick() {
        guard !pumpScheduled.exchange(true, ordering: .acquiringAndReleasing) else { return }
        queue.async { self.pump() }
    }

    /// How many times the pump has run.
    package var pumpRuns: Int { pumpPasses.load(ordering: .relaxed) }

    private func pump() {
        _ = pumpPasses.add(1, ordering: .relaxed)
        pumpScheduled.store(false, ordering: .releasing)
        while true {
            // Blocked: sleep; the unblock (or a lost connection, which clears it) kicks again.
            guard !isBlocked() else { return }
            guard scheduler.withLock({ $0.hasStartable(now: clock()) }) else { return }
            pumpWaitsForPermit.store(true, ordering: .releasing)
            semaphore.wait()
            pumpWaitsForPermit.store(false, ordering: .releasing)
            // A block that came during the wait: the unblock kicks the pump again.
            guard !isBlocked() else {
                semaphore.signal()
                return
            }
            let now = clock()
            guard let ticket = scheduler.withLock({ $0.next(now: now) }) else {
                semaphore.signal()
                continue
            }
            if let tenantMetrics {
                // The slot stays the tenant's while its job runs, so the name is still its own here.
                tenantMetrics.started(
                    ticket.tenant == 0 ? nil : scheduler.withLock { $0.tenants.name(of: ticket.tenant) })
            }
            handlers.start(ticket)
        }
    }

    // MARK: - The sweep timer

    /// Runs the sweep while jobs wait; a worker with nothing waiting has no timer.
    private func armTimer() {
        guard !timerArmed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        timerQueue.asyncAfter(deadline: .now() + sweepInterval) { self.tick() }
    }

    private func tick() {
        timerArmed.store(false, ordering: .releasing)
        let now = clock()
        let followers = followers()
        let (deferred, waiting, pauseEnded) = scheduler.withLock { state in
            state.followers = followers
            let deferred = state.sweep(now: now)
            return (deferred, state.waitingCount, state.hasStartable(now: now))
        }
        for deferral in deferred {
            handlers.deferJob(deferral.element, deferral.origin, deferral.atLeastSeconds, deferral.reason)
        }
        if pauseEnded { kick() }
        if waiting > 0 { armTimer() }
    }
}
