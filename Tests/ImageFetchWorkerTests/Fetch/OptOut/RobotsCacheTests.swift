import Testing

@testable import ImageFetchWorker

/// The robots.txt cache as a state machine, on a clock the test moves.
@Suite struct RobotsCacheTests {
    static let second: UInt64 = 1_000_000_000
    static let a = Origin(scheme: "https", host: "a.example", port: 443)
    static let b = Origin(scheme: "https", host: "b.example", port: 443)
    static let c = Origin(scheme: "http", host: "a.example", port: 80)
    static let rules = RobotsTxt.parse(Array("User-agent: *\nDisallow: /x\n".utf8), userAgent: "w")

    static func cache(capacity: Int = 100) -> RobotsCache<Int> {
        RobotsCache(.init(capacity: capacity, ttlNanoseconds: 100 * second, errorTTLNanoseconds: 10 * second))
    }

    static func isFetch(_ lookup: RobotsCache<Int>.Lookup) -> Bool {
        if case .fetch = lookup { return true }
        return false
    }

    static func isWait(_ lookup: RobotsCache<Int>.Lookup) -> Bool {
        if case .wait = lookup { return true }
        return false
    }

    static func readyRules(_ lookup: RobotsCache<Int>.Lookup) -> RobotsRules? {
        if case .ready(let rules) = lookup { return rules }
        return nil
    }

    /// Each origin chooses its robots.txt: 500 KiB of short rules parse into tens of thousands, so
    /// `capacity` origins alone do not bound the memory (issue 33). The least recently used go
    /// first once the rules' estimated size is over `maxRuleBytes`.
    @Test func bigRuleSetsAreEvictedByTheirSizeNotOnlyTheirCount() {
        var text = "User-agent: *\n"
        for index in 0..<2_000 { text += "Disallow: /p\(index)\n" }
        let big = RobotsTxt.parse(Array(text.utf8), userAgent: "w")
        #expect(big.rules.count == 2_000)
        let budget = 10 * RobotsCache<Int>.cost(of: big)
        var cache = RobotsCache<Int>(
            .init(
                capacity: 10_000, ttlNanoseconds: 100 * Self.second, errorTTLNanoseconds: 10 * Self.second,
                maxRuleBytes: budget))
        for index in 0..<50 {
            let origin = Origin(scheme: "https", host: "h\(index).example", port: 443)
            _ = cache.lookup(origin, waiter: index, now: UInt64(index))
            _ = cache.fetched(origin, .rules(big), now: UInt64(index))
            #expect(cache.ruleBytes <= budget)
        }
        #expect(cache.count <= 10 && cache.count >= 8, "\(cache.count) origins kept")
        // The newest stay; the oldest went.
        #expect(
            Self.readyRules(cache.lookup(Origin(scheme: "https", host: "h49.example", port: 443), waiter: 0, now: 60))
                == big)
        #expect(Self.isFetch(cache.lookup(Origin(scheme: "https", host: "h0.example", port: 443), waiter: 0, now: 60)))
    }

    @Test func theFirstJobFetchesTheOthersWaitForIt() {
        var cache = Self.cache()
        #expect(Self.isFetch(cache.lookup(Self.a, waiter: 1, now: 0)))
        #expect(Self.isWait(cache.lookup(Self.a, waiter: 2, now: 1)))
        #expect(Self.isWait(cache.lookup(Self.a, waiter: 3, now: 2)))
        // Another origin (scheme and port count) has its own fetch.
        #expect(Self.isFetch(cache.lookup(Self.c, waiter: 4, now: 2)))
        let (rules, waiters) = cache.fetched(Self.a, .rules(Self.rules), now: 5)
        #expect(rules == Self.rules)
        #expect(waiters == [2, 3])
        #expect(Self.readyRules(cache.lookup(Self.a, waiter: 5, now: 6)) == Self.rules)
        #expect(cache.count == 1)
    }

    @Test func rulesExpireAfterTheTTLAndUnreachableAfterTheShorterOne() {
        var cache = Self.cache()
        _ = cache.lookup(Self.a, waiter: 1, now: 0)
        _ = cache.fetched(Self.a, .rules(Self.rules), now: 0)
        _ = cache.lookup(Self.b, waiter: 2, now: 0)
        _ = cache.fetched(Self.b, .rules(.disallowAll), now: 0)
        #expect(Self.readyRules(cache.lookup(Self.b, waiter: 3, now: 10 * Self.second - 1)) == .disallowAll)
        #expect(Self.isFetch(cache.lookup(Self.b, waiter: 4, now: 10 * Self.second)))
        #expect(Self.readyRules(cache.lookup(Self.a, waiter: 5, now: 100 * Self.second - 1)) == Self.rules)
        #expect(Self.isFetch(cache.lookup(Self.a, waiter: 6, now: 100 * Self.second)))
        #expect(Self.isWait(cache.lookup(Self.a, waiter: 7, now: 100 * Self.second)))
    }

    @Test func anAbortedFetchKeepsNothingAndReleasesItsWaiters() {
        var cache = Self.cache()
        _ = cache.lookup(Self.a, waiter: 1, now: 0)
        _ = cache.lookup(Self.a, waiter: 2, now: 0)
        let (rules, waiters) = cache.fetched(Self.a, .aborted, now: 1)
        #expect(rules == nil)
        #expect(waiters == [2])
        #expect(Self.isFetch(cache.lookup(Self.a, waiter: 3, now: 2)), "the next job fetches again")
    }

    @Test func theLeastRecentlyUsedOriginsGoFirstBeyondCapacity() {
        var cache = Self.cache(capacity: 8)
        let origins = (0..<9).map { Origin(scheme: "https", host: "h\($0).example", port: 443) }
        for (index, origin) in origins.prefix(8).enumerated() {
            _ = cache.lookup(origin, waiter: index, now: UInt64(index))
            _ = cache.fetched(origin, .rules(.allowAll), now: UInt64(index))
        }
        // h0 is used again, so h1 is now the least recently used.
        #expect(Self.readyRules(cache.lookup(origins[0], waiter: 0, now: 20)) == .allowAll)
        _ = cache.lookup(origins[8], waiter: 8, now: 21)
        _ = cache.fetched(origins[8], .rules(.allowAll), now: 21)
        #expect(cache.count <= 8)
        #expect(cache.count == 7, "evicted down to 7/8 of the capacity")
        #expect(Self.readyRules(cache.lookup(origins[0], waiter: 0, now: 22)) != nil)
        #expect(Self.readyRules(cache.lookup(origins[8], waiter: 0, now: 22)) != nil)
        #expect(Self.isFetch(cache.lookup(origins[1], waiter: 0, now: 22)))
    }

    @Test func expiredEntriesAreDroppedBeforeFreshOnes() {
        var cache = Self.cache(capacity: 2)
        _ = cache.lookup(Self.b, waiter: 0, now: 0)
        _ = cache.fetched(Self.b, .rules(.disallowAll), now: 0)  // expires at 10 s
        _ = cache.lookup(Self.a, waiter: 0, now: 0)
        _ = cache.fetched(Self.a, .rules(.allowAll), now: 0)
        _ = cache.lookup(Self.c, waiter: 0, now: 20 * Self.second)
        _ = cache.fetched(Self.c, .rules(.allowAll), now: 20 * Self.second)
        #expect(cache.count == 2)
        #expect(Self.readyRules(cache.lookup(Self.a, waiter: 0, now: 21 * Self.second)) == .allowAll)
    }

    @Test func aRobotsResponseMeansWhatRFC9309Says() {
        func outcome(_ response: FetchResponse) -> (OptOutMetrics.RobotsFetchOutcome, RobotsRules?) {
            let (label, fetched) = RobotsGate.outcome(response, userAgent: "w")
            if case .rules(let rules) = fetched { return (label, rules) }
            return (label, nil)
        }
        let ok = outcome(FetchResponse(httpStatus: 200, body: Array("User-agent: *\nDisallow: /x\n".utf8)))
        #expect(ok.0 == .ok && ok.1 == Self.rules)
        for status in [400, 401, 403, 404, 410] {
            let missing = outcome(FetchResponse(httpStatus: status, failure: .httpStatus(status)))
            #expect(missing.0 == .missing && missing.1 == .allowAll, "\(status)")
        }
        for failure in [
            FetchError.httpStatus(500), .httpStatus(503), .httpStatus(429), .connectFailed(.refused), .timeout,
            .dnsFailure,
            .tooManyRedirects(limit: 5), .addressRefused(addressClass: "private"),
        ] {
            let unreachable = outcome(FetchResponse(failure: failure))
            #expect(unreachable.0 == .unreachable && unreachable.1 == .disallowAll, "\(failure)")
        }
        #expect(outcome(FetchResponse(failure: .aborted)).0 == .aborted)
        #expect(outcome(FetchResponse(failure: .aborted)).1 == nil)
    }
}
