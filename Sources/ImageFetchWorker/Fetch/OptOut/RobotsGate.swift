import Dispatch
import Synchronization

/// Runs the ``RobotsCache`` for `fetch.robots = respect`: answers whether a job's URL may be
/// fetched, fetching its origin's robots.txt first when the rules are unknown or stale.
///
/// The job that finds them unknown fetches robots.txt itself, inside the origin slot it already
/// holds, so the request counts against the origin's limit like any other; the jobs of the same
/// origin that come meanwhile wait for that one fetch. The fetch goes through the same engine as
/// the images, so the address veto, the host lists and the timeouts apply; the body is cut at
/// ``RobotsTxt/parseLimit`` (never more than `fetch.max_bytes`), and up to 5 redirects are
/// followed (RFC 9309 §2.3.1.2).
package final class RobotsGate: Sendable {
    /// What a job learns: it may go on, it may not (and why), or the fetch it waited for was aborted.
    package enum Verdict: Sendable, Equatable {
        case allowed
        case optedOut(OptOutSignal)
        case aborted
    }

    package typealias Waiter = @Sendable (RobotsRules?) -> Void

    private let cache: Mutex<RobotsCache<Waiter>>
    private let engine: any JobFetcher
    private let userAgent: String
    private let headers: [String]
    private let bodyLimit: Int
    private let metrics: OptOutMetrics?
    private let now: @Sendable () -> UInt64

    /// RFC 9309 §2.3.1.2: at least five consecutive redirects.
    static let maxRedirects = 5

    /// Rule sets up to this many rules, and this many bytes of patterns, are matched where the
    /// verdict is asked, on the admission queue (tens of microseconds at most); larger ones on
    /// ``matching``. Matching is linear in the rules and their patterns, and an origin's 500 KiB
    /// robots.txt can hold 45,000 rules, or 200 of 2 KB, about 10 ms a path: matched on the
    /// admission queue, one origin's file would hold every other origin's jobs.
    static let inlineRuleLimit = 256
    static let inlinePatternBytes = 16 * 1024
    /// Concurrent: a large rule set costs the CPU of its own origin's jobs, and holds no queue.
    private let matching = DispatchQueue(label: "image-fetch-worker.robots-matching", attributes: .concurrent)

    package init(
        configuration: WorkerConfiguration.Fetch, engine: any JobFetcher, metrics: OptOutMetrics?,
        now: @escaping @Sendable () -> UInt64 = { DispatchTime.now().uptimeNanoseconds }
    ) {
        let optOut = configuration.optOut
        self.cache = Mutex(
            RobotsCache(
                .init(
                    capacity: optOut.robotsMaxOrigins, ttlNanoseconds: UInt64(optOut.robotsTTL * 1e9),
                    errorTTLNanoseconds: UInt64(optOut.robotsErrorTTL * 1e9))))
        self.engine = engine
        self.userAgent = optOut.userAgent
        // The configured headers go to every fetch; a job's own headers are for its image only.
        self.headers = RequestHeaders.lines(configured: configuration.headers, job: [])
        self.bodyLimit = min(RobotsTxt.parseLimit, configuration.maxBytes)
        self.metrics = metrics
        self.now = now
    }

    /// Decides whether `url` (a checked URL of `origin`) may be fetched; `verdict` runs once: at
    /// once when the rules are known and few, on the matching queue when they are many, else
    /// after the robots.txt fetch, on the engine's completion queue or the matching queue.
    package func check(_ url: String, origin: Origin, verdict: @escaping @Sendable (Verdict) -> Void) {
        let path = RobotsTxt.pathAndQuery(of: url)
        let waiter: Waiter = { [matching] rules in
            guard let rules else { return verdict(.aborted) }
            guard rules.rules.count > Self.inlineRuleLimit || rules.patternBytes > Self.inlinePatternBytes else {
                return verdict(Self.verdict(rules, path))
            }
            matching.async { verdict(Self.verdict(rules, path)) }
        }
        let lookup = cache.withLock { $0.lookup(origin, waiter: waiter, now: now()) }
        switch lookup {
        case .ready(let rules): waiter(rules)
        case .wait: break
        case .fetch: fetch(origin, then: waiter)
        }
    }

    private static func verdict(_ rules: RobotsRules, _ path: String) -> Verdict {
        rules.signal(for: path).map(Verdict.optedOut) ?? .allowed
    }

    private func fetch(_ origin: Origin, then waiter: @escaping Waiter) {
        var request = FetchRequest(url: "\(origin)/robots.txt")
        request.headers = headers
        request.truncateBodyAt = bodyLimit
        request.maxRedirects = Self.maxRedirects
        let userAgent = self.userAgent
        engine.fetch(request) { [self] response in
            let (outcome, fetched) = Self.outcome(response, userAgent: userAgent)
            metrics?.robotsFetched(outcome)
            let (rules, waiters) = cache.withLock { $0.fetched(origin, fetched, now: now()) }
            waiter(rules)
            for other in waiters { other(rules) }
        }
    }

    /// What a robots.txt response means (RFC 9309 §2.3.1): 2xx is parsed, 4xx allows all, 5xx,
    /// 429 or no answer disallows all. A redirect past the limit, or a robots.txt the address
    /// veto or the host lists refuse, counts as unreachable too.
    static func outcome(
        _ response: FetchResponse, userAgent: String
    ) -> (OptOutMetrics.RobotsFetchOutcome, RobotsCache<Waiter>.Fetched) {
        switch response.failure {
        case nil:
            return (.ok, .rules(RobotsTxt.parse(response.body, userAgent: userAgent)))
        case .aborted?:
            return (.aborted, .aborted)
        // 429 asks the crawler to slow down, not to go ahead: read as unreachable, as Google does.
        case .httpStatus(let status)? where (400...499).contains(status) && status != 429:
            return (.missing, .rules(.allowAll))
        default:
            return (.unreachable, .rules(.disallowAll))
        }
    }
}
