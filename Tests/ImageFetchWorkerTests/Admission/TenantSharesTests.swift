import Testing

@testable import ImageFetchWorker

/// The tenant level of admission: fair between tenants first, then between a tenant's origins, with
/// optional caps; on the scheduler directly, with the time given (a fake clock).
@Suite struct TenantSharesTests {
    static let ms: UInt64 = 1_000_000
    static let a = Origin(scheme: "https", host: "a.example", port: 443)
    static let b = Origin(scheme: "https", host: "b.example", port: 443)

    static func scheduler(
        concurrency: Int = 4, window: Int = 1024, tenants: TenantShares.Settings = .init()
    ) -> OriginScheduler<String> {
        var settings = OriginScheduler<String>.Settings(
            limiter: .init(minLimit: 1, maxLimit: concurrency, initialLimit: concurrency), window: window)
        settings.tenants = tenants
        return OriginScheduler(settings: settings, jitter: { 0.5 })
    }

    static func take(
        _ scheduler: inout OriginScheduler<String>, _ permits: Int, now: UInt64 = 0
    ) -> [OriginScheduler<String>.Start] {
        var started: [OriginScheduler<String>.Start] = []
        while started.count < permits, let start = scheduler.next(now: now) { started.append(start) }
        return started
    }

    static func ok(_ duration: UInt64) -> OriginScheduler<String>.FetchOutcome {
        .response(status: 200, latencyNanoseconds: duration, durationNanoseconds: duration, retryAfterSeconds: nil)
    }

    /// Runs every waiting job with `concurrency` permits, each fetch taking `duration`, on a fake
    /// clock; the order in which the jobs finish.
    static func run(
        _ scheduler: inout OriginScheduler<String>, concurrency: Int, duration: UInt64
    ) -> [String] {
        var now: UInt64 = 0
        var running: [(end: UInt64, start: OriginScheduler<String>.Start)] = []
        var finished: [String] = []
        while true {
            while running.count < concurrency, let start = scheduler.next(now: now) {
                running.append((now + duration, start))
            }
            guard let soonest = running.indices.min(by: { running[$0].end < running[$1].end }) else { break }
            let done = running.remove(at: soonest)
            now = done.end
            _ = scheduler.finished(done.start.slot, outcome: ok(duration), now: now)
            finished.append(done.start.element)
        }
        return finished
    }

    /// The small tenant's part of the results while both tenants had work: up to its last result.
    static func smallShare(_ finished: [String]) -> Double {
        let last = finished.lastIndex { $0.hasPrefix("small") }!
        let small = finished[...last].filter { $0.hasPrefix("small") }.count
        return Double(small) / Double(last + 1)
    }

    @Test func aSmallTenantKeepsItsShareOfOneOriginBehindABigOne() {
        var scheduler = Self.scheduler()
        // Big first: 100 jobs of "big", then 10 of "small", all for the same origin.
        for index in 0..<100 { _ = scheduler.enqueue("big\(index)", origin: Self.a, tenant: "big", now: 0) }
        for index in 0..<10 { _ = scheduler.enqueue("small\(index)", origin: Self.a, tenant: "small", now: 0) }
        let finished = Self.run(&scheduler, concurrency: 4, duration: 150 * Self.ms)
        #expect(finished.count == 110)
        #expect(Self.smallShare(finished) >= 0.45)
        // Each tenant's own jobs stay in their order.
        #expect(finished.filter { $0.hasPrefix("small") } == (0..<10).map { "small\($0)" })
        #expect(scheduler.tenants.count == 1)  // both named tenants forgotten once idle
        #expect(scheduler.tenants.waitingTenants == 0)
    }

    @Test func interleavedJobsShareEvenly() {
        var scheduler = Self.scheduler()
        for index in 0..<100 {
            _ = scheduler.enqueue("big\(index)", origin: Self.a, tenant: "big", now: 0)
            if index % 10 == 9 {
                _ = scheduler.enqueue("small\(index / 10)", origin: Self.a, tenant: "small", now: 0)
            }
        }
        let finished = Self.run(&scheduler, concurrency: 4, duration: 150 * Self.ms)
        #expect(Self.smallShare(finished) >= 0.45)
    }

    @Test func withoutTenantsTheOriginOrderIsAsBefore() {
        var withTenants = Self.scheduler()
        var without = Self.scheduler()
        for index in 0..<30 {
            let origin = index % 3 == 0 ? Self.b : Self.a
            _ = withTenants.enqueue("\(index)", origin: origin, tenant: "default", now: 0)
            _ = without.enqueue("\(index)", origin: origin, now: 0)
        }
        #expect(withTenants.tenants.isTrivial)
        #expect(
            Self.run(&withTenants, concurrency: 4, duration: Self.ms)
                == Self.run(&without, concurrency: 4, duration: Self.ms))
    }

    @Test func withinATenantOriginsShare() {
        var scheduler = Self.scheduler(concurrency: 8)
        for index in 0..<40 { _ = scheduler.enqueue("xa\(index)", origin: Self.a, tenant: "x", now: 0) }
        for index in 0..<40 { _ = scheduler.enqueue("xb\(index)", origin: Self.b, tenant: "x", now: 0) }
        for index in 0..<40 { _ = scheduler.enqueue("y\(index)", origin: Self.a, tenant: "y", now: 0) }
        let started = Self.take(&scheduler, 8)
        // Tenants first: 4 each. Then x's four go to its origins in turn, fewest running first.
        #expect(started.filter { $0.element.hasPrefix("y") }.count == 4)
        #expect(started.filter { $0.element.hasPrefix("xa") }.count >= 1)
        #expect(started.filter { $0.element.hasPrefix("xb") }.count >= 2)
    }

    @Test func aCapHoldsItsTenantAndLeavesThePermitsToOthers() {
        var scheduler = Self.scheduler(concurrency: 8, tenants: .init(limits: ["capped": 2]))
        for index in 0..<20 { _ = scheduler.enqueue("c\(index)", origin: Self.a, tenant: "capped", now: 0) }
        // Alone, the capped tenant runs 2, however many permits are free.
        let capped = Self.take(&scheduler, 8)
        #expect(capped.count == 2)
        #expect(scheduler.hasStartable(now: 0) == false)
        for index in 0..<20 { _ = scheduler.enqueue("o\(index)", origin: Self.a, tenant: "other", now: 0) }
        #expect(scheduler.hasStartable(now: 0) == true)
        // The other tenant takes the rest of the origin's limit of 8.
        let more = Self.take(&scheduler, 8)
        #expect(more.count == 6)
        #expect(more.allSatisfy { $0.element.hasPrefix("o") })
        // A capped job that ends gives its tenant one job back (it runs fewer than the other).
        _ = scheduler.finished(capped[0].slot, outcome: Self.ok(Self.ms), now: 1)
        #expect(scheduler.next(now: 1)?.element == "c2")
        #expect(scheduler.next(now: 1) == nil)
    }

    @Test func aDefaultCapAppliesToEveryTenantTheDefaultOneToo() {
        var scheduler = Self.scheduler(concurrency: 8, tenants: .init(limit: 3, limits: ["vip": 5]))
        for index in 0..<10 {
            _ = scheduler.enqueue("d\(index)", origin: Self.a, now: 0)
            _ = scheduler.enqueue("v\(index)", origin: Self.b, tenant: "vip", now: 0)
        }
        let started = Self.take(&scheduler, 8)
        #expect(started.filter { $0.element.hasPrefix("d") }.count == 3)
        #expect(started.filter { $0.element.hasPrefix("v") }.count == 5)
        _ = scheduler.finished(started.first { $0.element.hasPrefix("d") }!.slot, outcome: Self.ok(Self.ms), now: 1)
        #expect(scheduler.next(now: 1)?.element.hasPrefix("d") == true)
    }

    @Test func aPausedOriginDoesNotHoldItsTenantsOtherOrigins() {
        var scheduler = Self.scheduler(concurrency: 4)
        for index in 0..<4 { _ = scheduler.enqueue("xa\(index)", origin: Self.a, tenant: "x", now: 0) }
        for index in 0..<4 { _ = scheduler.enqueue("y\(index)", origin: Self.b, tenant: "y", now: 0) }
        let first = Self.take(&scheduler, 1)
        #expect(first.count == 1)
        // A refuses with Retry-After: its jobs wait, and x, with nothing else startable, is skipped.
        _ = scheduler.finished(
            first[0].slot,
            outcome: .response(
                status: 429, latencyNanoseconds: Self.ms, durationNanoseconds: Self.ms, retryAfterSeconds: 60),
            now: Self.ms)
        let started = Self.take(&scheduler, 4, now: 2 * Self.ms)
        #expect(started.count == 4)
        #expect(started.allSatisfy { $0.origin == Self.b })
    }

    @Test func jobsThatLeaveTheWindowLeaveTheirTenant() {
        var scheduler = Self.scheduler(concurrency: 2, window: 4)
        for index in 0..<4 { _ = scheduler.enqueue("x\(index)", origin: Self.a, tenant: "x", now: 0) }
        _ = scheduler.enqueue("y0", origin: Self.a, tenant: "y", now: 0)
        #expect(scheduler.tenants.waitingTenants == 2)
        #expect(scheduler.takeAll().count == 5)
        #expect(scheduler.tenants.waitingTenants == 0)
        #expect(scheduler.tenants.count == 1)
    }

    @Test func slotsOfIdleTenantsAreReused() {
        var shares = TenantShares()
        let x = shares.slot(for: "x")
        shares.enqueued(x)
        shares.started(x, served: 1)
        shares.finished(x)
        #expect(shares.count == 1)
        let y = shares.slot(for: "y")
        #expect(y == x)
        #expect(shares.name(of: y) == "y")
        #expect(shares.slot(for: nil) == 0)
        #expect(shares.slot(for: Tenant.defaultName) == 0)
    }
}
