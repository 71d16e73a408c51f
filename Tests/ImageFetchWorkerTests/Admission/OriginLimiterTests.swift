import Testing

@testable import ImageFetchWorker

@Suite struct OriginLimiterTests {
    static let ms: UInt64 = 1_000_000
    static let second: UInt64 = 1_000_000_000

    /// One round trip at `limit` requests against an origin that takes `capacity` at once and
    /// refuses the rest with 429 (refusals come back first). Returns (served, refused).
    static func round(_ limiter: inout OriginLimiter, capacity: Int, latency: UInt64, at start: UInt64) -> (Int, Int) {
        let limit = limiter.limit
        let end = start + latency
        var refused = 0
        for request in 1...limit where request > capacity {
            limiter.overloaded(.tooManyRequests, inFlightAtStart: request, startedAt: start, now: start + latency / 10)
            refused += 1
        }
        let served = min(limit, capacity)
        for _ in 0..<served {
            limiter.succeeded(latencyNanoseconds: latency, startedAt: start, inFlight: limit, now: end)
        }
        return (served, refused)
    }

    @Test func slowStartDoublesEveryRoundTripUpToTheMaximum() {
        var limiter = OriginLimiter(settings: .init(minLimit: 1, maxLimit: 1024, initialLimit: 8))
        var limits: [Int] = []
        var now: UInt64 = 0
        for _ in 0..<8 {
            _ = Self.round(&limiter, capacity: .max, latency: 100 * Self.ms, at: now)
            now += 100 * Self.ms
            limits.append(limiter.limit)
        }
        #expect(limits == [16, 32, 64, 128, 256, 512, 1024, 1024])
        // 100 ms round trips: the full concurrency in 0.7 s.
        #expect(limiter.phase == .steady)
    }

    @Test func aSteadySlowOriginIsNotOverloaded() {
        var limiter = OriginLimiter(settings: .init(minLimit: 1, maxLimit: 64, initialLimit: 8))
        var now: UInt64 = 0
        for _ in 0..<200 {
            limiter.succeeded(
                latencyNanoseconds: 2 * Self.second, startedAt: now, inFlight: limiter.limit, now: now + 2 * Self.second
            )
            now += 10 * Self.ms
        }
        #expect(limiter.limit == 64)
        #expect(limiter.ceiling == nil)
    }

    @Test func jitterOnAFastOriginIsNoSignal() {
        var limiter = OriginLimiter(settings: .init(minLimit: 1, maxLimit: 32, initialLimit: 32))
        for index in 0..<100 {
            limiter.succeeded(latencyNanoseconds: 500_000, startedAt: UInt64(index), inFlight: 32, now: UInt64(index))
        }
        for index in 100..<200 {
            // Ten times the baseline, but 5 ms: CPU load on the worker's machine, not the origin.
            let cut = limiter.succeeded(
                latencyNanoseconds: 5 * Self.ms, startedAt: UInt64(index), inFlight: 32, now: UInt64(index))
            #expect(cut == nil)
        }
        #expect(limiter.limit == 32)
    }

    /// A limiter at 64 whose origin has answered in 100 ms fifty times, and the time after.
    static func settledAt100ms() -> (OriginLimiter, UInt64) {
        var limiter = OriginLimiter(settings: .init(minLimit: 1, maxLimit: 64, initialLimit: 64))
        var now: UInt64 = 0
        for _ in 0..<50 {
            limiter.succeeded(latencyNanoseconds: 100 * Self.ms, startedAt: now, inFlight: 64, now: now + 100 * Self.ms)
            now += Self.ms
        }
        return (limiter, now)
    }

    @Test func risingLatencyCutsOncePerRoundTrip() {
        var (limiter, now) = Self.settledAt100ms()
        var cuts: [OriginLimiter.Cut] = []
        let cutTime = now
        for _ in 0..<20 {
            // Requests started before the first cut share its congestion event.
            if let cut = limiter.succeeded(
                latencyNanoseconds: 600 * Self.ms, startedAt: cutTime, inFlight: 64, now: now)
            {
                cuts.append(cut)
            }
            now += Self.ms
        }
        #expect(cuts == [OriginLimiter.Cut(from: 64, to: 32, signal: .latency)])
    }

    /// Latency needs eight samples of its own after any cut, not only after its own: the average
    /// of before a 429's cut still said "slow", and the first request sent after that cut cut
    /// again at once (failed before the fix).
    @Test func latencyWaitsForSamplesAfterAnotherSignalsCut() {
        var (limiter, now) = Self.settledAt100ms()
        for _ in 0..<10 {
            // Slower than usual, not yet slow enough to cut.
            _ = limiter.succeeded(latencyNanoseconds: 180 * Self.ms, startedAt: now, inFlight: 64, now: now)
            now += Self.ms
        }
        let cut = limiter.overloaded(.tooManyRequests, inFlightAtStart: 1, startedAt: now, now: now + Self.ms)
        #expect(cut?.signal == .tooManyRequests)
        now += 2 * Self.ms
        var cuts: [OriginLimiter.Cut] = []
        for index in 0..<7 {
            if let cut = limiter.succeeded(
                latencyNanoseconds: 600 * Self.ms, startedAt: now, inFlight: limiter.limit, now: now + UInt64(index))
            {
                cuts.append(cut)
            }
        }
        #expect(cuts.isEmpty, "\(cuts)")
    }

    @Test func overloadsOfOneBurstCutOnceAndLearnTheLowestRefusal() {
        var limiter = OriginLimiter(settings: .init(minLimit: 1, maxLimit: 64, initialLimit: 16))
        let first = limiter.overloaded(.tooManyRequests, inFlightAtStart: 14, startedAt: 0, now: 10)
        #expect(first == OriginLimiter.Cut(from: 16, to: 8, signal: .tooManyRequests))
        #expect(limiter.overloaded(.tooManyRequests, inFlightAtStart: 9, startedAt: 0, now: 11) == nil)
        #expect(limiter.ceiling == 9)
        #expect(limiter.limit == 8)
        // Growth stops below the ceiling while it is fresh…
        for index in 0..<500 {
            limiter.succeeded(latencyNanoseconds: nil, startedAt: 20, inFlight: limiter.limit, now: 20 + UInt64(index))
        }
        #expect(limiter.limit == 8)
        // …and probes above it again, a permit per round trip, once the ceiling is older than the
        // probe interval.
        let later = 31 * Self.second
        for index in 0..<10 {
            limiter.succeeded(
                latencyNanoseconds: nil, startedAt: later, inFlight: limiter.limit, now: later + UInt64(index))
        }
        #expect(limiter.ceiling == nil)
        #expect(limiter.limit == 9)
    }

    @Test func theLimitNeverLeavesItsBounds() {
        var limiter = OriginLimiter(settings: .init(minLimit: 2, maxLimit: 4, initialLimit: 100))
        #expect(limiter.limit == 4)
        for index in 0..<10 {
            limiter.overloaded(
                .connectFailure, inFlightAtStart: 1, startedAt: UInt64(index * 2 + 1), now: UInt64(index * 2 + 2))
        }
        #expect(limiter.limit == 2)
    }

    /// The convergence the scheduling docs describe: against an origin of fixed capacity, the
    /// limit settles at the capacity within a few round trips of the first refusals, uses at
    /// least 90 % of it, and is refused about once per probe interval afterwards.
    @Test(arguments: [8, 20, 50])
    func convergesOnAnOriginOfFixedCapacity(capacity: Int) {
        var limiter = OriginLimiter(settings: .init(minLimit: 1, maxLimit: 256, initialLimit: 8))
        let latency = 100 * Self.ms
        var now: UInt64 = 0
        var served = 0
        var refused = 0
        var settledRounds = 0
        var atCapacity = 0
        for index in 0..<1200 {  // two minutes of 100 ms round trips
            let (roundServed, roundRefused) = Self.round(&limiter, capacity: capacity, latency: latency, at: now)
            now += latency
            if index >= 20 {
                served += roundServed
                refused += roundRefused
                settledRounds += 1
                if limiter.limit == capacity { atCapacity += 1 }
            }
        }
        let utilisation = Double(served) / Double(settledRounds * capacity)
        #expect(utilisation >= 0.9, "used \(utilisation) of the capacity")
        #expect(Double(refused) / Double(served) <= 0.01, "\(refused) refused for \(served) served")
        #expect(Double(atCapacity) / Double(settledRounds) >= 0.9)
    }
}

extension OriginLimiterTests {
    @Test func unavailableOrRefusedAloneTeachesNoCeiling() {
        var limiter = OriginLimiter(settings: .init(minLimit: 1, maxLimit: 32, initialLimit: 8))
        #expect(limiter.overloaded(.serviceUnavailable, inFlightAtStart: 6, startedAt: 0, now: 1) != nil)
        #expect(limiter.ceiling == nil)
        #expect(limiter.limit == 4)
        #expect(limiter.overloaded(.tooManyRequests, inFlightAtStart: 1, startedAt: 2, now: 3) != nil)
        #expect(limiter.ceiling == nil)
        #expect(limiter.limit == 2)
    }
}
