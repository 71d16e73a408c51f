import NIOCore

/// Decides which waiting job starts next, and which jobs should leave the prefetch window.
/// Pure state: no I/O and no clock of its own; every event carries the time in nanoseconds.
///
/// - **Per origin**, jobs wait in arrival order, and an ``OriginLimiter`` says how many may run.
///   A paused origin (`Retry-After`) starts nothing until its pause ends.
/// - **Between origins**, a free global permit goes to the origin with the fewest jobs running,
///   ties to the one served longest ago: max-min fair shares of the permits among the origins
///   that have work, and work-conserving, since an origin alone takes every permit.
/// - **The prefetch window** is shared too. When more than one origin is active, an origin that
///   holds more than its share of the window and whose waiting job would wait longer than
///   ``Settings/maxWaitNanoseconds`` (its pause, plus its queue over its throughput) gives that job
///   up for deferral, so that the broker can deliver jobs for the other origins in its place.
///   An origin alone is never deferred: nothing waits behind it.
package struct OriginScheduler<Element> {
    package struct Settings: Sendable {
        package var limiter: OriginLimiter.Settings
        /// Whether limits adapt; without it every origin may use `limiter.maxLimit` at once.
        package var adaptive: Bool = true
        /// The longest a job may expect to wait in the window while other origins are active.
        package var maxWaitNanoseconds: UInt64 = 1_000_000_000
        /// The prefetch window: how many deliveries the broker lets the worker hold.
        package var window: Int
        /// The longest pause a `Retry-After` sets.
        package var maxPauseNanoseconds: UInt64 = 300_000_000_000
        /// An origin with nothing running or waiting for this long is forgotten.
        package var idleNanoseconds: UInt64 = 300_000_000_000
        /// An origin counts as active this long after its last job (for the window shares).
        package var activeNanoseconds: UInt64 = 5_000_000_000

        package init(limiter: OriginLimiter.Settings, window: Int) {
            self.limiter = limiter
            self.window = max(1, window)
        }
    }

    /// A job that may start now.
    package struct Start {
        package var element: Element
        package var origin: Origin
        package var startedAt: UInt64
        /// Jobs of the origin running with this one, itself included.
        package var inFlightAtStart: Int

        /// What ``OriginScheduler/finished(_:outcome:now:)`` needs, without the job.
        package var slot: OriginSlot {
            OriginSlot(origin: origin, startedAt: startedAt, inFlightAtStart: inFlightAtStart)
        }
    }

    /// What a finished fetch tells about its origin.
    package enum FetchOutcome: Sendable, Equatable {
        /// A response came. `latencyNanoseconds` is the time to first byte after the connection was
        /// set up; `retryAfterSeconds` the parsed `Retry-After` of a 429 or 503.
        case response(status: Int, latencyNanoseconds: UInt64?, durationNanoseconds: UInt64, retryAfterSeconds: Double?)
        /// A connect timeout, or a refused or reset connection.
        case connectFailure(durationNanoseconds: UInt64)
        /// Anything that says nothing about the origin's load (DNS, TLS, a veto, an abort).
        case other
    }

    /// Changes worth a log line and a metric.
    package enum Event: Equatable, Sendable {
        case limitCut(Origin, OriginLimiter.Cut)
        case paused(Origin, seconds: Double)
    }

    /// A waiting job that should leave the window; `atLeastSeconds` is its origin's pause, if any.
    package struct Deferral {
        package var element: Element
        package var origin: Origin
        package var atLeastSeconds: Double?
    }

    struct Entry {
        var element: Element
        var enqueuedAt: UInt64
    }

    struct State {
        var limiter: OriginLimiter
        var inFlight = 0
        var waiting = CircularBuffer<Entry>()
        var pausedUntil: UInt64?
        var lastActive: UInt64
        /// When the origin last went from idle to busy, to estimate a first job's duration.
        var busySince: UInt64?
        /// Average duration of a whole fetch, in nanoseconds.
        var durationNanoseconds: Double?
        var lastServed: UInt64 = 0
        var overloadResponses = 0

        func remainingPause(now: UInt64) -> UInt64 {
            guard let pausedUntil, pausedUntil > now else { return 0 }
            return pausedUntil - now
        }
    }

    package let settings: Settings
    private(set) var origins: [Origin: State] = [:]
    /// Origins with waiting jobs, in no particular order.
    private var backlogged: [Origin] = []
    package private(set) var waitingCount = 0
    package private(set) var inFlightCount = 0
    /// Origins that had work within ``Settings/activeNanoseconds``, as of the last ``sweep(now:)``.
    package private(set) var activeOrigins = 0
    private var serveCounter: UInt64 = 0

    package init(settings: Settings) {
        self.settings = settings
    }

    // MARK: - Jobs in

    /// A job for `origin` arrived. It waits for its turn; the answer says whether it should leave
    /// the window at once instead (its origin is paused or busy, and others are active).
    package mutating func enqueue(_ element: Element, origin: Origin, now: UInt64) -> Deferral? {
        // One lookup for a known origin (an index stays valid until the dictionary changes).
        let index: [Origin: State].Index
        if let known = origins.index(forKey: origin) {
            index = known
            let state = origins.values[index]
            if state.inFlight == 0 && state.waiting.isEmpty && now &- state.lastActive > settings.activeNanoseconds {
                activeOrigins += 1  // counted until the next sweep recounts
            }
        } else {
            activeOrigins += 1
            origins[origin] = State(limiter: OriginLimiter(settings: settings.limiter), lastActive: now)
            index = origins.index(forKey: origin)!
        }
        let (current, active) = (settings, activeOrigins)
        // In place: a copy of the state alive here would make the append copy its queue.
        let verdict = Self.admit(element, into: &origins.values[index], now: now, settings: current, activeOrigins: active)
        if case .leave(let atLeast) = verdict {
            return Deferral(element: element, origin: origin, atLeastSeconds: atLeast)
        }
        if origins.values[index].waiting.count == 1 { backlogged.append(origin) }
        waitingCount += 1
        return nil
    }

    private static func admit(_ element: Element, into state: inout State, now: UInt64, settings: Settings,
                              activeOrigins: Int) -> WindowVerdict {
        state.lastActive = now
        let verdict = windowVerdict(state, position: state.waiting.count, now: now, settings: settings,
                                    activeOrigins: activeOrigins)
        if verdict == .keep { state.waiting.append(Entry(element: element, enqueuedAt: now)) }
        return verdict
    }

    /// Runs `body` on an origin's state in place.
    @inline(__always)
    private static func modify<R>(_ origins: inout [Origin: State], _ origin: Origin, _ body: (inout State) -> R) -> R {
        body(&origins[origin]!)
    }

    /// Whether some waiting job could start now, given a global permit.
    package func hasStartable(now: UInt64) -> Bool {
        backlogged.contains { origin in
            guard let state = origins[origin] else { return false }
            return canStart(state, now: now)
        }
    }

    /// Takes the job that should use the global permit the caller holds, if any may start.
    package mutating func next(now: UInt64) -> Start? {
        // Only the ranks are kept, never a copy of a state: a copy alive across the `modify` below
        // would share the origin's queue and make `removeFirst` copy all of it, for every job.
        var best: (index: Int, inFlight: Int, lastServed: UInt64)?
        for (index, origin) in backlogged.enumerated() {
            guard let state = origins[origin], canStart(state, now: now) else { continue }
            if let current = best, (current.inFlight, current.lastServed) <= (state.inFlight, state.lastServed) {
                continue
            }
            best = (index, state.inFlight, state.lastServed)
        }
        guard let best = best?.index else { return nil }
        let origin = backlogged[best]
        serveCounter += 1
        let served = serveCounter
        let (entry, inFlightAtStart, drained) = Self.modify(&origins, origin) { state in
            let entry = state.waiting.removeFirst()
            if state.inFlight == 0 { state.busySince = now }
            state.inFlight += 1
            state.lastServed = served
            state.lastActive = now
            return (entry, state.inFlight, state.waiting.isEmpty)
        }
        if drained { backlogged.swapAt(best, backlogged.count - 1); backlogged.removeLast() }
        waitingCount -= 1
        inFlightCount += 1
        return Start(element: entry.element, origin: origin, startedAt: now, inFlightAtStart: inFlightAtStart)
    }

    private func canStart(_ state: State, now: UInt64) -> Bool {
        guard !state.waiting.isEmpty, state.remainingPause(now: now) == 0 else { return false }
        return state.inFlight < limit(state)
    }

    private func limit(_ state: State) -> Int {
        settings.adaptive ? state.limiter.limit : settings.limiter.maxLimit
    }

    // MARK: - Jobs out

    /// A fetch started by ``next(now:)`` ended.
    package mutating func finished(_ slot: OriginSlot, outcome: FetchOutcome, now: UInt64) -> [Event] {
        finished(origin: slot.origin, startedAt: slot.startedAt, inFlightAtStart: slot.inFlightAtStart,
                 outcome: outcome, now: now)
    }

    package mutating func finished(origin: Origin, startedAt: UInt64, inFlightAtStart: Int, outcome: FetchOutcome,
                                   now: UInt64) -> [Event] {
        guard let index = origins.index(forKey: origin), origins.values[index].inFlight > 0 else { return [] }
        inFlightCount -= 1
        // In place and with the one lookup: a copy of the state costs retains and a second lookup.
        return Self.finish(&origins.values[index], origin: origin, startedAt: startedAt, inFlightAtStart: inFlightAtStart,
                           outcome: outcome, now: now, settings: settings)
    }

    private static func finish(_ state: inout State, origin: Origin, startedAt: UInt64, inFlightAtStart: Int,
                               outcome: FetchOutcome, now: UInt64, settings: Settings) -> [Event] {
        let inFlight = state.inFlight
        state.inFlight -= 1
        state.lastActive = now
        var events: [Event] = []
        var cut: OriginLimiter.Cut?
        switch outcome {
        case .response(let status, let latency, let duration, let retryAfter):
            state.durationNanoseconds = state.durationNanoseconds.map { $0 + (Double(duration) - $0) * 0.2 }
                ?? Double(duration)
            if status == 429 || status == 503 {
                state.overloadResponses += 1
                cut = state.limiter.overloaded(status == 429 ? .tooManyRequests : .serviceUnavailable,
                                               inFlightAtStart: inFlightAtStart, startedAt: startedAt, now: now)
                if let retryAfter {
                    let pause = min(UInt64(max(retryAfter, 0) * 1e9), settings.maxPauseNanoseconds)
                    let until = now + pause
                    if pause > 0, until > (state.pausedUntil ?? 0) {
                        state.pausedUntil = until
                        events.append(.paused(origin, seconds: Double(pause) / 1e9))
                    }
                }
            } else {
                cut = state.limiter.succeeded(latencyNanoseconds: latency, startedAt: startedAt, inFlight: inFlight,
                                              now: now)
            }
        case .connectFailure:
            cut = state.limiter.overloaded(.connectFailure, inFlightAtStart: inFlightAtStart, startedAt: startedAt,
                                           now: now)
        case .other:
            break
        }
        if let cut, settings.adaptive, cut.to < cut.from { events.insert(.limitCut(origin, cut), at: 0) }
        if state.inFlight == 0 { state.busySince = nil }
        return events
    }

    // MARK: - The window

    /// Recounts the active origins, forgets idle ones, and gives up the waiting jobs that should
    /// leave the window (newest first).
    package mutating func sweep(now: UInt64) -> [Deferral] {
        var active = 0
        var idle: [Origin] = []
        for (origin, state) in origins {
            if state.inFlight > 0 || !state.waiting.isEmpty || now &- state.lastActive <= settings.activeNanoseconds {
                active += 1
            } else if now &- state.lastActive > settings.idleNanoseconds, state.remainingPause(now: now) == 0 {
                idle.append(origin)
            }
        }
        activeOrigins = active
        for origin in idle { origins[origin] = nil }
        guard active > 1 else { return [] }

        var deferred: [Deferral] = []
        var index = 0
        while index < backlogged.count {
            let origin = backlogged[index]
            guard origins[origin] != nil else { index += 1; continue }
            let current = settings
            let before = deferred.count
            let drained = Self.modify(&origins, origin) { state -> Bool in
                while !state.waiting.isEmpty,
                      case .leave(let atLeast) = Self.windowVerdict(state, position: state.waiting.count - 1, now: now,
                                                                    settings: current, activeOrigins: active) {
                    let entry = state.waiting.removeLast()
                    deferred.append(Deferral(element: entry.element, origin: origin, atLeastSeconds: atLeast))
                }
                return state.waiting.isEmpty
            }
            waitingCount -= deferred.count - before
            if drained {
                backlogged.swapAt(index, backlogged.count - 1)
                backlogged.removeLast()
            } else {
                index += 1
            }
        }
        return deferred
    }

    enum WindowVerdict: Equatable {
        case keep
        /// Leave the window, for at least the origin's pause (nil: not paused).
        case leave(atLeastSeconds: Double?)
    }

    /// Whether the job at `position` in its origin's queue should leave the window.
    static func windowVerdict(_ state: State, position: Int, now: UInt64, settings: Settings, activeOrigins: Int) -> WindowVerdict {
        guard activeOrigins > 1 else { return .keep }
        let share = max(1, settings.window / activeOrigins)
        guard state.inFlight + position + 1 > share else { return .keep }
        let pause = state.remainingPause(now: now)
        // Until a fetch of the origin ends, its first one's age is the best guess of a duration.
        let duration = state.durationNanoseconds ?? state.busySince.map { Double(now &- $0) } ?? 0
        let limit = settings.adaptive ? state.limiter.limit : settings.limiter.maxLimit
        let lanes = Double(max(1, min(state.inFlight, limit)))
        let expected = Double(pause) + Double(position + 1) * duration / lanes
        guard expected > Double(settings.maxWaitNanoseconds) else { return .keep }
        return .leave(atLeastSeconds: pause > 0 ? Double(pause) / 1e9 : nil)
    }

    /// Every waiting job (the drain hands them back), oldest first per origin.
    package mutating func takeAll() -> [Element] {
        removeWaiting { _ in true }
    }

    /// The waiting jobs that `predicate` picks (those of a lost channel), in arrival order per origin.
    package mutating func removeWaiting(where predicate: (Element) -> Bool) -> [Element] {
        var removed: [Element] = []
        var index = 0
        while index < backlogged.count {
            let origin = backlogged[index]
            guard var state = origins[origin] else { index += 1; continue }
            var kept = CircularBuffer<Entry>()
            for entry in state.waiting {
                if predicate(entry.element) { removed.append(entry.element) } else { kept.append(entry) }
            }
            waitingCount -= state.waiting.count - kept.count
            state.waiting = kept
            origins[origin] = state
            if kept.isEmpty {
                backlogged.swapAt(index, backlogged.count - 1)
                backlogged.removeLast()
            } else {
                index += 1
            }
        }
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

    // MARK: - Observation

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
        origins.sorted { visits += 2; return ($0.value.inFlight + $0.value.waiting.count, $1.key.description) > ($1.value.inFlight + $1.value.waiting.count, $0.key.description) }
            .prefix(count)
            .map { origin, state in
                let pause = state.remainingPause(now: now)
                return OriginSnapshot(
                    origin: origin, limit: limit(state), ceiling: state.limiter.ceiling, inFlight: state.inFlight,
                    waiting: state.waiting.count, pausedForSeconds: pause > 0 ? Double(pause) / 1e9 : nil,
                    latencyBaselineMilliseconds: state.limiter.baselineNanoseconds.map { $0 / 1e6 },
                    overloadResponses: state.overloadResponses, slowStart: state.limiter.phase == .slowStart)
            }
    }

    /// Origins the scheduler knows, paused origins, and every known origin's limit.
    package func gauges(now: UInt64) -> (known: Int, paused: Int, limits: [Int]) {
        var visits = 0
        return gauges(now: now, visits: &visits)
    }

    func gauges(now: UInt64, visits: inout Int) -> (known: Int, paused: Int, limits: [Int]) {
        visits += origins.count
        var paused = 0
        var limits: [Int] = []
        limits.reserveCapacity(origins.count)
        for state in origins.values {
            if state.remainingPause(now: now) > 0 { paused += 1 }
            limits.append(limit(state))
        }
        return (origins.count, paused, limits)
    }
}

extension OriginScheduler: Sendable where Element: Sendable {}
extension OriginScheduler.Start: Sendable where Element: Sendable {}
extension OriginScheduler.Deferral: Sendable where Element: Sendable {}
extension OriginScheduler.State: Sendable where Element: Sendable {}
extension OriginScheduler.Entry: Sendable where Element: Sendable {}
