/// The pause of an origin that refused without saying for how long (issue 31, §6).
extension OriginScheduler {
    /// Extends the origin's pause to `until`; whether it was extended.
    static func extendPause(_ state: inout State, until: UInt64) -> Bool {
        guard until > (state.pausedUntil ?? 0) else { return false }
        state.pausedUntil = until
        return true
    }

    /// A 429 or 503 without `Retry-After`: the origin pauses for the next step of its backoff,
    /// `overloadPause × 2^level` capped at `maxOverloadPause`, of which a random half is jitter
    /// (so that the workers an origin refused together do not come back together). A refusal of
    /// a request sent before the last backoff began is the same event, and changes nothing.
    /// Returns the pause, if one began.
    static func backoff(
        _ state: inout State, startedAt: UInt64, now: UInt64, settings: Settings,
        jitter: () -> Double
    ) -> UInt64? {
        let first = settings.overloadPauseNanoseconds
        guard first > 0 else { return nil }
        if let since = state.backoffSince, startedAt < since { return nil }
        let cap = max(settings.maxOverloadPauseNanoseconds, first)
        let doublings = UInt64(min(state.backoffLevel, 40))
        let step = first.multipliedReportingOverflow(by: 1 << doublings)
        let full = step.overflow ? cap : min(step.partialValue, cap)
        let random = min(max(jitter(), 0), 1)
        let pause = full / 2 + UInt64(Double(full / 2) * random)
        state.backoffLevel = min(state.backoffLevel + 1, 64)
        state.backoffSince = now
        return pause > 0 && extendPause(&state, until: now + pause) ? pause : nil
    }
}
