import Testing

@testable import ImageFetchWorker

/// What `/origins` and `/metrics` read under admission's lock (issue 33, defect 9): bounded by the
/// busy origins, not by every origin the scheduler knows.
@Suite struct OriginSchedulerObservationTests {
    static let ms: UInt64 = 1_000_000

    static func origin(_ index: Int) -> Origin {
        Origin(scheme: "https", host: "o\(index).example", port: 443)
    }

    /// `known` origins that each ran one job and are idle now, and three busy ones.
    static func manyOrigins(known: Int) -> OriginScheduler<String> {
        var scheduler = OriginSchedulerTests.scheduler(concurrency: 64, window: 128)
        for index in 0..<known {
            _ = scheduler.enqueue("job", origin: origin(index), now: 0)
            let start = scheduler.next(now: 0)!
            _ = scheduler.finished(start.slot, outcome: OriginSchedulerTests.ok(), now: Self.ms)
        }
        for (index, jobs) in [(known, 5), (known + 1, 9), (known + 2, 2)] {
            for job in 0..<jobs { _ = scheduler.enqueue("b\(job)", origin: origin(index), now: 2 * Self.ms) }
        }
        return scheduler
    }

    @Test func busiestReadsOnlyTheBusyOrigins() {
        let scheduler = Self.manyOrigins(known: 100_000)
        var visits = 0
        let report = scheduler.busiest(2, now: 2 * Self.ms, visits: &visits)
        #expect(report.map(\.origin) == [Self.origin(100_001), Self.origin(100_000)])
        #expect(report.map(\.waiting) == [9, 5])
        #expect(visits <= 100, "busiest(2) read \(visits) origin states of 100,003")
    }

    @Test func theGaugesReadNoOriginState() {
        let scheduler = Self.manyOrigins(known: 100_000)
        var visits = 0
        let gauges = scheduler.gauges(now: 2 * Self.ms, visits: &visits)
        #expect(gauges.known == 100_003)
        #expect(gauges.limits.reduce(0) { $0 + $1.origins } == 100_003)
        #expect(visits <= 100, "the gauges read \(visits) origin states of 100,003")
    }
}
