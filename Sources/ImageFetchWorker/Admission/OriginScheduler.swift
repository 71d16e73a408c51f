import NIOCore

/// Decides which waiting job starts next, and which jobs should leave the prefetch window.
/// Pure state: no I/O, no clock and no randomness of its own; every event carries the time in
/// nanoseconds, and the backoff's jitter comes from the source it is given.
///
/// - **Per origin**, jobs wait in arrival order, and an ``OriginLimiter`` says how many may run.
///   A paused origin (`Retry-After`, or the backoff after a 429 or 503 without it) starts nothing
///   until its pause ends.
/// - **Between origins**, a free global permit goes to the origin with the fewest jobs running,
///   ties to the one served longest ago: max-min fair shares of the permits among the origins
///   that have work, and work-conserving, since an origin alone takes every permit.
/// - **Between tenants**, first (`OriginScheduler+Tenants.swift`): when jobs of more than one
///   tenant wait, or tenants have caps, the permit goes to a tenant by ``TenantShares``, and then to
///   the fairest of that tenant's origins. With one tenant and no caps this level costs nothing.
/// - **The prefetch window** is shared by demand (`OriginScheduler+Window.swift`): a job leaves it
///   only when its origin is paused, or holds more than its share and would keep the job longer
///   than ``Settings/maxWaitNanoseconds`` at its own pace, and only when that lets the broker
///   deliver other jobs.
package struct OriginScheduler<Element> {
    package struct Settings: Sendable {
        package var limiter: OriginLimiter.Settings
        /// Whether limits adapt; without it every origin may use `limiter.maxLimit` at once.
        package var adaptive: Bool = true
        /// The longest a job may expect to wait for its origin in the window.
        package var maxWaitNanoseconds: UInt64 = 1_000_000_000
        /// The prefetch window: how many deliveries the broker lets the worker hold.
        package var window: Int
        /// The longest pause a `Retry-After` sets.
        package var maxPauseNanoseconds: UInt64 = 300_000_000_000
        /// The first pause after a 429 or 503 without `Retry-After`; it doubles with each further
        /// refusal. 0: such a refusal only cuts the limit.
        package var overloadPauseNanoseconds: UInt64 = 1_000_000_000
        /// The longest pause that backoff reaches.
        package var maxOverloadPauseNanoseconds: UInt64 = 60_000_000_000
        /// An origin that refused or slowed down (a cut limit, a backoff) is forgotten after this
        /// long with nothing running or waiting; others once they are no longer active.
        package var idleNanoseconds: UInt64 = 300_000_000_000
        /// An origin counts as active this long after its last job; also the time over which its
        /// demand (the jobs that arrive for it) is averaged.
        package var activeNanoseconds: UInt64 = 5_000_000_000
        /// An origin is slow only when its fetches take this many times the typical active
        /// origin's. When every origin slows down at once, the worker itself (its CPU, its link) is
        /// the bottleneck, and deferring jobs would only cycle them through the delay queues.
        package var slowFactor: Double = 4
        /// Per-tenant caps.
        package var tenants = TenantShares.Settings()

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
        /// The job's tenant's slot in ``TenantShares``.
        package var tenant: Int = 0

        /// What ``OriginScheduler/finished(_:outcome:now:)`` needs, without the job.
        package var slot: OriginSlot {
            OriginSlot(origin: origin, startedAt: startedAt, inFlightAtStart: inFlightAtStart, tenant: tenant)
        }
    }

    /// What a finished fetch tells about its origin.
    package typealias FetchOutcome = OriginFetchOutcome

    /// Changes worth a log line and a metric.
    package enum Event: Equatable, Sendable {
        case limitCut(Origin, OriginLimiter.Cut)
        /// Paused by its `Retry-After`.
        case paused(Origin, seconds: Double)
        /// Paused by the backoff after a 429 or 503 without `Retry-After`.
        case backedOff(Origin, seconds: Double)
    }

    /// Why a job leaves the window.
    package enum DeferralReason: String, Sendable, Equatable {
        /// Its origin is paused for longer than the longest wait.
        case paused
        /// Its origin holds more than its share of the window, and its own pace would keep the
        /// job waiting longer than the longest wait.
        case slow
    }

    /// A waiting job that should leave the window; `atLeastSeconds` is its origin's pause, if any.
    package struct Deferral {
        package var element: Element
        package var origin: Origin
        package var atLeastSeconds: Double?
        package var reason: DeferralReason
    }

    struct Entry {
        var element: Element
        var enqueuedAt: UInt64
        /// The job's tenant's slot in ``OriginScheduler/tenants``.
        var tenant: Int
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
        /// The jobs that arrived for it for the first time (not back from a deferral), averaged
        /// over ``Settings/activeNanoseconds``: its share of the window.
        var demand = DecayingCount()
        /// Backoff pauses since its last success, and when the last one began: refusals of
        /// requests sent before then are the same event.
        var backoffLevel = 0
        var backoffSince: UInt64?
        /// Until when its arrivals leave at once: a paused origin alone that filled the window.
        var spillingUntil: UInt64 = 0
        /// Its place in ``OriginScheduler/busy`` while it has jobs running or waiting.
        var busyIndex: Int?
        /// The limit ``OriginScheduler/originsByLimit`` counts it under.
        var countedLimit: Int

        init(limiter: OriginLimiter, now: UInt64) {
            self.limiter = limiter
            self.lastActive = now
            self.countedLimit = limiter.limit
        }

        var work: Int { inFlight + waiting.count }

        /// Whether it refused or slowed down since it became known: kept for ``Settings/idleNanoseconds``.
        var remembersOverload: Bool { limiter.rememberedOverload || backoffLevel > 0 || overloadResponses > 0 }

        func remainingPause(now: UInt64) -> UInt64 {
            guard let pausedUntil, pausedUntil > now else { return 0 }
            return pausedUntil - now
        }
    }

    package let settings: Settings
    /// The backoff's jitter: a number in [0, 1) per pause.
    let jitter: @Sendable () -> Double
    var origins: [Origin: State] = [:]
    /// Origins with waiting jobs, in no particular order.
    var backlogged: [Origin] = []
    /// Origins with jobs running or waiting, in no particular order: what `/origins` ranks, so
    /// that it reads the busy origins, never all the known ones.
    var busy: [Origin] = []
    /// Known origins by limit (the index): the limit histogram without reading every origin.
    var originsByLimit: [Int]
    /// When each paused origin's pause ends (expired ones go at the next sweep).
    var pauseEnds: [Origin: UInt64] = [:]
    /// All origins' demand together.
    var totalDemand = DecayingCount()
    /// The typical pace of the active origins, as of the last ``sweep(now:)``: the median of their
    /// average fetch times, in nanoseconds, once two of them have one. What ``Settings/slowFactor``
    /// compares an origin's pace with.
    var typicalDurationNanoseconds: Double?
    /// The sweep's scratch list of those averages, kept to spare an allocation every 200 ms.
    var durationScratch: [Double] = []
    /// Whether the last sample of the jobs queue found jobs ready behind the window.
    package var queueBehind = false
    package internal(set) var waitingCount = 0
    package internal(set) var inFlightCount = 0
    /// Jobs that share the fetch of a waiting or running job (docs/architecture.md, "Shared
    /// fetches"): outside the origins' queues, but in the prefetch window all the same, so the
    /// window counts them. Otherwise a paused origin's followers would fill the window unseen.
    /// Admission sets it from the shared-fetch table, which keeps the count, before each decision.
    package var followers = 0
    /// Origins that had work within ``Settings/activeNanoseconds``, as of the last ``sweep(now:)``.
    package internal(set) var activeOrigins = 0
    var serveCounter: UInt64 = 0
    /// The tenants of the jobs held, and the choice among them.
    package internal(set) var tenants: TenantShares

    package init(settings: Settings, jitter: @escaping @Sendable () -> Double = { Double.random(in: 0..<1) }) {
        self.settings = settings
        self.jitter = jitter
        self.originsByLimit = Array(repeating: 0, count: settings.limiter.maxLimit + 1)
        self.tenants = TenantShares(settings: settings.tenants)
    }

    // MARK: - Jobs in

    /// A job for `origin` arrived, of `tenant` (nil: the default tenant); `deferredBefore` when it
    /// comes back from a deferral (its demand was counted when it first came). It waits for its
    /// turn; the answer says whether it should leave the window at once instead. The window's
    /// verdict is its origin's alone: a tenant never makes a job leave.
    package mutating func enqueue(
        _ element: Element, origin: Origin, tenant: String? = nil, now: UInt64,
        deferredBefore: Bool = false
    ) -> Deferral? {
        let tenantSlot = tenants.slot(for: tenant)
        // One lookup for a known origin (an index stays valid until the dictionary changes).
        let index: [Origin: State].Index
        if let known = origins.index(forKey: origin) {
            index = known
            let active = settings.activeNanoseconds
            if Self.peek(
                &origins.values[index], { $0.work == 0 && Self.elapsed(since: $0.lastActive, now: now) > active })
            {
                activeOrigins += 1  // counted until the next sweep recounts
            }
        } else {
            activeOrigins += 1
            let limiter = OriginLimiter(settings: settings.limiter)
            originsByLimit[limiter.limit] += 1
            origins[origin] = State(limiter: limiter, now: now)
            index = origins.index(forKey: origin)!
        }
        if !deferredBefore {
            totalDemand.add(now: now, tau: settings.activeNanoseconds)
            origins.values[index].demand.add(now: now, tau: settings.activeNanoseconds)
        }
        let context = windowContext(now: now)
        // In place: a copy of the state alive here would make the append copy its queue.
        if let leave = Self.admit(
            Entry(element: element, enqueuedAt: now, tenant: tenantSlot), into: &origins.values[index],
            context: context, settings: settings)
        {
            tenants.release(tenantSlot)
            return Deferral(
                element: element, origin: origin, atLeastSeconds: leave.atLeastSeconds,
                reason: leave.reason)
        }
        if Self.peek(&origins.values[index], { $0.waiting.count == 1 }) { backlogged.append(origin) }
        waitingCount += 1
        tenants.enqueued(tenantSlot)
        syncBusy(index)
        return nil
    }

    private static func admit(
        _ entry: Entry, into state: inout State, context: WindowContext,
        settings: Settings
    ) -> Leave? {
        state.lastActive = context.now
        let verdict = windowVerdict(state, position: state.waiting.count, context: context, settings: settings)
        switch verdict {
        case .keep:
            state.waiting.append(entry)
            return nil
        case .leave(let leave):
            noteLeave(leave, of: &state)
            return leave
        }
    }

    /// Runs `body` on an origin's state in place, through its index: the key's own accessor
    /// moves the state out of the dictionary and back.
    @inline(__always)
    static func modify<R>(_ origins: inout [Origin: State], _ origin: Origin, _ body: (inout State) -> R) -> R {
        body(&origins.values[origins.index(forKey: origin)!])
    }

    /// Time from `since` to `now`, 0 when `now` is the earlier: callers read their clock before
    /// they take the scheduler's lock, so one call's time can be a little before the last one's.
    @inline(__always)
    static func elapsed(since: UInt64, now: UInt64) -> UInt64 {
        now > since ? now - since : 0
    }

    /// Reads an origin's state where it lies. Read as a value, `origins.values[index]` copies the
    /// whole state, its queue's and limiter's references retained and released, for each field:
    /// about a fifth of the scheduler's cost a job, and once per waiting origin when choosing
    /// among many (callgrind). Through the in-place accessor it costs nothing.
    @inline(__always)
    static func peek<R>(_ state: inout State, _ body: (State) -> R) -> R {
        body(state)
    }

    /// Whether some waiting job could start now, given a global permit. Mutating only to read
    /// the origins' states in place (``peek(_:_:)``).
    package mutating func hasStartable(now: UInt64) -> Bool {
        if !tenants.isTrivial { return hasStartableOfTenants(now: now) }
        let settings = self.settings
        for origin in backlogged {
            guard let index = origins.index(forKey: origin) else { continue }
            if Self.peek(&origins.values[index], { Self.canStart($0, now: now, settings: settings) }) { return true }
        }
        return false
    }

    /// Takes the job that should use the global permit the caller holds, if any may start.
    package mutating func next(now: UInt64) -> Start? {
        if !tenants.isTrivial { return nextOfTenants(now: now) }
        // Only the ranks are kept, never a copy of a state: a copy alive across the `modify` below
        // would share the origin's queue and make `removeFirst` copy all of it, for every job.
        let settings = self.settings
        var best: (index: Int, inFlight: Int, lastServed: UInt64)?
        for (index, origin) in backlogged.enumerated() {
            guard let stateIndex = origins.index(forKey: origin) else { continue }
            let rank = Self.peek(&origins.values[stateIndex]) { state in
                Self.canStart(state, now: now, settings: settings) ? (state.inFlight, state.lastServed) : nil
            }
            guard let rank else { continue }
            if let current = best, (current.inFlight, current.lastServed) <= rank { continue }
            best = (index, rank.0, rank.1)
        }
        guard let best = best?.index else { return nil }
        return start(backlogged: best, entryAt: nil, now: now)
    }

    /// Starts a waiting job of the origin at `backlogged[place]`: its first, or the one at `position`.
    mutating func start(backlogged place: Int, entryAt position: CircularBuffer<Entry>.Index?, now: UInt64) -> Start {
        let origin = backlogged[place]
        serveCounter += 1
        let served = serveCounter
        let (entry, inFlightAtStart, drained) = Self.modify(&origins, origin) { state in
            let entry = position.map { state.waiting.remove(at: $0) } ?? state.waiting.removeFirst()
            if state.inFlight == 0 { state.busySince = now }
            state.inFlight += 1
            state.lastServed = served
            state.lastActive = now
            return (entry, state.inFlight, state.waiting.isEmpty)
        }
        if drained {
            backlogged.swapAt(place, backlogged.count - 1)
            backlogged.removeLast()
        }
        waitingCount -= 1
        inFlightCount += 1
        tenants.started(entry.tenant, served: served)
        return Start(
            element: entry.element, origin: origin, startedAt: now, inFlightAtStart: inFlightAtStart,
            tenant: entry.tenant)
    }

    static func canStart(_ state: State, now: UInt64, settings: Settings) -> Bool {
        guard !state.waiting.isEmpty, state.remainingPause(now: now) == 0 else { return false }
        return state.inFlight < limit(state, settings: settings)
    }

    func limit(_ state: State) -> Int {
        Self.limit(state, settings: settings)
    }

    static func limit(_ state: State, settings: Settings) -> Int {
        settings.adaptive ? state.limiter.limit : settings.limiter.maxLimit
    }

    // MARK: - Busy origins

    /// Keeps ``busy`` in step with the origin's work after a change.
    mutating func syncBusy(_ index: [Origin: State].Index) {
        let (work, slot) = Self.peek(&origins.values[index]) { ($0.work, $0.busyIndex) }
        if work > 0, slot == nil {
            origins.values[index].busyIndex = busy.count
            busy.append(origins.keys[index])
        } else if work == 0, let slot {
            origins.values[index].busyIndex = nil
            let last = busy.removeLast()
            if slot < busy.count {
                busy[slot] = last
                if let moved = origins.index(forKey: last) { origins.values[moved].busyIndex = slot }
            }
        }
    }
}

extension OriginScheduler: Sendable where Element: Sendable {}
extension OriginScheduler.Start: Sendable where Element: Sendable {}
extension OriginScheduler.Deferral: Sendable where Element: Sendable {}
extension OriginScheduler.State: Sendable where Element: Sendable {}
extension OriginScheduler.Entry: Sendable where Element: Sendable {}

/// What a finished fetch tells the scheduler about its origin; the same for any element type.
package enum OriginFetchOutcome: Sendable, Equatable {
    /// A response came. `latencyNanoseconds` is the time to first byte after the connection was
    /// set up; `retryAfterSeconds` the parsed `Retry-After` of a 429 or 503.
    case response(
        status: Int, latencyNanoseconds: UInt64?, durationNanoseconds: UInt64,
        retryAfterSeconds: Double?)
    /// A connect timeout, or a refused or reset connection.
    case connectFailure(durationNanoseconds: UInt64)
    /// The host name did not resolve. It says nothing about the origin's load, so no limit is cut,
    /// but its duration is the origin's pace: a name whose lookups time out holds each job that long.
    case nameFailure(durationNanoseconds: UInt64)
    /// Anything that says nothing about the origin's load or pace (TLS, a veto, an abort).
    case other
}
