import NIOCore

/// The prefetch window (docs/scheduling.md, "The prefetch window"): which waiting jobs leave it.
///
/// A job leaves only when that can help, and only for a reason of its own origin:
/// - **Helps**: the window is at least half full, or the last queue-depth sample found jobs ready
///   behind it. Below that the broker can deliver other origins' jobs anyway.
/// - **Paused**: its origin is paused for longer than the longest wait. Alone, such an origin
///   gives its jobs up only when they fill the window (or the queue has jobs behind them): nothing
///   else is known to wait, and a full window of a paused origin is itself that sign.
/// - **Slow**: its origin holds more than its share of the window, its fetches take several times
///   as long as the typical active origin's, and at the origin's own pace (its limit and its average fetch
///   time, not the permits it happens to get beside others) the job would wait longer than the
///   longest wait. When every origin is slow at once, the worker is what is slow (a saturated
///   CPU), and nothing leaves for that. The share is by demand: the window times the
///   origin's part of the jobs that arrived lately. A popular origin has a large share, and a
///   healthy one works through its queue fast, so neither popularity nor a crowd of other origins
///   defers its jobs.
///
/// A job whose origin has room (not paused, and fewer jobs than its limit ahead) therefore never
/// leaves, in particular one that comes back from a deferral.
extension OriginScheduler {
    /// What the rules need besides the origin's own state.
    struct WindowContext {
        var now: UInt64
        var activeOrigins: Int
        /// Jobs the worker holds: running, waiting, and following another's fetch.
        var held: Int
        var totalDemand: Double
        var queueBehind: Bool
        var typicalDuration: Double?
    }

    struct Leave: Equatable {
        var atLeastSeconds: Double?
        var reason: DeferralReason
        /// The origin is alone: its arrivals leave at once for the rest of its pause.
        var spill = false
    }

    enum WindowVerdict: Equatable {
        case keep
        case leave(Leave)
    }

    func windowContext(now: UInt64) -> WindowContext {
        WindowContext(
            now: now, activeOrigins: activeOrigins, held: inFlightCount + waitingCount + followers,
            totalDemand: totalDemand.value(now: now, tau: settings.activeNanoseconds),
            queueBehind: queueBehind, typicalDuration: typicalDurationNanoseconds)
    }

    /// Whether the job at `position` in its origin's queue should leave the window.
    static func windowVerdict(
        _ state: State, position: Int, context: WindowContext,
        settings: Settings
    ) -> WindowVerdict {
        let now = context.now
        let pause = state.remainingPause(now: now)
        let atLeast = pause > 0 ? Double(pause) / 1e9 : nil
        let window = settings.window
        let helps = context.held * 2 >= window || context.queueBehind
        if pause > settings.maxWaitNanoseconds {
            guard context.activeOrigins <= 1 else {
                return helps ? .leave(Leave(atLeastSeconds: atLeast, reason: .paused)) : .keep
            }
            let spill = now < state.spillingUntil || context.held >= window || context.queueBehind
            return spill ? .leave(Leave(atLeastSeconds: atLeast, reason: .paused, spill: true)) : .keep
        }
        guard context.activeOrigins > 1, helps else { return .keep }
        let held = state.inFlight + position + 1
        let demand = state.demand.value(now: now, tau: settings.activeNanoseconds)
        let share =
            context.totalDemand > 0
            ? Double(window) * min(demand / context.totalDemand, 1)
            : Double(window) / Double(context.activeOrigins)
        guard Double(held) > max(share, 1) else { return .keep }
        // Until a fetch of the origin ends, its first one's age is the best guess of a duration.
        let duration =
            state.durationNanoseconds ?? state.busySince.map { Double(Self.elapsed(since: $0, now: now)) } ?? 0
        if let typical = context.typicalDuration, duration < typical * settings.slowFactor, pause == 0 { return .keep }
        let lanes = Double(max(1, settings.adaptive ? state.limiter.limit : settings.limiter.maxLimit))
        let expected = Double(pause) + max(0, Double(held) - lanes) * duration / lanes
        guard expected > Double(settings.maxWaitNanoseconds) else { return .keep }
        return .leave(Leave(atLeastSeconds: atLeast, reason: .slow))
    }

    /// A paused origin alone that gives its jobs up keeps doing so until its pause ends.
    static func noteLeave(_ leave: Leave, of state: inout State) {
        if leave.spill, let pausedUntil = state.pausedUntil {
            state.spillingUntil = max(state.spillingUntil, pausedUntil)
        }
    }

    // MARK: - The sweep

    /// Recounts the active origins and their typical pace, forgets idle ones, and gives up the waiting jobs that should
    /// leave the window (newest first).
    package mutating func sweep(now: UInt64) -> [Deferral] {
        var active = 0
        var idle: [Origin] = []
        durationScratch.removeAll(keepingCapacity: true)
        for (origin, state) in origins {
            if state.work > 0 || Self.elapsed(since: state.lastActive, now: now) <= settings.activeNanoseconds {
                active += 1
                if let duration = state.durationNanoseconds { durationScratch.append(duration) }
            } else if state.remainingPause(now: now) == 0,
                !state.remembersOverload || Self.elapsed(since: state.lastActive, now: now) > settings.idleNanoseconds
            {
                // Most origins of a dataset are seen once: what they taught (a baseline, a limit
                // above the initial one) is not worth their memory, and a fresh limiter is the more
                // careful one. A refusal is kept for the idle time, for politeness.
                idle.append(origin)
            }
        }
        activeOrigins = active
        if durationScratch.count >= 2 {
            durationScratch.sort()
            typicalDurationNanoseconds = durationScratch[(durationScratch.count - 1) / 2]
        } else {
            typicalDurationNanoseconds = nil
        }
        for origin in idle {
            if let state = origins.removeValue(forKey: origin) { originsByLimit[state.countedLimit] -= 1 }
        }
        if !pauseEnds.isEmpty { pauseEnds = pauseEnds.filter { $0.value > now } }

        var deferred: [Deferral] = []
        // The tenants of the jobs that leave; allocated only when some do.
        var leftTenants: [Int] = []
        var context = windowContext(now: now)
        var index = 0
        while index < backlogged.count {
            let origin = backlogged[index]
            guard let stateIndex = origins.index(forKey: origin) else {
                index += 1
                continue
            }
            let current = settings
            let before = deferred.count
            let drained = Self.modify(&origins, origin) { state -> Bool in
                while !state.waiting.isEmpty,
                    case .leave(let leave) = Self.windowVerdict(
                        state, position: state.waiting.count - 1,
                        context: context, settings: current)
                {
                    Self.noteLeave(leave, of: &state)
                    let entry = state.waiting.removeLast()
                    leftTenants.append(entry.tenant)
                    context.held -= 1
                    deferred.append(
                        Deferral(
                            element: entry.element, origin: origin,
                            atLeastSeconds: leave.atLeastSeconds, reason: leave.reason))
                }
                return state.waiting.isEmpty
            }
            waitingCount -= deferred.count - before
            if deferred.count > before { syncBusy(stateIndex) }
            if drained {
                backlogged.swapAt(index, backlogged.count - 1)
                backlogged.removeLast()
            } else {
                index += 1
            }
        }
        for tenant in leftTenants { tenants.left(tenant) }
        return deferred
    }

    // MARK: - Taking jobs back

    /// Every waiting job (the drain, or a lost channel, hands them back), oldest first per origin.
    package mutating func takeAll() -> [Element] {
        var removed: [Element] = []
        removed.reserveCapacity(waitingCount)
        for origin in backlogged {
            guard let stateIndex = origins.index(forKey: origin) else { continue }
            for entry in origins.values[stateIndex].waiting {
                removed.append(entry.element)
                tenants.left(entry.tenant)
            }
            origins.values[stateIndex].waiting = CircularBuffer()
            syncBusy(stateIndex)
        }
        backlogged.removeAll()
        waitingCount = 0
        return removed
    }

    /// When the earliest pause of an origin with waiting jobs ends, so that admission looks again.
    package func nextPauseEnd(now: UInt64) -> UInt64? {
        backlogged.compactMap { origins[$0]?.pausedUntil }.filter { $0 > now }.min()
    }

    /// Whether `origin` is paused now.
    package func isPaused(_ origin: Origin, now: UInt64) -> Bool {
        (origins[origin]?.remainingPause(now: now) ?? 0) > 0
    }
}
