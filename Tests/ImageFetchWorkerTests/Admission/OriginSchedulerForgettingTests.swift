import Testing

@testable import ImageFetchWorker

/// How long the scheduler keeps an origin after its last job (issue 33). Dataset jobs name
/// millions of hosts, most of them once: state kept five minutes for each, about 1.6 KB, grew
/// to hundreds of megabytes, and the 200 ms sweep walked all of it under admission's lock.
@Suite struct OriginSchedulerForgettingTests {
    static let ms: UInt64 = 1_000_000

    static func origin(_ index: Int) -> Origin {
        Origin(scheme: "https", host: "o\(index).example", port: 443)
    }

    /// `count` origins that each ran one job, answered `status` at 1 ms.
    static func origins(_ count: Int, status: Int = 200) -> OriginScheduler<String> {
        var scheduler = OriginSchedulerTests.scheduler(concurrency: 64, initial: 8, window: 128)
        for index in 0..<count {
            _ = scheduler.enqueue("job", origin: origin(index), now: 0)
            let start = scheduler.next(now: 0)!
            let outcome = OriginScheduler<String>.FetchOutcome.response(
                status: status, latencyNanoseconds: 10 * ms, durationNanoseconds: 10 * ms, retryAfterSeconds: nil)
            _ = scheduler.finished(start.slot, outcome: outcome, now: Self.ms)
        }
        return scheduler
    }

    @Test func anOriginThatTaughtNothingIsForgottenOnceItIsNoLongerActive() {
        var scheduler = Self.origins(10_000)
        _ = scheduler.sweep(now: 2 * Self.ms)
        #expect(scheduler.gauges(now: 2 * Self.ms).known == 10_000)  // active: its demand still counts
        let later = Self.ms + scheduler.settings.activeNanoseconds + Self.ms
        _ = scheduler.sweep(now: later)
        #expect(scheduler.gauges(now: later).known == 0)
    }

    /// A refusal is what politeness must remember: the cut limit and the backoff stay for the
    /// idle time, so that the origin's next job does not start it at a fresh limit again.
    @Test(arguments: [429, 503])
    func anOriginThatRefusedIsRememberedForTheIdleTime(status: Int) {
        var scheduler = Self.origins(1, status: status)
        let limit = scheduler.knownLimit(of: Self.origin(0))
        #expect(limit.map { $0 < 8 } == true, "a \(status) cuts the limit: \(String(describing: limit))")
        let later = 10_000 * Self.ms
        _ = scheduler.sweep(now: later)
        #expect(scheduler.gauges(now: later).known == 1)
        #expect(scheduler.knownLimit(of: Self.origin(0)) == limit)
        let idle = Self.ms + scheduler.settings.idleNanoseconds + Self.ms
        _ = scheduler.sweep(now: idle)
        #expect(scheduler.gauges(now: idle).known == 0)
    }
}

extension OriginScheduler {
    /// The limit the scheduler keeps for `origin`, or nil when it does not know it.
    fileprivate func knownLimit(of origin: Origin) -> Int? {
        origins[origin]?.limiter.limit
    }
}
