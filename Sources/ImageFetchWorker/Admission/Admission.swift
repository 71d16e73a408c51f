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
/// The group `inFlight` is entered *before* a job leaves the scheduler, and left again if none
/// does: a drain that takes the waiting jobs and then waits on the group can never miss a job that
/// is between the two.
package final class Admission<Element: Sendable>: Sendable {
    package typealias Ticket = OriginScheduler<Element>.Start
    package typealias Event = OriginScheduler<Element>.Event

    /// What admission calls out to; each runs without admission's lock held.
    package struct Handlers: Sendable {
        /// On the admission queue, with a global permit taken and the group entered.
        package var start: @Sendable (Ticket) -> Void
        /// With the group entered: the job leaves the window (deferral), for at least this long.
        package var deferJob: @Sendable (Element, Origin, Double?) -> Void
        /// Limit cuts and pauses, for logs and metrics.
        package var events: @Sendable ([Event]) -> Void

        package init(start: @escaping @Sendable (Ticket) -> Void,
                     deferJob: @escaping @Sendable (Element, Origin, Double?) -> Void,
                     events: @escaping @Sendable ([Event]) -> Void) {
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
    /// Set while the broker blocks publishing (`connection.blocked`): nothing is admitted.
    private let blocked: Mutex<Bool> = Mutex(false)
    private let unblocked = DispatchSemaphore(value: 0)
    private let sweepInterval: DispatchTimeInterval

    package init(settings: OriginScheduler<Element>.Settings, semaphore: DispatchSemaphore, inFlight: DispatchGroup,
                 sweepInterval: DispatchTimeInterval = .milliseconds(200),
                 clock: @escaping @Sendable () -> UInt64 = { DispatchTime.now().uptimeNanoseconds },
                 handlers: Handlers) {
        self.scheduler = Mutex(OriginScheduler(settings: settings))
        self.semaphore = semaphore
        self.inFlight = inFlight
        self.sweepInterval = sweepInterval
        self.clock = clock
        self.handlers = handlers
    }

    // MARK: - Events in

    /// A job for `origin` arrived (channel queue).
    package func submit(_ element: Element, origin: Origin) {
        let now = clock()
        if let deferral = scheduler.withLock({ $0.enqueue(element, origin: origin, now: now) }) {
            inFlight.enter()
            handlers.deferJob(deferral.element, deferral.origin, deferral.atLeastSeconds)
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

    /// The broker blocked or unblocked publishing.
    package func setBlocked(_ isBlocked: Bool) {
        let wasBlocked = blocked.withLock { value in
            defer { value = isBlocked }
            return value
        }
        if wasBlocked, !isBlocked { unblocked.signal() }
        if !isBlocked { kick() }
    }

    /// Every waiting job, taken out (a drain hands them back).
    package func takeAll() -> [Element] {
        scheduler.withLock { $0.takeAll() }
    }

    // MARK: - Observation

    package func busiest(_ count: Int) -> [OriginScheduler<Element>.OriginSnapshot] {
        let now = clock()
        return scheduler.withLock { $0.busiest(count, now: now) }
    }

    package func gauges() -> (known: Int, paused: Int, limits: [Int], waiting: Int) {
        let now = clock()
        return scheduler.withLock { state in
            let gauges = state.gauges(now: now)
            return (gauges.known, gauges.paused, gauges.limits, state.waitingCount)
        }
    }

    // MARK: - The pump (admission queue)

    private func kick() {
        guard !pumpScheduled.exchange(true, ordering: .acquiringAndReleasing) else { return }
        queue.async { self.pump() }
    }

    private func pump() {
        pumpScheduled.store(false, ordering: .releasing)
        while true {
            waitWhileBlocked()
            guard scheduler.withLock({ $0.hasStartable(now: clock()) }) else { return }
            pumpWaitsForPermit.store(true, ordering: .releasing)
            semaphore.wait()
            pumpWaitsForPermit.store(false, ordering: .releasing)
            guard let ticket = Self.takeNext(enter: inFlight.enter, leave: inFlight.leave, next: {
                let now = clock()
                return scheduler.withLock { $0.next(now: now) }
            }) else {
                semaphore.signal()
                continue
            }
            handlers.start(ticket)
        }
    }

    /// Enters the group, then takes the next job; leaves the group if there is none. In this order
    /// a drain that empties the scheduler and then waits on the group cannot miss the job.
    static func takeNext<T>(enter: () -> Void, leave: () -> Void, next: () -> T?) -> T? {
        enter()
        guard let taken = next() else {
            leave()
            return nil
        }
        return taken
    }

    private func waitWhileBlocked() {
        while blocked.withLock({ $0 }) {
            unblocked.wait()
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
        let (deferred, waiting, pauseEnded) = scheduler.withLock { state in
            let deferred = state.sweep(now: now)
            return (deferred, state.waitingCount, state.hasStartable(now: now))
        }
        for deferral in deferred {
            inFlight.enter()
            handlers.deferJob(deferral.element, deferral.origin, deferral.atLeastSeconds)
        }
        if pauseEnded { kick() }
        if waiting > 0 { armTimer() }
    }
}
