/// What `/origins` and `/metrics` read, under admission's lock: bounded by the busy origins and
/// the limit range, never by the number of known origins (which can reach 10⁵ and more).
extension OriginScheduler {
    /// One origin as `/origins` shows it.
    package struct OriginSnapshot: Sendable, Equatable {
        package var origin: Origin
        package var limit: Int
        package var ceiling: Int?
        package var inFlight: Int
        package var waiting: Int
        package var pausedForSeconds: Double?
        package var latencyBaselineMilliseconds: Double?
        package var overloadResponses: Int
        package var slowStart: Bool
    }

    /// The `count` busiest origins (running plus waiting jobs), busiest first.
    package func busiest(_ count: Int, now: UInt64) -> [OriginSnapshot] {
        var visits = 0
        return busiest(count, now: now, visits: &visits)
    }

    /// ``busiest(_:now:)``, counting the origin states it reads: the work it does under admission's lock.
    func busiest(_ count: Int, now: UInt64, visits: inout Int) -> [OriginSnapshot] {
        guard count > 0 else { return [] }
        // Only the busy origins are ranked; idle ones (no work, all tied) fill up what is left.
        var ranked: [(work: Int, origin: Origin)] = []
        ranked.reserveCapacity(busy.count)
        for origin in busy {
            visits += 1
            ranked.append((origins[origin]?.work ?? 0, origin))
        }
        ranked.sort { left, right in
            if left.work != right.work { return left.work > right.work }
            return Self.precedes(left.origin, right.origin)
        }
        var chosen = ranked.prefix(count).map(\.origin)
        if chosen.count < count {
            for (origin, state) in origins where state.busyIndex == nil {
                visits += 1
                chosen.append(origin)
                if chosen.count == count { break }
            }
        }
        return chosen.compactMap { origin in
            guard let state = origins[origin] else { return nil }
            visits += 1
            let pause = state.remainingPause(now: now)
            return OriginSnapshot(
                origin: origin, limit: limit(state), ceiling: state.limiter.ceiling, inFlight: state.inFlight,
                waiting: state.waiting.count, pausedForSeconds: pause > 0 ? Double(pause) / 1e9 : nil,
                latencyBaselineMilliseconds: state.limiter.baselineNanoseconds.map { $0 / 1e6 },
                overloadResponses: state.overloadResponses, slowStart: state.limiter.phase == .slowStart)
        }
    }

    /// A stable order for origins of equal work, without building their descriptions.
    private static func precedes(_ left: Origin, _ right: Origin) -> Bool {
        if left.host != right.host { return left.host < right.host }
        if left.port != right.port { return left.port < right.port }
        return left.scheme < right.scheme
    }

    /// Origins the scheduler knows, origins paused now, and how many known origins have each limit
    /// (only the limits some origin has, ascending).
    package func gauges(now: UInt64) -> (known: Int, paused: Int, limits: [(limit: Int, origins: Int)]) {
        var visits = 0
        return gauges(now: now, visits: &visits)
    }

    func gauges(now: UInt64, visits: inout Int) -> (known: Int, paused: Int, limits: [(limit: Int, origins: Int)]) {
        var paused = 0
        for end in pauseEnds.values where end > now { paused += 1 }
        visits += pauseEnds.count
        guard settings.adaptive else {
            return (origins.count, paused, origins.isEmpty ? [] : [(settings.limiter.maxLimit, origins.count)])
        }
        var limits: [(limit: Int, origins: Int)] = []
        for (limit, count) in originsByLimit.enumerated() where count > 0 { limits.append((limit, count)) }
        return (origins.count, paused, limits)
    }
}
