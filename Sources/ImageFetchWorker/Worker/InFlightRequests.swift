/// The requests this worker has waiting for admission or in flight, by their whole request, so
/// that identical ones share one fetch (issue 35, item 3). Pure bookkeeping: the worker keeps it
/// behind a lock (``SharedFetches``) and does what the answers say.
///
/// The first job of a request is its leader: it goes through admission and makes the fetch. A
/// job whose request is identical to one already here is a follower: it waits for the leader's
/// outcome, holding nothing but its group membership. When the leader's fetch ends, or the
/// leader is handed back or deferred, ``finish(_:)`` takes the entry out and returns the
/// followers, which go the same way; a job arriving after that leads a new fetch.
package struct InFlightRequests<Member> {
    /// Everything a job's fetch sends that can differ between jobs: the checked URL and the job's
    /// own header lines (its `headers`, plus `If-None-Match` / `If-Modified-Since` from its
    /// validators). The configured headers are the same for every job. Compared exactly (names
    /// too), so only identical requests share. The tenant is part of it: a follower waits on its
    /// leader's admission, so one tenant's cap must not hold another tenant's jobs.
    package struct Key: Hashable, Sendable {
        package let url: String
        package let headers: [HTTPHeaderField]
        /// The job's tenant; nil for the default one.
        package let tenant: String?
        /// Hashed once: the table is read twice a job (join and finish), and hashing the URL
        /// again cost about 600 instructions a job (callgrind).
        private let hash: Int

        package init(url: String, headers: [HTTPHeaderField], tenant: String? = nil) {
            self.url = url
            self.headers = headers
            self.tenant = tenant
            var hasher = Hasher()
            hasher.combine(url)
            hasher.combine(headers)
            hasher.combine(tenant)
            self.hash = hasher.finalize()
        }

        package static func == (lhs: Key, rhs: Key) -> Bool {
            lhs.hash == rhs.hash && lhs.url == rhs.url && lhs.headers == rhs.headers && lhs.tenant == rhs.tenant
        }

        package func hash(into hasher: inout Hasher) {
            hasher.combine(hash)
        }
    }

    /// What a job becomes when it joins.
    package enum Role: Sendable, Equatable {
        /// The first job of its request: it is admitted and fetches.
        case leader
        /// An identical request is waiting or in flight: this job takes its outcome.
        case follower
    }

    private struct Entry {
        var followers: [Member] = []
        var led = false

        mutating func join(_ member: Member) -> Role {
            guard led else {
                led = true
                return .leader
            }
            followers.append(member)
            return .follower
        }
    }

    private var entries: [Key: Entry] = [:]

    package init() {}

    /// How many requests have a leader here.
    package var count: Int { entries.count }

    /// How many jobs follow another's fetch: what the prefetch window counts besides the
    /// scheduler's own jobs. Kept here, with the followers themselves, and nowhere else.
    package private(set) var followerCount = 0

    /// `member` joins the request `key`: one hashed access of the table.
    package mutating func join(_ key: Key, _ member: Member) -> Role {
        let role = entries[key, default: Entry()].join(member)
        if role == .follower { followerCount += 1 }
        return role
    }

    /// The leader of `key` is done with it (fetched, handed back or deferred): the entry goes, and
    /// its followers, in the order they came, are returned. Only the leader calls this, once.
    package mutating func finish(_ key: Key) -> [Member] {
        let followers = entries.removeValue(forKey: key)?.followers ?? []
        followerCount -= followers.count
        return followers
    }
}
