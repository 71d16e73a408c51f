/// Where a job's requests go, for scheduling: scheme, host and port of its URL after the URL
/// checks. Redirects do not change a job's origin: the whole transfer, hops included, counts
/// against the origin the job named (docs/scheduling.md says why).
package struct Origin: Hashable, Sendable, CustomStringConvertible {
    package let scheme: String
    package let host: String
    package let port: Int
    /// The fields' hash, computed once: the scheduler looks an origin up about ten times per job,
    /// and hashing two strings each time cost about 5,000 instructions per message.
    private let fieldsHash: Int

    package init(scheme: String, host: String, port: Int) {
        self.scheme = scheme
        self.host = host
        self.port = port
        var hasher = Hasher()
        hasher.combine(scheme)
        hasher.combine(host)
        hasher.combine(port)
        fieldsHash = hasher.finalize()
    }

    package static func == (lhs: Origin, rhs: Origin) -> Bool {
        lhs.fieldsHash == rhs.fieldsHash && lhs.port == rhs.port && lhs.host == rhs.host && lhs.scheme == rhs.scheme
    }

    package func hash(into hasher: inout Hasher) {
        hasher.combine(fieldsHash)
    }

    /// The origin of a checked URL; the port defaults by scheme.
    package init(_ url: ValidatedURL) {
        self.init(scheme: url.scheme, host: url.host, port: url.port ?? (url.isHTTPS ? 443 : 80))
    }

    /// `https://example.com:443`, as `/origins` and the logs show it.
    package var description: String { "\(scheme)://\(host):\(port)" }
}

/// A started job's place at its origin: what admission needs back when the fetch ends. It holds
/// no reference to the job, so a job can keep it without keeping itself alive.
package struct OriginSlot: Sendable, Equatable {
    package var origin: Origin
    package var startedAt: UInt64
    /// Jobs of the origin running with this one, itself included, when it started.
    package var inFlightAtStart: Int
    /// The job's tenant's slot in ``TenantShares`` (0: the default tenant).
    package var tenant: Int = 0
}
