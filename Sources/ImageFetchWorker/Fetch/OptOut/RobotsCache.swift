/// The robots.txt rules of each origin, and the fetches under way: a state machine without I/O or
/// a clock of its own (the caller passes `now`, in nanoseconds of a monotonic clock).
///
/// The first job of an origin whose rules are unknown or stale is told to fetch them; the jobs of
/// that origin that come while it does wait for the same fetch (``Lookup/wait``), so a burst of
/// jobs costs one robots.txt request. Rules are kept for `ttl`, the complete disallow of an
/// unreachable robots.txt for the shorter `errorTTL`, and at most `capacity` origins and
/// `maxRuleBytes` of rules are kept: beyond either, the least recently used go first.
package struct RobotsCache<Waiter> {
    package struct Settings: Sendable, Equatable {
        package var capacity: Int
        package var ttlNanoseconds: UInt64
        package var errorTTLNanoseconds: UInt64
        /// The memory the kept rules may take, as ``RobotsCache/cost(of:)`` estimates it: each
        /// origin chooses its own robots.txt, up to 500 KiB of one-byte rules.
        package var maxRuleBytes: Int

        /// 128 MiB: thousands of ordinary robots.txt files, and no more than this of hostile ones.
        package static var defaultMaxRuleBytes: Int { 128 << 20 }

        package init(
            capacity: Int, ttlNanoseconds: UInt64, errorTTLNanoseconds: UInt64,
            maxRuleBytes: Int = Self.defaultMaxRuleBytes
        ) {
            self.capacity = capacity
            self.ttlNanoseconds = ttlNanoseconds
            self.errorTTLNanoseconds = errorTTLNanoseconds
            self.maxRuleBytes = maxRuleBytes
        }
    }

    private enum Entry {
        case ready(RobotsRules, expiresAt: UInt64, lastUsed: UInt64, cost: Int)
        /// A fetch is under way; these wait for it.
        case fetching([Waiter])
    }

    /// What a lookup asks of the caller.
    package enum Lookup: Sendable {
        /// Known and fresh.
        case ready(RobotsRules)
        /// Unknown or stale: the caller fetches robots.txt and reports with ``fetched(_:_:now:)``.
        case fetch
        /// Another caller is fetching; the waiter gets the rules from ``fetched(_:_:now:)``.
        case wait
    }

    /// How a robots.txt fetch ended.
    package enum Fetched: Sendable {
        /// Rules to keep: parsed (2xx), ``RobotsRules/allowAll`` (4xx) or ``RobotsRules/disallowAll``.
        case rules(RobotsRules)
        /// The fetch was aborted (the drain's deadline): nothing is learnt, the waiters give up.
        case aborted
    }

    package let settings: Settings
    private var entries: [Origin: Entry] = [:]
    private var readyCount = 0
    /// The kept rules' ``cost(of:)``, summed.
    package private(set) var ruleBytes = 0

    package init(_ settings: Settings) {
        self.settings = settings
    }

    /// Looks up `origin`'s rules for a job; `waiter` is kept only when the answer is ``Lookup/wait``.
    package mutating func lookup(_ origin: Origin, waiter: Waiter, now: UInt64) -> Lookup {
        switch entries[origin] {
        case .ready(let rules, let expiresAt, _, let cost)? where now < expiresAt:
            entries[origin] = .ready(rules, expiresAt: expiresAt, lastUsed: now, cost: cost)
            return .ready(rules)
        case .ready(_, _, _, let cost)?:
            readyCount -= 1
            ruleBytes -= cost
            entries[origin] = .fetching([])
            return .fetch
        case .fetching(var waiters)?:
            // Emptied first, so appending does not copy the array.
            entries[origin] = .fetching([])
            waiters.append(waiter)
            entries[origin] = .fetching(waiters)
            return .wait
        case nil:
            entries[origin] = .fetching([])
            return .fetch
        }
    }

    /// The fetch of `origin`'s robots.txt ended: keeps the rules (unless aborted) and returns the
    /// waiters, each to be given the rules (nil: aborted).
    package mutating func fetched(
        _ origin: Origin, _ outcome: Fetched, now: UInt64
    ) -> (rules: RobotsRules?, waiters: [Waiter]) {
        var waiters: [Waiter] = []
        if case .fetching(let waiting)? = entries[origin] { waiters = waiting }
        guard case .rules(let rules) = outcome else {
            entries[origin] = nil
            return (nil, waiters)
        }
        let ttl = rules.source == .unreachable ? settings.errorTTLNanoseconds : settings.ttlNanoseconds
        if case .ready(_, _, _, let cost)? = entries[origin] { ruleBytes -= cost } else { readyCount += 1 }
        let cost = Self.cost(of: rules)
        ruleBytes += cost
        entries[origin] = .ready(rules, expiresAt: now &+ ttl, lastUsed: now, cost: cost)
        if readyCount > settings.capacity || ruleBytes > settings.maxRuleBytes { evict(now: now, keeping: origin) }
        return (rules, waiters)
    }

    /// Origins whose rules are kept.
    package var count: Int { readyCount }

    /// About the memory `rules` take: each rule's pattern as allocated, plus its array's header
    /// and allocation.
    package static func cost(of rules: RobotsRules) -> Int {
        rules.rules.reduce(64) { $0 + $1.pattern.capacity + 64 }
    }

    /// Drops expired entries, then the least recently used until within capacity and the rules'
    /// size. One pass over the entries, which only happens when a new origin's rules arrive with
    /// the cache full.
    private mutating func evict(now: UInt64, keeping kept: Origin) {
        var candidates: [(origin: Origin, lastUsed: UInt64, cost: Int)] = []
        for (origin, entry) in entries {
            guard origin != kept, case .ready(_, let expiresAt, let lastUsed, let cost) = entry else { continue }
            if expiresAt <= now {
                entries[origin] = nil
                readyCount -= 1
                ruleBytes -= cost
            } else {
                candidates.append((origin, lastUsed, cost))
            }
        }
        guard readyCount > settings.capacity || ruleBytes > settings.maxRuleBytes else { return }
        // Evict down to 7/8 of capacity and of the rules' size, so a full cache does not scan on
        // every new origin.
        let target = max(settings.capacity - settings.capacity / 8, 1)
        let byteTarget = settings.maxRuleBytes - settings.maxRuleBytes / 8
        candidates.sort { $0.lastUsed < $1.lastUsed }
        for candidate in candidates where readyCount > target || ruleBytes > byteTarget {
            entries[candidate.origin] = nil
            readyCount -= 1
            ruleBytes -= candidate.cost
        }
    }
}
