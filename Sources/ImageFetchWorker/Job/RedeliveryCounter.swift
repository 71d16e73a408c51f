/// Counts, per job identity, how often this worker has seen a job come back with the broker's
/// `redelivered` flag, so a job that keeps killing workers on a classic queue is dead-lettered
/// instead of crash-looping forever. (Quorum queues do this in the broker: `x-delivery-limit`.)
///
/// In memory and bounded: the oldest identities are forgotten first. A replica that itself
/// crashes forgets its counts, so the guarantee comes from the *other* replicas that see the
/// job next; docs/reliability.md says so and recommends quorum queues.
struct RedeliveryCounter {
    let limit: Int
    let capacity: Int
    /// Each identity's count, and the stamp of its entry in ``order``.
    private var counts: [String: (count: Int, stamp: UInt64)] = [:]
    /// Identities in the order they were first counted; an entry whose stamp is no longer its
    /// identity's (forgotten, or forgotten and counted again) is stale and skipped.
    private var order: [(identity: String, stamp: UInt64)] = []
    private var head = 0
    private var nextStamp: UInt64 = 0

    init(limit: Int, capacity: Int = 65_536) {
        self.limit = limit
        self.capacity = max(capacity, 1)
    }

    /// Records a delivery and returns true when the job has now been redelivered more than
    /// `limit` times and must be dead-lettered.
    mutating func record(identity: String, redelivered: Bool) -> Bool {
        guard redelivered else { return false }
        if let entry = counts[identity] {
            counts[identity]?.count = entry.count + 1
            return entry.count + 1 > limit
        }
        if counts.count >= capacity { evictOldest() }
        nextStamp += 1
        counts[identity] = (1, nextStamp)
        order.append((identity, nextStamp))
        return 1 > limit
    }

    /// Forgets a job that finished (its result or retry copy was confirmed).
    mutating func forget(identity: String) {
        guard counts.removeValue(forKey: identity) != nil else { return }
        // Most identities are forgotten, not evicted: without this the order keeps every one.
        if retainedOrderEntries > 2 * counts.count + 64 { compact() }
    }

    /// How many identities are tracked.
    var count: Int { counts.count }

    /// How many entries the insertion order holds, live or stale (for the bound's test).
    var retainedOrderEntries: Int { order.count - head }

    private func isLive(_ entry: (identity: String, stamp: UInt64)) -> Bool {
        counts[entry.identity]?.stamp == entry.stamp
    }

    private mutating func evictOldest() {
        while head < order.count {
            let entry = order[head]
            head += 1
            if isLive(entry) {
                counts.removeValue(forKey: entry.identity)
                break
            }
        }
        if head > 4096, head * 2 > order.count {
            order.removeFirst(head)
            head = 0
        }
    }

    /// Drops the stale entries, keeping the live ones in order: amortised O(1) a call, since it
    /// runs only when at least half the entries are stale.
    private mutating func compact() {
        order = order[head...].filter(isLive)
        head = 0
    }
}
