import Testing

@testable import ImageFetchWorker

/// The prefetch window: which waiting jobs leave it, and when (docs/scheduling.md, "The prefetch
/// window"). Everything on a fake clock.
@Suite struct OriginSchedulerWindowTests {
    static let ms: UInt64 = 1_000_000
    static let a = OriginSchedulerTests.a
    static let b = OriginSchedulerTests.b

    static func refused(retryAfter: Double?) -> OriginScheduler<String>.FetchOutcome {
        .response(status: 429, latencyNanoseconds: ms, durationNanoseconds: ms, retryAfterSeconds: retryAfter)
    }

    /// Issue 33, defect 5: A's jobs were published before B's, and A answers `Retry-After: 300`.
    /// Alone, A's paused jobs would hold the whole window for the pause, and B's jobs would wait
    /// in the broker behind them. A paused origin that fills the window gives its jobs up.
    @Test func aPausedOriginAloneThatFillsTheWindowGivesItsJobsUp() {
        var scheduler = OriginSchedulerTests.scheduler(concurrency: 8, window: 16)
        for index in 0..<16 { _ = scheduler.enqueue("a\(index)", origin: Self.a, now: 0) }
        let started = OriginSchedulerTests.take(&scheduler, 8)
        for start in started {
            _ = scheduler.finished(start.slot, outcome: Self.refused(retryAfter: 300), now: 10 * Self.ms)
        }
        // The broker fills the freed slots with more of A's jobs.
        for index in 16..<24 { _ = scheduler.enqueue("a\(index)", origin: Self.a, now: 11 * Self.ms) }
        #expect(scheduler.waitingCount == 16)
        let deferred = scheduler.sweep(now: 20 * Self.ms)
        #expect(deferred.count == 16)
        #expect(deferred.allSatisfy { $0.origin == Self.a && ($0.atLeastSeconds ?? 0) > 299 })
        // While the pause lasts, A's next jobs leave at once, so that the broker reaches B's.
        #expect(scheduler.enqueue("a24", origin: Self.a, now: 30 * Self.ms) != nil)
    }
}
