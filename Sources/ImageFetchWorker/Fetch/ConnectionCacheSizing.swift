/// The size of libcurl's connection cache (`CURLMOPT_MAXCONNECTS`), from the origins fetched
/// recently. Pure: the loop feeds it the origin of each transfer it starts, with the time.
///
/// The cache holds every connection, busy or idle, and closes the oldest idle one when a
/// transfer ends with the cache full. A fixed size near the concurrency keeps the busy
/// connections and almost nothing else, so with a hundred origins in use each origin's idle
/// connection was closed before its next job came, and every job paid a new TLS handshake.
/// Sized to the concurrency plus a few idle connections per recent origin, each origin keeps a
/// warm connection between its jobs; the bound keeps descriptors in check.
struct ConnectionCacheSizing {
    /// Connections in flight at most (the worker's concurrency).
    let concurrency: Int
    /// Idle connections kept per recent origin, beyond the busy ones.
    static let idlePerOrigin = 2
    /// An origin counts as recent for this long after its last transfer started.
    static let window: Double = 120
    /// The cache never grows beyond the concurrency plus this.
    static let maxExtra = 1024
    /// The least size, whatever the traffic.
    var floor: Int { max(concurrency, 64) }

    private var lastSeen: [Int: Double] = [:]
    private var nextPrune: Double = 0

    init(concurrency: Int) {
        self.concurrency = max(concurrency, 1)
    }

    /// The size for the origins seen in the window.
    var size: Int {
        let wanted = concurrency + Self.idlePerOrigin * lastSeen.count
        return min(max(wanted, floor), concurrency + Self.maxExtra)
    }

    /// A transfer to `origin` (a hash of scheme, host and port) starts at `now` (seconds);
    /// returns the new size when it changed.
    mutating func started(origin: Int, now: Double) -> Int? {
        let before = size
        let isNew = lastSeen.updateValue(now, forKey: origin) == nil
        var pruned = false
        if now >= nextPrune {
            nextPrune = now + Self.window / 4
            let count = lastSeen.count
            lastSeen = lastSeen.filter { now - $0.value < Self.window }
            pruned = lastSeen.count != count
        }
        guard isNew || pruned else { return nil }
        let after = size
        return after == before ? nil : after
    }

    /// The origin key of `url`: a hash of what comes before the path (scheme and authority, in
    /// any case), without allocating. Collisions only make the cache a little smaller. The prefix
    /// is hashed in one call: a byte at a time cost about 450 instructions a fetch (callgrind).
    static func originKey(of url: String) -> Int {
        var hasher = Hasher()
        var url = url
        url.withUTF8 { bytes in
            var end = 0
            var slashes = 0
            var folded = false
            while end < bytes.count {
                let byte = bytes[end]
                if byte == UInt8(ascii: "/") {
                    slashes += 1
                    if slashes == 3 { break }
                }
                if byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") { folded = true }
                end += 1
            }
            guard folded else {
                hasher.combine(bytes: UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: bytes[..<end])))
                return
            }
            withUnsafeTemporaryAllocation(of: UInt8.self, capacity: end) { lower in
                for index in 0..<end {
                    let byte = bytes[index]
                    lower[index] = byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte | 0x20 : byte
                }
                hasher.combine(bytes: UnsafeRawBufferPointer(lower))
            }
        }
        return hasher.finalize()
    }
}
