import Testing

@testable import ImageFetchWorker

/// A fleet on a fake clock (issue 35, §6): replicas of concurrency 64, each with its own
/// ``OriginScheduler``, take jobs from one queue for one origin that serves 8 requests at once in
/// 100 ms and answers any more at once with 429 and `Retry-After: 1`; a refused job comes back
/// after the 1 s retry delay. The figures are the benchmark's (`scripts/bench.sh capacity12`),
/// counted at the origin: refused requests per image served, and the share of its capacity used.
struct FleetSimulation {
    static let ms: UInt64 = 1_000_000
    static let origin = Origin(scheme: "http", host: "127.0.0.3", port: 80)
    static let capacity = 8
    static let service = 100 * ms

    struct Replica {
        var scheduler: OriginScheduler<Int>
        var held = 0
        var running: [(end: UInt64, slot: OriginSlot, job: Int, refused: Bool)] = []
    }

    var replicas: [Replica]
    /// Jobs ready in the queue, and jobs on their way back (retry or deferral delay).
    var ready: [Int]
    var nextReady = 0
    var delayed: [(at: UInt64, job: Int)] = []
    var now: UInt64 = 0
    var served = 0
    var refused = 0
    var inFlightAtOrigin = 0
    var done = 0
    let jobs: Int

    init(replicas count: Int, jobs: Int, seed: UInt64 = 35) {
        var random = SimulationRandom(state: seed)
        replicas = (0..<count).map { _ in
            var settings = OriginScheduler<Int>.Settings(
                limiter: .init(minLimit: 1, maxLimit: 64, initialLimit: 8), window: 128)
            settings.overloadPauseNanoseconds = 1_000 * Self.ms
            // Each replica its own jitter, as each process has.
            var own = SimulationRandom(state: random.next())
            let values = (0..<4_096).map { _ in own.unit() }
            let cursor = Cursor(values)
            return Replica(scheduler: OriginScheduler(settings: settings, jitter: { cursor.next() }))
        }
        ready = Array(0..<jobs)
        self.jobs = jobs
    }

    /// Replays a fixed list of random numbers; a class so that the scheduler's closure shares it.
    final class Cursor: @unchecked Sendable {
        // @unchecked Sendable: used by one test's simulation on one thread.
        private let values: [Double]
        private var index = 0
        init(_ values: [Double]) { self.values = values }
        func next() -> Double {
            defer { index = (index + 1) % values.count }
            return values[index]
        }
    }

    /// Runs in 1 ms steps until every job succeeded (or `limit` passed); the seconds it took.
    mutating func run(limit: UInt64 = 600_000 * ms) -> Double {
        while done < jobs, now < limit {
            now += Self.ms
            step()
        }
        return Double(now) / 1e9
    }

    private mutating func step() {
        for index in replicas.indices { finish(index) }
        delayed.removeAll { entry in
            guard entry.at <= now else { return false }
            ready.append(entry.job)
            return true
        }
        // The broker hands out ready jobs round-robin, up to each replica's prefetch window.
        var given = true
        while given, nextReady < ready.count {
            given = false
            for index in replicas.indices where nextReady < ready.count && replicas[index].held < 128 {
                let job = ready[nextReady]
                nextReady += 1
                replicas[index].held += 1
                given = true
                if let deferral = replicas[index].scheduler.enqueue(job, origin: Self.origin, now: now) {
                    leave(index, deferral)
                }
            }
        }
        for index in replicas.indices {
            while replicas[index].running.count < 64, let start = replicas[index].scheduler.next(now: now) {
                // The origin refuses at once beyond its capacity; the answer arrives 1 ms later.
                let accepted = inFlightAtOrigin < Self.capacity
                if accepted { inFlightAtOrigin += 1 } else { refused += 1 }
                let end = now + (accepted ? Self.service : Self.ms)
                replicas[index].running.append((end, start.slot, start.element, !accepted))
            }
            if now % (200 * Self.ms) == 0 {
                for deferral in replicas[index].scheduler.sweep(now: now) { leave(index, deferral) }
            }
        }
    }

    /// Ends the replica's fetches that are due.
    private mutating func finish(_ index: Int) {
        var position = 0
        while position < replicas[index].running.count {
            let fetch = replicas[index].running[position]
            guard fetch.end <= now else {
                position += 1
                continue
            }
            replicas[index].running.remove(at: position)
            replicas[index].held -= 1
            let duration = now - fetch.slot.startedAt
            if fetch.refused {
                _ = replicas[index].scheduler.finished(
                    fetch.slot,
                    outcome: .response(
                        status: 429, latencyNanoseconds: duration, durationNanoseconds: duration,
                        retryAfterSeconds: 1),
                    now: now)
                delayed.append((now + 1_000 * Self.ms, fetch.job))
            } else {
                inFlightAtOrigin -= 1
                served += 1
                done += 1
                _ = replicas[index].scheduler.finished(
                    fetch.slot,
                    outcome: .response(
                        status: 200, latencyNanoseconds: duration, durationNanoseconds: duration,
                        retryAfterSeconds: nil),
                    now: now)
            }
        }
    }

    /// A job that leaves the window goes to the first delay queue no shorter than its origin's pause.
    private mutating func leave(_ index: Int, _ deferral: OriginScheduler<Int>.Deferral) {
        replicas[index].held -= 1
        let delays: [Double] = [1, 2, 5, 10, 30, 60]
        let seconds = delays.first { $0 >= (deferral.atLeastSeconds ?? 0) } ?? 60
        delayed.append((now + UInt64(seconds * 1_000) * Self.ms, deferral.element))
    }

    var refusedPerImage: Double { Double(refused) / Double(max(served, 1)) }

    func capacityUsed(seconds: Double) -> Double {
        Double(served) * Double(Self.service) / 1e9 / (Double(Self.capacity) * seconds)
    }
}

@Suite struct FleetSimulationTests {
    /// The benchmark's targets hold for one worker and for a fleet of twelve: each replica that is
    /// refused at its floor of one request yields for longer than `Retry-After` asks, with jitter,
    /// so that the replicas' floors do not add up to a steady overload.
    @Test(arguments: [1, 4, 12])
    func aFleetStaysPoliteAndUsesTheOrigin(replicas: Int) {
        var fleet = FleetSimulation(replicas: replicas, jobs: 6_000)
        let seconds = fleet.run()
        #expect(fleet.done == 6_000)
        #expect(fleet.refusedPerImage <= (replicas == 1 ? 0.1 : 0.05), "refused per image: \(fleet.refusedPerImage)")
        #expect(fleet.capacityUsed(seconds: seconds) >= 0.7, "capacity used: \(fleet.capacityUsed(seconds: seconds))")
    }
}
