/// Jobs out: a finished fetch frees its origin's slot and tells the origin's limiter and pause
/// what it learned (`OriginScheduler+Backoff.swift` for a refusal without `Retry-After`).
extension OriginScheduler {
    /// A fetch started by ``next(now:)`` ended.
    package mutating func finished(_ slot: OriginSlot, outcome: FetchOutcome, now: UInt64) -> [Event] {
        finished(
            origin: slot.origin, startedAt: slot.startedAt, inFlightAtStart: slot.inFlightAtStart,
            tenant: slot.tenant, outcome: outcome, now: now)
    }

    package mutating func finished(
        origin: Origin, startedAt: UInt64, inFlightAtStart: Int, tenant: Int = 0, outcome: FetchOutcome,
        now: UInt64
    ) -> [Event] {
        guard let index = origins.index(forKey: origin), Self.peek(&origins.values[index], { $0.inFlight > 0 }) else {
            return []
        }
        inFlightCount -= 1
        tenants.finished(tenant)
        // In place and with the one lookup: a copy of the state costs retains and a second lookup.
        let fetch = Fetch(origin: origin, startedAt: startedAt, inFlightAtStart: inFlightAtStart, now: now)
        let events = Self.finish(&origins.values[index], fetch, outcome: outcome, settings: settings, jitter: jitter)
        let (limit, counted, pausedUntil, work) = Self.peek(&origins.values[index]) {
            ($0.limiter.limit, $0.countedLimit, $0.pausedUntil, $0.work)
        }
        if limit != counted {
            originsByLimit[counted] -= 1
            originsByLimit[limit] += 1
            origins.values[index].countedLimit = limit
        }
        if let pausedUntil, pausedUntil > now, pauseEnds[origin] != pausedUntil {
            pauseEnds[origin] = pausedUntil
        }
        if work == 0 { syncBusy(index) }
        return events
    }

    struct Fetch {
        var origin: Origin
        var startedAt: UInt64
        var inFlightAtStart: Int
        var now: UInt64
    }

    /// The origin's pace: a moving average of its fetches' durations.
    private static func noteDuration(_ duration: UInt64, of state: inout State) {
        state.durationNanoseconds =
            state.durationNanoseconds.map { $0 + (Double(duration) - $0) * 0.2 } ?? Double(duration)
    }

    private static func finish(
        _ state: inout State, _ fetch: Fetch, outcome: FetchOutcome, settings: Settings,
        jitter: () -> Double
    ) -> [Event] {
        let (startedAt, now) = (fetch.startedAt, fetch.now)
        let inFlight = state.inFlight
        state.inFlight -= 1
        state.lastActive = now
        var events: [Event] = []
        var cut: OriginLimiter.Cut?
        switch outcome {
        case .response(let status, let latency, let duration, let retryAfter):
            noteDuration(duration, of: &state)
            if status == 429 || status == 503 {
                state.overloadResponses += 1
                cut = state.limiter.overloaded(
                    status == 429 ? .tooManyRequests : .serviceUnavailable,
                    inFlightAtStart: fetch.inFlightAtStart, startedAt: startedAt, now: now)
                // A Retry-After of 0 (or in the past, or capped to 0 by max_retry_after = 0) asks
                // for nothing: the refusal backs off as one without it, or a 429 with
                // `Retry-After: 0` would be asked again at once, without end.
                if let retryAfter, retryAfter > 0, settings.maxPauseNanoseconds > 0 {
                    let cap = settings.maxPauseNanoseconds
                    let pause = retryAfter * 1e9 < Double(cap) ? UInt64(retryAfter * 1e9) : cap
                    if pause > 0, extendPause(&state, until: now + pause) {
                        events.append(.paused(fetch.origin, seconds: Double(pause) / 1e9))
                    }
                } else if let pause = backoff(
                    &state, startedAt: startedAt, now: now, settings: settings,
                    jitter: jitter)
                {
                    events.append(.backedOff(fetch.origin, seconds: Double(pause) / 1e9))
                }
            } else {
                if startedAt >= (state.backoffSince ?? 0) { state.backoffLevel = 0 }
                cut = state.limiter.succeeded(
                    latencyNanoseconds: latency, startedAt: startedAt, inFlight: inFlight,
                    now: now)
            }
        case .connectFailure(let duration):
            // A timeout is the origin's pace too: without it an origin that stops answering keeps
            // the pace of its last answers, and its jobs fill the window at one per timeout.
            noteDuration(duration, of: &state)
            cut = state.limiter.overloaded(
                .connectFailure, inFlightAtStart: fetch.inFlightAtStart,
                startedAt: startedAt, now: now)
        case .nameFailure(let duration):
            noteDuration(duration, of: &state)
        case .other:
            break
        }
        if let cut, settings.adaptive, cut.to < cut.from { events.insert(.limitCut(fetch.origin, cut), at: 0) }
        if state.inFlight == 0 { state.busySince = nil }
        return events
    }
}
