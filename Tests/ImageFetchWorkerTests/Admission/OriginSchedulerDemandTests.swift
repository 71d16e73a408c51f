import Foundation
import Testing

@testable import ImageFetchWorker

/// The window shared by demand (issue 31, §4), in simulations of the worker on a fake clock.
@Suite struct OriginSchedulerDemandTests {
    static let ms = SchedulerSimulation.ms

    /// Origin indices of a Zipf-like stream over `origins` hosts (exponent 1.1: the busiest host
    /// gets about a quarter of the jobs, the top five about half), from a fixed seed.
    static func zipfStream(origins: Int, jobs: Int, seed: UInt64 = 31) -> [Int] {
        let weights = (1...origins).map { 1 / pow(Double($0), 1.1) }
        let total = weights.reduce(0, +)
        var cumulative: [Double] = []
        var sum = 0.0
        for weight in weights {
            sum += weight / total
            cumulative.append(sum)
        }
        var random = SimulationRandom(state: seed)
        return (0..<jobs).map { _ in
            let draw = random.unit()
            return cumulative.firstIndex { draw < $0 } ?? origins - 1
        }
    }

    /// Issue 31's mix: 100 healthy origins at 20–80 ms, Zipf popularity, concurrency 64,
    /// prefetch 128. Every job is held only as long as its origin's pace needs: none leaves.
    @Test func aHundredHealthyOriginsOfZipfDemandDeferNothing() {
        let stream = Self.zipfStream(origins: 100, jobs: 40_000)
        let busiest = Double(stream.count { $0 == 0 }) / Double(stream.count)
        #expect(busiest > 0.2 && busiest < 0.3)
        var simulation = SchedulerSimulation(
            origins: 100, concurrency: 64, window: 128,
            delay: { origin, _ in UInt64(20 + (origin * 37) % 61) * SchedulerSimulation.ms },
            stream: { stream[$0 % stream.count] })
        simulation.run(until: 20_000 * Self.ms)
        #expect(simulation.completed > 15_000)
        // Issue 31's target is at most 1 % of jobs; healthy origins should see none.
        #expect(simulation.totalDeferrals == 0, "deferred by origin: \(simulation.deferred.sorted { $0.key < $1.key })")
    }

    /// The same mix at concurrency 512 on a worker whose CPU keeps up with 48 fetches: every
    /// fetch takes up to ten times its origin's delay, every origin at once. That is the worker's
    /// own limit, not any origin's, and deferring would only move the jobs through the delay
    /// queues (issue 31: internet512 deferred 11,735 of 20,000 healthy jobs).
    @Test func aSaturatedWorkerDefersNoHealthyOrigin() {
        let stream = Self.zipfStream(origins: 100, jobs: 40_000)
        var simulation = SchedulerSimulation(
            origins: 100, concurrency: 512, window: 1_024,
            delay: { origin, _ in UInt64(20 + (origin * 37) % 61) * SchedulerSimulation.ms },
            stream: { stream[$0 % stream.count] })
        simulation.capacity = 48
        simulation.run(until: 20_000 * Self.ms)
        #expect(simulation.completed > 5_000)
        #expect(
            simulation.totalDeferrals * 100 <= simulation.completed,
            "deferred \(simulation.totalDeferrals) of \(simulation.completed): \(simulation.deferred.sorted { $0.key < $1.key }.prefix(10))"
        )
    }

    /// The same mix, but one mid-popular origin turns slow: from 5 s on it answers in 3 s instead
    /// of 40 ms. Its jobs leave the window, and no healthy origin's do.
    @Test func aSlowOriginAmongHealthyOnesIsDeferredAndOnlyIt() {
        let stream = Self.zipfStream(origins: 100, jobs: 40_000)
        let slow = 3
        var simulation = SchedulerSimulation(
            origins: 100, concurrency: 64, window: 128,
            delay: { origin, now in
                if origin == slow {
                    return now >= 5_000 * SchedulerSimulation.ms
                        ? 3_000 * SchedulerSimulation.ms
                        : 40 * SchedulerSimulation.ms
                }
                return UInt64(20 + (origin * 37) % 61) * SchedulerSimulation.ms
            },
            stream: { stream[$0 % stream.count] })
        simulation.run(until: 5_000 * Self.ms)
        #expect(simulation.totalDeferrals == 0)
        simulation.run(until: 20_000 * Self.ms)
        #expect((simulation.deferred[slow] ?? 0) > 0)
        #expect(simulation.deferred.keys.allSatisfy { $0 == slow }, "deferred: \(simulation.deferred)")
    }

    /// The same mix, but a popular origin stops answering at 5 s: each of its fetches then ends
    /// as a connect timeout after 5 s. Its jobs leave the window, and the other origins keep
    /// their pace. Failed before the fix: a failed connection's duration was not counted in its
    /// origin's pace, so the origin kept its 40 ms and its jobs filled the window, and every
    /// origin then moved at its pace (about half the healthy rate here).
    /// The same when its name stops resolving and each lookup times out after 5 s (failed
    /// before that fix too: a DNS failure's duration was not counted either).
    @Test(arguments: [DeadOrigin.connectTimeout, .nameTimeout])
    func anOriginThatStopsAnsweringIsDeferredAndTheOthersKeepTheirPace(_ kind: DeadOrigin) {
        let stream = Self.zipfStream(origins: 100, jobs: 40_000)
        let dead = 1
        func simulation(deadFrom: UInt64) -> SchedulerSimulation {
            var simulation = SchedulerSimulation(
                origins: 100, concurrency: 64, window: 128,
                delay: { origin, now in
                    if origin == dead {
                        return now >= deadFrom ? 5_000 * SchedulerSimulation.ms : 40 * SchedulerSimulation.ms
                    }
                    return UInt64(20 + (origin * 37) % 61) * SchedulerSimulation.ms
                },
                stream: { stream[$0 % stream.count] })
            simulation.failing = { origin, now in origin == dead && now >= deadFrom }
            simulation.failure = kind.outcome
            return simulation
        }
        var healthy = simulation(deadFrom: .max)
        healthy.run(until: 30_000 * Self.ms)
        var broken = simulation(deadFrom: 5_000 * Self.ms)
        broken.run(until: 30_000 * Self.ms)
        let others = { (run: SchedulerSimulation) in run.completedBy.filter { $0.key != dead }.values.reduce(0, +) }
        #expect((broken.deferred[dead] ?? 0) > 0)
        #expect(broken.deferred.keys.allSatisfy { $0 == dead }, "deferred: \(broken.deferred)")
        // Before the fix they kept about a fifth. They lose what the dead origin's running jobs
        // hold: its limit is cut to 1 on connect failures, but a failed lookup cuts nothing, so
        // its few permits wait out their 5 s (78 % then, over 80 % for connections).
        #expect(
            others(broken) * 100 >= others(healthy) * 75,
            "other origins completed \(others(broken)) with origin \(dead) dead, \(others(healthy)) with it healthy")
    }

    /// Issue 17's mix, which deferral exists for: one job in eleven for an origin that takes 2 s.
    /// Its jobs must not fill the window: they leave beyond its share, and the fast origin keeps
    /// most of the window.
    @Test func aSlowOriginByNatureLeavesTheWindowToAFastOne() {
        var simulation = SchedulerSimulation(
            origins: 2, concurrency: 32, window: 64,
            delay: { origin, _ in origin == 1 ? 2_000 * SchedulerSimulation.ms : 5 * SchedulerSimulation.ms },
            stream: { $0 % 11 == 10 ? 1 : 0 })
        simulation.run(until: 8_000 * Self.ms)
        #expect((simulation.deferred[1] ?? 0) > 0)
        #expect(simulation.deferred[0] == nil)
        let slowHeld = simulation.scheduler.busiest(2, now: simulation.now).first { $0.origin == simulation.origins[1] }
        let held = (slowHeld?.inFlight ?? 0) + (slowHeld?.waiting ?? 0)
        #expect(held <= 48, "the slow origin holds \(held) of the window's 64")
    }

    /// A job back from a deferral whose origin has room now stays, even though its origin holds
    /// more than its share of a crowded window.
    @Test func aDeferredJobComingBackToAnOriginWithRoomStays() throws {
        var scheduler = OriginSchedulerTests.scheduler(concurrency: 8, window: 16)
        let (a, b) = (OriginSchedulerTests.a, OriginSchedulerTests.b)
        // B's stream crowds the window; A has demand of none of it lately.
        for index in 0..<12 { _ = scheduler.enqueue("b\(index)", origin: b, now: 0) }
        _ = scheduler.sweep(now: 0)
        // A ran 2 s fetches before: its pace is slow, but nothing of it runs or waits now.
        _ = scheduler.enqueue("a0", origin: a, now: 0)
        let started = OriginSchedulerTests.take(&scheduler, 16)
        let aStart = try #require(started.first { $0.origin == a })
        _ = scheduler.finished(aStart.slot, outcome: OriginSchedulerTests.ok(2_000 * Self.ms), now: 2_000 * Self.ms)
        for index in 12..<16 { _ = scheduler.enqueue("b\(index)", origin: b, now: 2_000 * Self.ms) }
        #expect(scheduler.enqueue("a1", origin: a, now: 2_001 * Self.ms, deferredBefore: true) == nil)
        #expect(scheduler.enqueue("a2", origin: a, now: 2_001 * Self.ms, deferredBefore: true) == nil)
        #expect(scheduler.sweep(now: 2_100 * Self.ms).allSatisfy { $0.origin == b })
        #expect(scheduler.next(now: 2_100 * Self.ms)?.element == "a1")
    }
}

/// How an origin stops answering: its connections time out, or its name's lookups do.
enum DeadOrigin: Sendable {
    case connectTimeout, nameTimeout

    func outcome(_ duration: UInt64) -> OriginScheduler<SchedulerSimulation.Job>.FetchOutcome {
        switch self {
        case .connectTimeout: .connectFailure(durationNanoseconds: duration)
        case .nameTimeout: .nameFailure(durationNanoseconds: duration)
        }
    }
}
