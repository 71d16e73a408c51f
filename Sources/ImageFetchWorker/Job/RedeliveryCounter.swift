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
    private var counts: [String: Int] = [:]
    private var order: [String] = []
    private var head = 0

    init(limit: Int, capacity: Int = 65_536) {
        self.limit = limit
        self.capacity = max(capacity, 1)
    }

    /// Records a delivery and returns true when the job has now been redelivered more than
    /// `limit` times and must be dead-lettered.
    mutating func record(identity: String, redelivered: Bool) -> Bool {
        guard redelivered else { return false }
        if let count = counts[identity] {
            counts[identity] = count + 1
            return count + 1 > limit
        }
        if counts.count >= capacity { evictOldest() }
        counts[identity] = 1
        order.append(identity)
        return 1 > limit
    }

    /// Forgets a job that finished (its result or retry copy was confirmed).
    mutating func forget(identity: String) {
        counts.removeValue(forKey: identity)
    }

    /// How many identities are tracked.
    var count: Int { counts.count }

    private mutating func evictOldest() {
        while head < order.count {
            let identity = order[head]
            head += 1
            if counts.removeValue(forKey: identity) != nil { break }
        }
        if head > 4096, head * 2 > order.count {
            order.removeFirst(head)
            head = 0
        }
    }
}
