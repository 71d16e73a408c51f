/// The concurrency limit of one origin, adapted from what its responses say. Pure state: no I/O,
/// no clock of its own; every event carries the time (nanoseconds on any monotonic clock).
///
/// The algorithm (docs/scheduling.md has the reasoning and the convergence argument):
/// - **Slow start.** A new origin starts at ``Settings/initialLimit`` and gains one permit per
///   success while it uses at least half of its limit, so the limit doubles every round trip
///   until the first overload or ``Settings/maxLimit``.
/// - **Overload** (429, 503, a connect timeout, a refused or reset connection) cuts the limit
///   multiplicatively (× ``Settings/backoff``). A 429 beside other requests also records the
///   *ceiling*: the lowest concurrency at which a request was refused. Overloads of requests
///   started before the last cut are the same congestion event: they lower the ceiling but cut
///   nothing more.
/// - **Latency.** A success whose latency, averaged over recent requests, has risen above both
///   ``Settings/latencyTolerance`` × the origin's own baseline and the baseline plus
///   ``Settings/latencyFloorNanoseconds`` cuts the limit too. The baseline follows the origin's
///   lows quickly and its highs slowly, so a steady 2 s origin is at its normal, not overloaded.
/// - **Growth.** After slow start, one permit per round trip (1/limit per success), never above
///   `ceiling - 1` while the ceiling is fresh. A ceiling older than ``Settings/probeInterval``
///   is forgotten, which lets the limit probe one step above it: one refused request per probe
///   interval at most, once the origin's capacity is known.
package struct OriginLimiter: Sendable, Equatable {
    package struct Settings: Sendable, Equatable {
        package var minLimit: Int
        package var maxLimit: Int
        package var initialLimit: Int
        /// The factor of a cut, in (0, 1).
        package var backoff: Double = 0.5
        /// Recent latency over baseline that counts as overload.
        package var latencyTolerance: Double = 2.0
        /// …and the least rise that does, so that jitter on a sub-millisecond origin is no signal.
        package var latencyFloorNanoseconds: UInt64 = 50_000_000
        /// How long a known ceiling holds the limit below it.
        package var probeIntervalNanoseconds: UInt64 = 30_000_000_000

        package init(minLimit: Int, maxLimit: Int, initialLimit: Int) {
            self.minLimit = max(1, minLimit)
            self.maxLimit = max(self.minLimit, maxLimit)
            self.initialLimit = min(max(initialLimit, self.minLimit), self.maxLimit)
        }
    }

    /// Why the limit was cut.
    package enum Signal: String, Sendable, Equatable {
        case tooManyRequests = "429"
        case serviceUnavailable = "503"
        case connectFailure = "connect"
        case latency
    }

    /// A cut, for the log line and the metrics.
    package struct Cut: Sendable, Equatable {
        package var from: Int
        package var to: Int
        package var signal: Signal
    }

    package enum Phase: Sendable, Equatable {
        case slowStart
        case steady
    }

    package let settings: Settings
    package private(set) var phase = Phase.slowStart
    /// The limit as a real number: growth in steady state adds fractions of a permit.
    private var value: Double
    /// The lowest concurrency refused, and when it was last confirmed.
    package private(set) var ceiling: Int?
    private var ceilingSetAt: UInt64 = 0
    /// When the limit was last cut: overloads of requests started earlier cut nothing more.
    private var lastCutAt: UInt64?
    /// Latency baseline and recent average, in nanoseconds.
    package private(set) var baselineNanoseconds: Double?
    private var recentNanoseconds: Double?
    private var recentSamples = 0

    /// Whether the origin was ever refused or slowed down: a cut or a ceiling is what a fresh
    /// limiter would have to learn again from more refusals.
    package var rememberedOverload: Bool { lastCutAt != nil || ceiling != nil }

    /// Samples of recent latency needed before latency can cut the limit.
    static let latencySamplesNeeded = 8

    package init(settings: Settings) {
        self.settings = settings
        self.value = Double(settings.initialLimit)
    }

    /// The number of requests that may run at once.
    package var limit: Int {
        min(max(Int(value), settings.minLimit), settings.maxLimit)
    }

    /// A response came that was no overload. `latencyNanoseconds` is the origin's time to first
    /// byte (nil when unknown); `inFlight` counts the requests running as it ended, itself included.
    @discardableResult
    package mutating func succeeded(latencyNanoseconds: UInt64?, startedAt: UInt64, inFlight: Int, now: UInt64) -> Cut?
    {
        expireCeiling(now: now)
        if let latencyNanoseconds,
            let cut = recordLatency(Double(latencyNanoseconds), startedAt: startedAt, inFlight: inFlight, now: now)
        {
            return cut
        }
        // Growth only while the limit is in use: an origin sent two requests at a time has not
        // shown that it can take sixty-four.
        guard Double(inFlight) * 2 >= value else { return nil }
        switch phase {
        case .slowStart:
            value += 1
        case .steady:
            value += 1 / max(value, 1)
        }
        if let ceiling, value > Double(ceiling - 1) {
            value = Double(max(ceiling - 1, settings.minLimit))
            phase = .steady
        }
        if value >= Double(settings.maxLimit) {
            value = Double(settings.maxLimit)
            phase = .steady
        }
        return nil
    }

    /// The origin refused a request or could not take its connection. `inFlightAtStart` counts
    /// the requests running when it was sent, itself included.
    @discardableResult
    package mutating func overloaded(_ signal: Signal, inFlightAtStart: Int, startedAt: UInt64, now: UInt64) -> Cut? {
        let refusedAt = max(inFlightAtStart, settings.minLimit + 1)
        // Only a 429 beside other requests says "this many at once is too many". A 503 or a failed
        // connect says the origin is unwell, and a refusal of a lone request says nothing of
        // concurrency: those cut, but teach no ceiling.
        let learnsCeiling = signal == .tooManyRequests && inFlightAtStart > 1
        if let lastCutAt, startedAt < lastCutAt {
            // The same event as the last cut: only what it tells about the ceiling counts.
            if learnsCeiling {
                lowerCeiling(to: refusedAt, now: now)
                if value > Double(refusedAt - 1) { value = Double(max(refusedAt - 1, settings.minLimit)) }
            }
            return nil
        }
        let before = limit
        var target = value * settings.backoff
        if learnsCeiling {
            lowerCeiling(to: refusedAt, now: now, fresh: true)
            target = min(target, Double(refusedAt - 1))
        }
        value = max(Double(settings.minLimit), target)
        phase = .steady
        lastCutAt = now
        // As after a latency cut: the average of before this cut must not cut again.
        recentNanoseconds = nil
        recentSamples = 0
        return Cut(from: before, to: limit, signal: signal)
    }

    private mutating func lowerCeiling(to refusedAt: Int, now: UInt64, fresh: Bool = false) {
        if fresh || ceiling == nil {
            ceiling = refusedAt
        } else if let known = ceiling {
            ceiling = min(known, refusedAt)
        }
        ceilingSetAt = now
    }

    private mutating func expireCeiling(now: UInt64) {
        if ceiling != nil, now >= ceilingSetAt &+ settings.probeIntervalNanoseconds {
            ceiling = nil
        }
    }

    private mutating func recordLatency(_ sample: Double, startedAt: UInt64, inFlight: Int, now: UInt64) -> Cut? {
        // The baseline follows lows fast and highs slowly: a lasting change of the origin's normal
        // is learnt in a few hundred requests, a burst of queueing is not.
        if let baseline = baselineNanoseconds {
            baselineNanoseconds = baseline + (sample - baseline) * (sample < baseline ? 0.25 : 0.005)
        } else {
            baselineNanoseconds = sample
        }
        recentNanoseconds = recentNanoseconds.map { $0 + (sample - $0) * 0.2 } ?? sample
        recentSamples += 1
        guard recentSamples >= Self.latencySamplesNeeded, let baseline = baselineNanoseconds,
            let recent = recentNanoseconds,
            recent > baseline * settings.latencyTolerance,
            recent - baseline > Double(settings.latencyFloorNanoseconds),
            Double(inFlight) * 2 >= value
        else { return nil }
        if let lastCutAt, startedAt < lastCutAt { return nil }
        let before = limit
        value = max(Double(settings.minLimit), value * settings.backoff)
        phase = .steady
        lastCutAt = now
        // Judge the next round trip on its own samples.
        recentNanoseconds = nil
        recentSamples = 0
        return Cut(from: before, to: limit, signal: .latency)
    }
}
