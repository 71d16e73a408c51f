@testable import ImageFetchWorker

/// A deterministic run of an ``OriginScheduler`` on a fake clock, as the worker drives it: the
/// broker keeps the prefetch window full from a job stream, admission starts jobs while global
/// permits are free, fetches end after their origin's delay, the sweep runs every 200 ms, and a
/// deferred job comes back after a second, as from the first delay queue.
struct SchedulerSimulation {
    static let ms: UInt64 = 1_000_000

    struct Job {
        var id: Int
        var origin: Int
        var deferrals = 0
    }

    var scheduler: OriginScheduler<Job>
    let origins: [Origin]
    let concurrency: Int
    let window: Int
    /// The fetch time of a job of each origin at a time.
    let delay: (_ origin: Int, _ now: UInt64) -> UInt64
    /// The origin of the n-th job of the stream.
    let stream: (_ index: Int) -> Int
    var now: UInt64 = 0
    var running: [(end: UInt64, slot: OriginSlot, fails: Bool)] = []
    /// Deferred jobs in the order they come back (each after the same delay), and the next one's index.
    var returning: [(at: UInt64, job: Job)] = []
    var nextReturning = 0
    var published = 0
    var completed = 0
    /// Deferrals by origin index.
    var deferred: [Int: Int] = [:]
    var deferredJobs = Set<Int>()
    /// When set, the worker's CPU runs this many fetches at full speed: with more running, each new
    /// fetch takes its origin's delay times `running ÷ capacity`, as on a saturated machine, where
    /// every origin looks slower at once.
    var capacity: Int?
    /// When set and true for a fetch's origin at its start, the fetch ends after its delay as a
    /// failed connection (a timeout), not a response.
    var failing: ((_ origin: Int, _ now: UInt64) -> Bool)?
    /// The outcome of a failing fetch of that duration.
    var failure: (_ durationNanoseconds: UInt64) -> OriginScheduler<Job>.FetchOutcome = {
        .connectFailure(durationNanoseconds: $0)
    }
    /// Completed fetches by origin index.
    var completedBy: [Int: Int] = [:]

    init(
        origins: Int, concurrency: Int, window: Int, settings: ((inout OriginScheduler<Job>.Settings) -> Void)? = nil,
        delay: @escaping (Int, UInt64) -> UInt64, stream: @escaping (Int) -> Int
    ) {
        var schedulerSettings = OriginScheduler<Job>.Settings(
            limiter: .init(minLimit: 1, maxLimit: concurrency, initialLimit: 8), window: window)
        settings?(&schedulerSettings)
        self.scheduler = OriginScheduler(settings: schedulerSettings, jitter: { 0.5 })
        self.origins = (0..<origins).map { Origin(scheme: "https", host: "o\($0).example", port: 443) }
        self.concurrency = concurrency
        self.window = window
        self.delay = delay
        self.stream = stream
    }

    var held: Int { scheduler.waitingCount + scheduler.inFlightCount }
    var totalDeferrals: Int { deferred.values.reduce(0, +) }

    /// Runs in 1 ms steps until `until` (nanoseconds).
    mutating func run(until: UInt64) {
        while now < until {
            now += Self.ms
            step()
        }
    }

    private mutating func step() {
        var index = 0
        while index < running.count {
            if running[index].end <= now {
                let (_, slot, fails) = running.remove(at: index)
                let duration = now - slot.startedAt
                _ = scheduler.finished(
                    slot,
                    outcome: fails
                        ? failure(duration)
                        : .response(
                            status: 200, latencyNanoseconds: duration,
                            durationNanoseconds: duration, retryAfterSeconds: nil),
                    now: now)
                completed += 1
                if let origin = origins.firstIndex(of: slot.origin) { completedBy[origin, default: 0] += 1 }
            } else {
                index += 1
            }
        }
        // The broker fills the window: jobs back from the delay queue first, then the stream.
        while held < window {
            if nextReturning < returning.count, returning[nextReturning].at <= now {
                nextReturning += 1
                arrive(returning[nextReturning - 1].job)
            } else {
                let job = Job(id: published, origin: stream(published))
                published += 1
                arrive(job)
            }
        }
        while running.count < concurrency, let start = scheduler.next(now: now) {
            var duration = delay(start.element.origin, now)
            if let capacity, running.count > capacity { duration = duration * UInt64(running.count) / UInt64(capacity) }
            running.append((now + duration, start.slot, failing?(start.element.origin, now) ?? false))
        }
        if now % (200 * Self.ms) == 0 {
            for deferral in scheduler.sweep(now: now) { leave(deferral.element) }
        }
    }

    private mutating func arrive(_ job: Job) {
        if let deferral = scheduler.enqueue(
            job, origin: origins[job.origin], now: now,
            deferredBefore: job.deferrals > 0)
        {
            leave(deferral.element)
        }
    }

    private mutating func leave(_ job: Job) {
        var job = job
        job.deferrals += 1
        deferred[job.origin, default: 0] += 1
        deferredJobs.insert(job.id)
        returning.append((now + 1_000 * Self.ms, job))
    }
}

/// A small deterministic generator (SimulationRandom), for the job streams.
struct SimulationRandom {
    var state: UInt64

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A number in [0, 1).
    mutating func unit() -> Double { Double(next() >> 11) / Double(1 << 53) }
}
