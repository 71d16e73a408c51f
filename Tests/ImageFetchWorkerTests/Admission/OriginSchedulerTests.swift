import Testing

@testable import ImageFetchWorker

@Suite struct OriginSchedulerTests {
    static let ms: UInt64 = 1_000_000
    static let a = Origin(scheme: "https", host: "a.example", port: 443)
    static let b = Origin(scheme: "https", host: "b.example", port: 443)
    static let c = Origin(scheme: "http", host: "c.example", port: 8080)

    static func scheduler(concurrency: Int = 32, initial: Int? = nil, window: Int = 64) -> OriginScheduler<String> {
        OriginScheduler(
            settings: .init(
                limiter: .init(minLimit: 1, maxLimit: concurrency, initialLimit: initial ?? concurrency), window: window
            ),
            jitter: { 0.5 })
    }

    /// Takes up to `permits` jobs, as admission does with that many free global permits.
    static func take(
        _ scheduler: inout OriginScheduler<String>, _ permits: Int, now: UInt64 = 0
    ) -> [OriginScheduler<String>.Start] {
        var started: [OriginScheduler<String>.Start] = []
        while started.count < permits, let start = scheduler.next(now: now) { started.append(start) }
        return started
    }

    static func ok(_ latency: UInt64 = 10_000_000) -> OriginScheduler<String>.FetchOutcome {
        .response(status: 200, latencyNanoseconds: latency, durationNanoseconds: latency, retryAfterSeconds: nil)
    }

    @Test func anOriginAloneUsesEveryPermit() {
        var scheduler = Self.scheduler()
        for index in 0..<100 { #expect(scheduler.enqueue("a\(index)", origin: Self.a, now: 0) == nil) }
        let started = Self.take(&scheduler, 32)
        #expect(started.count == 32)
        #expect(started.map(\.element) == (0..<32).map { "a\($0)" })
        #expect(scheduler.next(now: 0) == nil)  // its limit is the concurrency
        #expect(scheduler.waitingCount == 68)
    }

    @Test func waitingOriginsShareThePermitsEvenly() {
        var scheduler = Self.scheduler()
        // A's jobs arrive first, and many more of them.
        for index in 0..<100 { _ = scheduler.enqueue("a\(index)", origin: Self.a, now: 0) }
        for index in 0..<20 { _ = scheduler.enqueue("b\(index)", origin: Self.b, now: 0) }
        let started = Self.take(&scheduler, 32)
        #expect(started.filter { $0.origin == Self.a }.count == 16)
        #expect(started.filter { $0.origin == Self.b }.count == 16)
        // A freed permit goes to the origin with the fewest running.
        let finished = started.first { $0.origin == Self.a }!
        _ = scheduler.finished(finished.slot, outcome: Self.ok(), now: 1)
        #expect(scheduler.next(now: 1)?.origin == Self.a)
    }

    @Test func sharesAreMaxMinFair() {
        var scheduler = Self.scheduler(concurrency: 30)
        for index in 0..<50 {
            _ = scheduler.enqueue("a\(index)", origin: Self.a, now: 0)
            _ = scheduler.enqueue("b\(index)", origin: Self.b, now: 0)
        }
        for index in 0..<4 { _ = scheduler.enqueue("c\(index)", origin: Self.c, now: 0) }
        let started = Self.take(&scheduler, 30)
        // C wants only four; A and B split the rest.
        #expect(started.filter { $0.origin == Self.c }.count == 4)
        #expect(started.filter { $0.origin == Self.a }.count == 13)
        #expect(started.filter { $0.origin == Self.b }.count == 13)
    }

    @Test func anOriginNeverExceedsItsLimit() {
        var scheduler = Self.scheduler(initial: 4)
        for index in 0..<10 { _ = scheduler.enqueue("a\(index)", origin: Self.a, now: 0) }
        #expect(Self.take(&scheduler, 32).count == 4)
    }

    @Test func retryAfterPausesTheOriginForThatLong() {
        var scheduler = Self.scheduler()
        for index in 0..<10 { _ = scheduler.enqueue("a\(index)", origin: Self.a, now: 0) }
        let first = Self.take(&scheduler, 1)[0]
        let events = scheduler.finished(
            first.slot,
            outcome: .response(
                status: 503, latencyNanoseconds: Self.ms,
                durationNanoseconds: Self.ms, retryAfterSeconds: 3),
            now: 10 * Self.ms)
        #expect(events.contains(.paused(Self.a, seconds: 3)))
        #expect(scheduler.hasStartable(now: 3_009 * Self.ms) == false)
        #expect(scheduler.next(now: 3_009 * Self.ms) == nil)
        #expect(scheduler.nextPauseEnd(now: 20 * Self.ms) == 3_010 * Self.ms)
        #expect(scheduler.next(now: 3_010 * Self.ms) != nil)
    }

    @Test func aRefusalWithoutRetryAfterCutsTheLimitAndBacksOff() {
        var scheduler = Self.scheduler(initial: 16)
        for index in 0..<40 { _ = scheduler.enqueue("a\(index)", origin: Self.a, now: 0) }
        let started = Self.take(&scheduler, 32)
        #expect(started.count == 16)
        let events = scheduler.finished(
            started[12].slot,
            outcome: .response(
                status: 429, latencyNanoseconds: Self.ms,
                durationNanoseconds: Self.ms, retryAfterSeconds: nil),
            now: Self.ms)
        // The first step of the backoff: 1 s, of which the upper half is jitter (0.5 here).
        #expect(
            events == [
                .limitCut(Self.a, OriginLimiter.Cut(from: 16, to: 8, signal: .tooManyRequests)),
                .backedOff(Self.a, seconds: 0.75),
            ])
        #expect(scheduler.hasStartable(now: Self.ms) == false)  // 15 running over a limit of 8, and paused
        #expect(scheduler.isPaused(Self.a, now: 750 * Self.ms))
        #expect(!scheduler.isPaused(Self.a, now: 751 * Self.ms))
    }

    @Test func aBusyOriginsJobsLeaveTheWindowWhenAnotherOriginIsActive() {
        var scheduler = Self.scheduler(concurrency: 8, window: 16)
        // A slow origin (2 s a fetch) with all eight permits and a queue.
        for index in 0..<16 { _ = scheduler.enqueue("a\(index)", origin: Self.a, now: 0) }
        let started = Self.take(&scheduler, 8)
        _ = scheduler.finished(started[0].slot, outcome: Self.ok(2_000 * Self.ms), now: 2_000 * Self.ms)
        _ = Self.take(&scheduler, 1, now: 2_000 * Self.ms)
        // Alone, nothing waits behind it: nothing leaves.
        #expect(scheduler.sweep(now: 2_001 * Self.ms).isEmpty)
        // Another origin shows up: A holds more than its share of the window, and its last jobs
        // would wait longer than a second.
        _ = scheduler.enqueue("b0", origin: Self.b, now: 2_002 * Self.ms)
        let deferred = scheduler.sweep(now: 2_003 * Self.ms)
        #expect(!deferred.isEmpty)
        #expect(deferred.allSatisfy { $0.origin == Self.a && $0.atLeastSeconds == nil })
        #expect(deferred.first?.element == "a15")  // newest first
        // B's job is not deferred: it can start at once.
        #expect(scheduler.next(now: 2_004 * Self.ms)?.origin == Self.b)
    }

    /// Admission reads its clock before it takes the scheduler's lock, so a sweep can carry a time
    /// a little before that of a start another thread made first. Failed before the fix: the sweep's
    /// time minus the start's wrapped round to 584 years of fetching, and a new origin's burst
    /// left the window as slow.
    @Test func aSweepWithATimeBeforeTheLastStartDefersNothing() {
        var scheduler = Self.scheduler(concurrency: 8, window: 16)
        for index in 0..<8 { _ = scheduler.enqueue("b\(index)", origin: Self.b, now: 1_000 * Self.ms) }
        _ = Self.take(&scheduler, 4, now: 1_000 * Self.ms)
        for index in 0..<12 { #expect(scheduler.enqueue("a\(index)", origin: Self.a, now: 1_000 * Self.ms) == nil) }
        #expect(Self.take(&scheduler, 1, now: 1_002 * Self.ms).first?.origin == Self.a)
        #expect(scheduler.sweep(now: 1_001 * Self.ms).isEmpty)
        #expect(scheduler.sweep(now: 1_003 * Self.ms).isEmpty)
    }

    @Test func aPausedOriginsNewJobsLeaveOnceTheWindowIsHalfFullAndOthersAreActive() {
        var scheduler = Self.scheduler(concurrency: 4, window: 8)
        _ = scheduler.enqueue("b0", origin: Self.b, now: 0)
        _ = scheduler.enqueue("a0", origin: Self.a, now: 0)
        let started = Self.take(&scheduler, 2)
        let aStart = started.first { $0.origin == Self.a }!
        _ = scheduler.finished(
            aStart.slot,
            outcome: .response(
                status: 429, latencyNanoseconds: Self.ms,
                durationNanoseconds: Self.ms, retryAfterSeconds: 30), now: Self.ms)
        _ = scheduler.sweep(now: Self.ms)
        // While the window has room the broker can deliver B's jobs anyway: A's stay.
        for index in 1...3 { #expect(scheduler.enqueue("a\(index)", origin: Self.a, now: 2 * Self.ms) == nil) }
        // Half full (B's running job and A's three), a job for the paused origin leaves, for at
        // least the rest of the pause.
        let deferral = scheduler.enqueue("a4", origin: Self.a, now: 2 * Self.ms)
        #expect(deferral?.element == "a4")
        #expect(deferral?.reason == .paused)
        #expect((deferral?.atLeastSeconds ?? 0) > 29.9)
        // …and the sweep gives up those that waited, newest first, until the window is less than
        // half full again.
        #expect(scheduler.sweep(now: 3 * Self.ms).map(\.element) == ["a3"])
    }

    @Test func aDrainTakesEveryWaitingJob() {
        var scheduler = Self.scheduler(initial: 1)
        for index in 0..<3 {
            _ = scheduler.enqueue("a\(index)", origin: Self.a, now: 0)
            _ = scheduler.enqueue("b\(index)", origin: Self.b, now: 0)
        }
        _ = Self.take(&scheduler, 2)
        #expect(Set(scheduler.takeAll()) == ["a1", "a2", "b1", "b2"])
        #expect(scheduler.waitingCount == 0)
        #expect(scheduler.next(now: 0) == nil)
        #expect(scheduler.inFlightCount == 2)
    }

    @Test func idleOriginsAreForgotten() {
        var scheduler = Self.scheduler()
        _ = scheduler.enqueue("a0", origin: Self.a, now: 0)
        let start = Self.take(&scheduler, 1)[0]
        _ = scheduler.finished(start.slot, outcome: Self.ok(), now: Self.ms)
        _ = scheduler.sweep(now: 2 * Self.ms)
        #expect(scheduler.gauges(now: 2 * Self.ms).known == 1)
        _ = scheduler.sweep(now: 301_000 * Self.ms)
        #expect(scheduler.gauges(now: 301_000 * Self.ms).known == 0)
    }

    @Test func busiestListsOriginsByWork() {
        var scheduler = Self.scheduler(initial: 1)
        for index in 0..<3 { _ = scheduler.enqueue("a\(index)", origin: Self.a, now: 0) }
        _ = scheduler.enqueue("b0", origin: Self.b, now: 0)
        let report = scheduler.busiest(1, now: 0)
        #expect(report.map(\.origin) == [Self.a])
        #expect(report.first?.waiting == 3)
        #expect(report.first?.slowStart == true)
    }
}
