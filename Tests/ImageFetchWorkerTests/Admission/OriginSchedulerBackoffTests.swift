import Synchronization
import Testing

@testable import ImageFetchWorker

/// A 429 or 503 without `Retry-After` (issue 31, §6): the origin pauses with an exponential
/// backoff, half of it jitter from the injected source, up to a cap, and its limit is cut too.
@Suite struct OriginSchedulerBackoffTests {
    static let ms: UInt64 = 1_000_000
    static let (a, b) = (OriginSchedulerTests.a, OriginSchedulerTests.b)

    /// A jitter source that hands out `values` in turn (the last repeating), and counts its calls.
    final class Jitter: Sendable {
        private let state: Mutex<(values: [Double], calls: Int)>
        init(_ values: [Double]) { state = Mutex((values, 0)) }
        func next() -> Double {
            state.withLock { state in
                defer { state.calls += 1 }
                return state.values[min(state.calls, state.values.count - 1)]
            }
        }
        var calls: Int { state.withLock { $0.calls } }
    }

    static func scheduler(_ jitter: Jitter, concurrency: Int = 8) -> OriginScheduler<String> {
        var settings = OriginScheduler<String>.Settings(
            limiter: .init(minLimit: 1, maxLimit: concurrency, initialLimit: concurrency), window: 64)
        settings.overloadPauseNanoseconds = 1_000 * ms
        settings.maxOverloadPauseNanoseconds = 8_000 * ms
        return OriginScheduler(settings: settings, jitter: { jitter.next() })
    }

    static func refused(_ status: Int = 429, retryAfter: Double? = nil) -> OriginScheduler<String>.FetchOutcome {
        .response(status: status, latencyNanoseconds: ms, durationNanoseconds: ms, retryAfterSeconds: retryAfter)
    }

    /// Starts one job of `origin` at `now` and lets it be refused at `now + 1 ms`; the events.
    static func refuseOne(
        _ scheduler: inout OriginScheduler<String>, _ origin: Origin, now: UInt64,
        status: Int = 429, retryAfter: Double? = nil
    ) -> [OriginScheduler<String>.Event] {
        _ = scheduler.enqueue("job", origin: origin, now: now)
        guard let start = scheduler.next(now: now) else { return [] }
        return scheduler.finished(start.slot, outcome: refused(status, retryAfter: retryAfter), now: now + ms)
    }

    static func pauses(_ events: [OriginScheduler<String>.Event]) -> [Double] {
        events.compactMap { if case .backedOff(_, let seconds) = $0 { seconds } else { nil } }
    }

    @Test func eachRefusalDoublesThePauseUpToTheCap() {
        let jitter = Jitter([0.5])
        var scheduler = Self.scheduler(jitter)
        var now: UInt64 = 0
        var pauses: [Double] = []
        for _ in 0..<6 {
            let events = Self.refuseOne(&scheduler, Self.a, now: now)
            pauses += Self.pauses(events)
            // The next request goes out when the pause is over.
            now += 60_000 * Self.ms
        }
        // Half of each step is fixed, the other half scaled by the jitter (0.5 here): 1, 2, 4, 8, 8, 8 s.
        #expect(pauses == [0.75, 1.5, 3, 6, 6, 6])
        #expect(jitter.calls == 6)
    }

    @Test func theJitterSpreadsThePauseOverItsUpperHalf() {
        for (random, expected) in [(0.0, 0.5), (0.75, 0.875)] {
            var scheduler = Self.scheduler(Jitter([random]))
            let events = Self.refuseOne(&scheduler, Self.a, now: 0)
            #expect(Self.pauses(events) == [expected])
            #expect(scheduler.isPaused(Self.a, now: Self.ms + UInt64(expected * 1e9) - 1))
            #expect(!scheduler.isPaused(Self.a, now: Self.ms + UInt64(expected * 1e9)))
        }
    }

    @Test func aRefusalAlsoCutsTheLimitAndPausesOnlyItsOrigin() {
        var scheduler = Self.scheduler(Jitter([0]))
        for index in 0..<8 {
            _ = scheduler.enqueue("a\(index)", origin: Self.a, now: 0)
            _ = scheduler.enqueue("b\(index)", origin: Self.b, now: 0)
        }
        let started = OriginSchedulerTests.take(&scheduler, 16)
        let refused = started.first { $0.origin == Self.a }!
        let events = scheduler.finished(refused.slot, outcome: Self.refused(503), now: Self.ms)
        #expect(events.contains { if case .limitCut(Self.a, _) = $0 { true } else { false } })
        #expect(Self.pauses(events) == [0.5])
        #expect(scheduler.isPaused(Self.a, now: 2 * Self.ms))
        #expect(!scheduler.isPaused(Self.b, now: 2 * Self.ms))
        // B's next job starts; A's waits out the pause.
        _ = scheduler.enqueue("a8", origin: Self.a, now: 2 * Self.ms)
        _ = scheduler.enqueue("b8", origin: Self.b, now: 2 * Self.ms)
        let bDone = started.first { $0.origin == Self.b }!
        _ = scheduler.finished(bDone.slot, outcome: OriginSchedulerTests.ok(), now: 3 * Self.ms)
        #expect(scheduler.next(now: 3 * Self.ms)?.origin == Self.b)
        #expect(scheduler.next(now: 3 * Self.ms) == nil)
    }

    @Test func refusalsOfRequestsSentBeforeThePauseAreTheSameEvent() {
        let jitter = Jitter([0.5])
        var scheduler = Self.scheduler(jitter)
        for index in 0..<4 { _ = scheduler.enqueue("a\(index)", origin: Self.a, now: 0) }
        let started = OriginSchedulerTests.take(&scheduler, 4)
        var pauses: [Double] = []
        for (offset, start) in started.enumerated() {
            let now = UInt64(offset + 1) * Self.ms
            pauses += Self.pauses(scheduler.finished(start.slot, outcome: Self.refused(), now: now))
        }
        #expect(pauses == [0.75])
        #expect(jitter.calls == 1)
    }

    @Test func aSuccessStartsTheBackoffOver() {
        var scheduler = Self.scheduler(Jitter([0.5]))
        #expect(Self.pauses(Self.refuseOne(&scheduler, Self.a, now: 0)) == [0.75])
        #expect(Self.pauses(Self.refuseOne(&scheduler, Self.a, now: 10_000 * Self.ms)) == [1.5])
        _ = scheduler.enqueue("ok", origin: Self.a, now: 20_000 * Self.ms)
        let start = scheduler.next(now: 20_000 * Self.ms)!
        _ = scheduler.finished(start.slot, outcome: OriginSchedulerTests.ok(), now: 20_001 * Self.ms)
        #expect(Self.pauses(Self.refuseOne(&scheduler, Self.a, now: 30_000 * Self.ms)) == [0.75])
    }

    @Test func aRetryAfterStillDecidesThePause() {
        let jitter = Jitter([0.5])
        var scheduler = Self.scheduler(jitter)
        let events = Self.refuseOne(&scheduler, Self.a, now: 0, retryAfter: 3)
        #expect(events.contains(.paused(Self.a, seconds: 3)))
        #expect(Self.pauses(events).isEmpty)
        #expect(jitter.calls == 0)
    }

    /// `Retry-After: 0`, a date in the past, or any `Retry-After` when `scheduler.max_retry_after`
    /// is 0 ("0 ignores Retry-After") reads as 0 s: the refusal backs off as one without it.
    /// Failed before the fix: such a refusal paused nothing and backed nothing off, so an origin
    /// that always answers `429` with `Retry-After: 0` was asked again at once, without end.
    @Test func aRetryAfterOfZeroBacksOffAsNone() {
        let jitter = Jitter([0.5])
        var scheduler = Self.scheduler(jitter)
        let events = Self.refuseOne(&scheduler, Self.a, now: 0, retryAfter: 0)
        #expect(Self.pauses(events) == [0.75])
        #expect(scheduler.isPaused(Self.a, now: 2 * Self.ms))
        // With max_retry_after = 0 the worker reads every Retry-After as 0.
        #expect(RetryAfter.seconds("120", now: 0, cap: 0) == 0)
    }

    @Test func aZeroFirstPauseOnlyCuts() {
        var settings = OriginScheduler<String>.Settings(
            limiter: .init(minLimit: 1, maxLimit: 8, initialLimit: 8),
            window: 16)
        settings.overloadPauseNanoseconds = 0
        var scheduler = OriginScheduler<String>(settings: settings, jitter: { 0.5 })
        let events = Self.refuseOne(&scheduler, Self.a, now: 0)
        #expect(Self.pauses(events).isEmpty)
        #expect(!scheduler.isPaused(Self.a, now: 2 * Self.ms))
    }
}
