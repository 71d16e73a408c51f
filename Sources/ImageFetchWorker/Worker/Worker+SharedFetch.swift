import Prometheus
import Synchronization

/// Identical requests share one fetch (issue 35, item 3; docs/architecture.md, "Shared fetches").
///
/// A follower holds only the group, so it follows its leader everywhere: it takes a copy of the
/// leader's response (its own checks, store, result, retry count and ack), is deferred when the
/// leader is, and is handed back when the leader is (the drain, its deadline, a lost channel).
extension JobRunner {
    /// Joins `context` to an identical request waiting or in flight, if there is one: true when it
    /// now follows it. Otherwise the job leads its request and goes to admission. Channel queue.
    func joinSharedFetch(_ context: JobContext, job: Job, url: String) -> Bool {
        let headers = CacheValidators.requestHeaders(job.headers, etag: job.etag, lastModified: job.lastModified)
        let key = InFlightRequests<JobContext>.Key(url: url, headers: headers, tenant: job.tenant)
        // Attached under the lock: the leader's outcome cannot reach a follower not yet following.
        return sharedFetches.join(context, key: key, attach: { self.run(context) { $0.attached() } })
    }

    /// The leader's followers, taken out once; empty for a job that leads nothing (or follows).
    func takeFollowers(_ leader: JobContext) -> [JobContext] {
        guard let key = leader.sharedRequest else { return [] }
        leader.sharedRequest = nil
        return sharedFetches.finish(key)
    }

    /// Each follower goes on with its own copy of the leader's response: a failure fails each with
    /// the same code, and each decides its retry by its own attempt count.
    func shareOutcome(
        _ followers: [JobContext], response: FetchResponse, error: JobError?, retryAfterSeconds: Double?
    ) {
        for follower in followers {
            run(follower) { $0.leaderFetched() }
            guard let job = follower.job else {
                run(follower) { $0.handBack() }
                continue
            }
            conclude(follower, job: job, response: response, error: error, retryAfterSeconds: retryAfterSeconds)
        }
    }

    /// The leader ended without a response for the followers to share (robots.txt opted it out):
    /// each follower ends the same way.
    func shareFailure(_ followers: [JobContext], error: JobError) {
        for follower in followers {
            run(follower) { $0.leaderFetched() }
            run(follower) { $0.decided() }
            guard let job = follower.job else { continue }
            finish(follower, job: job, error: error, response: nil)
        }
    }

    /// The leader goes back to the broker unanswered: so do its followers. `nack` nil: it was
    /// admitted (nacked with requeue); else it was taken out of its origin's queue.
    func handBackFollowers(of leader: JobContext, nack: Bool?) {
        guard leader.sharedRequest != nil else { return }
        for follower in takeFollowers(leader) {
            if let nack {
                run(follower) { $0.takenBack(nack: nack) }
            } else {
                run(follower) { $0.handBack() }
            }
        }
    }
}

/// The table of requests waiting or in flight (``InFlightRequests``) behind its lock, and the
/// counter of the jobs that shared another's fetch.
final class SharedFetches: Sendable {
    private let requests = Mutex(InFlightRequests<JobContext>())
    private let shared: Counter
    /// The table's follower count as of its last change, for admission to read without this lock.
    private let followerCount = Atomic<Int>(0)

    /// Jobs following another's fetch: they hold places in the prefetch window.
    var followers: Int { followerCount.load(ordering: .relaxed) }

    init(registry: PrometheusCollectorRegistry) {
        shared = registry.makeCounter(
            name: "image_fetch_fetches_shared_total",
            help: "Jobs that took the response of an identical request in flight instead of fetching.")
    }

    /// `context` joins `key`: true when it follows, after `attach` ran under the lock. A leader
    /// keeps its key, to give its followers their outcome.
    func join(_ context: JobContext, key: InFlightRequests<JobContext>.Key, attach: () -> Void) -> Bool {
        let follows = requests.withLock { table in
            guard table.join(key, context) == .follower else { return false }
            followerCount.store(table.followerCount, ordering: .relaxed)
            attach()
            return true
        }
        if follows {
            shared.increment()
        } else {
            context.sharedRequest = key
        }
        return follows
    }

    func finish(_ key: InFlightRequests<JobContext>.Key) -> [JobContext] {
        requests.withLock { table in
            let followers = table.finish(key)
            if !followers.isEmpty { followerCount.store(table.followerCount, ordering: .relaxed) }
            return followers
        }
    }
}
