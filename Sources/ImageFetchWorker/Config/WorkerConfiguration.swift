/// Everything the worker can be configured with, as read at start-up.
///
/// Each nested struct mirrors one key prefix of the configuration table (`amqp.*`, `fetch.*`, …).
/// The defaults here are the documented defaults; ``ConfigurationLoader`` fills the values in from
/// command-line flags, environment variables and a config file, in that order of precedence.
public struct WorkerConfiguration: Sendable, Equatable {
    /// `amqp.*`: the broker connection.
    public struct AMQP: Sendable, Equatable {
        /// `amqp.url`: one or more broker URLs, tried in turn. Never log these unredacted.
        public var urls: [AMQPURL] = [AMQPURL.default]
        /// `amqp.prefetch`: the `basic.qos` prefetch count. Default: 2 × `worker.concurrency`.
        public var prefetch: Int = 32
        /// `amqp.heartbeat`: heartbeat interval in seconds; 0 turns heartbeats off.
        public var heartbeat: Int = 20
        /// `amqp.tls.*`: TLS settings for `amqps://` URLs.
        public var tls: TLS = TLS()

        /// TLS to the broker.
        public struct TLS: Sendable, Equatable {
            /// `amqp.tls.ca_file`: CA bundle that verifies the broker; nil uses the system's.
            public var caFile: String? = nil
            /// `amqp.tls.cert_file`: client certificate (PEM), with ``keyFile``.
            public var certFile: String? = nil
            /// `amqp.tls.key_file`: client private key (PEM).
            public var keyFile: String? = nil
            /// `amqp.tls.verify`: verify the peer certificate and host name.
            public var verify: Bool = true
            public init() {}
        }
        public init() {}
    }

    /// `queue.*`: names and kind of the topology.
    public struct Queues: Sendable, Equatable {
        /// `queue.jobs`: the queue consumed.
        public var jobs: String = "image-fetch.jobs"
        /// `queue.results`: where results go unless the job has `reply_to`.
        public var results: String = "image-fetch.results"
        /// `queue.dead`: the dead-letter queue.
        public var dead: String = "image-fetch.dead"
        /// `queue.declare`: declare the topology at start-up.
        public var declare: Bool = true
        /// `queue.type`: classic or quorum.
        public var type: QueueType = .classic
        /// `queue.delivery_limit`: redeliveries before a job counts as poison.
        public var deliveryLimit: Int = 5
        /// `queue.max_job_bytes`: the largest job body read; a larger job is dead-lettered unread.
        public var maxJobBytes: Int = 1_048_576

        /// The kind of queue declared.
        public enum QueueType: String, Sendable, Equatable, CaseIterable {
            case classic
            case quorum
        }
        public init() {}
    }

    /// `worker.*`: admission and shutdown.
    public struct Worker: Sendable, Equatable {
        /// `worker.concurrency`: the semaphore's size, fetches in flight at once.
        public var concurrency: Int = 16
        /// `worker.drain_timeout`: seconds allowed for in-flight work after SIGTERM.
        public var drainTimeout: Double = 25
        public init() {}
    }

    /// `fetch.*`: limits on every HTTP transfer.
    public struct Fetch: Sendable, Equatable {
        /// `fetch.timeout`: seconds for the whole transfer.
        public var timeout: Double = 30
        /// `fetch.connect_timeout`: seconds to connect.
        public var connectTimeout: Double = 5
        /// `fetch.max_bytes`: the largest body accepted.
        public var maxBytes: Int = 20_971_520
        /// `fetch.max_redirects`: redirects followed before `too_many_redirects`.
        public var maxRedirects: Int = 5
        /// `fetch.max_pixels`: the largest width × height accepted.
        public var maxPixels: Int = 50_000_000
        /// `fetch.user_agent`.
        public var userAgent: String = "image-fetch-worker/\(WorkerVersion.current)"
        /// `fetch.allow_private_networks`: allow loopback, private and link-local targets.
        public var allowPrivateNetworks: Bool = false
        /// `fetch.allowed_networks`: CIDRs allowed even though private, such as `10.1.0.0/16` or
        /// `fd00::/8`. The loader checks their syntax and gives a bare address its host prefix
        /// (`/32` or `/128`), so every entry has an explicit prefix length.
        public var allowedNetworks: [String] = []
        /// `fetch.low_speed_limit` bytes/s over `fetch.low_speed_time` seconds aborts a trickle.
        public var lowSpeedLimit: Int = 1024
        /// `fetch.low_speed_time`: seconds below ``lowSpeedLimit`` before the transfer is aborted.
        public var lowSpeedTime: Int = 10
        /// `fetch.headers`: extra request headers for every job's fetch. Values may be secrets
        /// (an `Authorization`): never logged.
        public var headers: [HTTPHeaderField] = []
        /// `fetch.job_headers`: the header names (lower case) a job's `headers` may set.
        public var jobHeaders: Set<String> = []
        /// `fetch.allowed_hosts`: when not empty, the only hosts fetched (see ``HostPolicy``).
        public var allowedHosts: [String] = []
        /// `fetch.denied_hosts`: hosts never fetched, whatever ``allowedHosts`` says.
        public var deniedHosts: [String] = []
        /// `fetch.resolve`: `host:port:address` entries that override DNS (`CURLOPT_RESOLVE`), for
        /// tests and operations.
        public var resolve: [String] = []
        public init() {}
    }

    /// `retry.*`: the retry policy for retryable failures.
    public struct Retry: Sendable, Equatable {
        /// `retry.max_attempts`: attempts in all, the first included.
        public var maxAttempts: Int = 4
        /// `retry.delays`: the delay before retry 1, 2, 3…, in seconds; the last repeats.
        public var delays: [Int] = [5, 30, 120]
        public init() {}
    }

    /// `scheduler.*`: origin-aware admission (docs/scheduling.md).
    public struct Scheduler: Sendable, Equatable {
        /// `scheduler.adaptive`: adapt each origin's limit to its responses; off, every origin may
        /// use ``maxLimit`` at once (fair shares and `Retry-After` still apply).
        public var adaptive: Bool = true
        /// `scheduler.min_limit`: the least concurrency an origin is cut to.
        public var minLimit: Int = 1
        /// `scheduler.max_limit`: the most an origin may use; 0 means `worker.concurrency`.
        public var maxLimit: Int = 0
        /// `scheduler.initial_limit`: where a new origin's slow start begins.
        public var initialLimit: Int = 8
        /// `scheduler.max_wait`: seconds a job may expect to wait for its origin in the prefetch
        /// window while other origins are active, before it is deferred.
        public var maxWait: Double = 1
        /// `scheduler.max_retry_after`: the longest pause a `Retry-After` sets, in seconds.
        public var maxRetryAfter: Double = 300
        /// `scheduler.probe_interval`: seconds a known ceiling holds an origin's limit below it.
        public var probeInterval: Double = 30
        /// `scheduler.defer_delays`: the delay queues for deferral, in seconds; the n-th deferral
        /// of a job uses the n-th (the last repeats), or the first one as long as its origin's pause.
        public var deferDelays: [Int] = [1, 2, 5, 10, 30, 60]
        /// `scheduler.defer_budget`: seconds of deferral a job may accumulate before it fails with
        /// `origin_busy`.
        public var deferBudget: Double = 3600
        public init() {}

        /// ``maxLimit``, or the concurrency when it is 0.
        public func resolvedMaxLimit(concurrency: Int) -> Int {
            maxLimit > 0 ? min(maxLimit, concurrency) : concurrency
        }
    }

    /// `storage.*`: where images go.
    public struct Storage: Sendable, Equatable {
        /// `storage.kind`.
        public var kind: Kind = .file
        /// `storage.path`: root of the file sink.
        public var path: String = "./data/images"
        /// `storage.fsync`: fsync the file and its folder before the result is published.
        public var fsync: Bool = true

        /// The sink.
        public enum Kind: String, Sendable, Equatable, CaseIterable {
            case file
            case s3
            case none
        }
        public init() {}
    }

    /// `s3.*`: the S3-compatible object store of `storage.kind=s3`.
    public struct S3: Sendable, Equatable, CustomStringConvertible {
        /// `s3.endpoint`: the store's base URL, `http(s)://host[:port]`. nil means AWS for the
        /// region: `https://s3.<region>.amazonaws.com` (see ``resolvedEndpoint``).
        public var endpoint: String? = nil
        /// `s3.bucket`: the bucket; required when `storage.kind` is `s3`.
        public var bucket: String = ""
        /// `s3.region`: the SigV4 signing region.
        public var region: String = "us-east-1"
        /// `s3.prefix`: put in front of every object key, as is (`images/` gives `images/ab/ab….png`).
        public var prefix: String = ""
        /// `s3.path_style`: address the bucket in the path (`endpoint/bucket/key`), as MinIO, Ceph
        /// and most S3-compatible stores want, instead of the host (`bucket.endpoint/key`).
        public var pathStyle: Bool = false
        /// `s3.access_key_id`, else `AWS_ACCESS_KEY_ID`.
        public var accessKeyID: String? = nil
        /// `s3.secret_access_key`, else `AWS_SECRET_ACCESS_KEY`. A secret: never logged.
        public var secretAccessKey: String? = nil
        /// `s3.session_token`, else `AWS_SESSION_TOKEN`: sent as `x-amz-security-token` for
        /// temporary credentials. A secret: never logged.
        public var sessionToken: String? = nil
        /// Where temporary credentials come from when no access key is configured: a web
        /// identity or the container credentials endpoint, named by the AWS variables of the
        /// environment (see ``AWSCredentialSource``).
        public var temporaryCredentials: AWSCredentialSource? = nil

        /// ``endpoint``, or AWS's endpoint for ``region`` when it is unset; no trailing `/`.
        public var resolvedEndpoint: String {
            var text = endpoint ?? "https://s3.\(region).amazonaws.com"
            while text.hasSuffix("/") { text.removeLast() }
            return text
        }

        private var credentialKind: String {
            if accessKeyID != nil { return "***" }
            switch temporaryCredentials {
            case .webIdentity?: return "web identity"
            case .container?: return "container endpoint"
            case .fixed?: return "***"
            case nil: return "none"
            }
        }

        /// The settings without the secrets, safe to log.
        public var description: String {
            "S3(endpoint: \(resolvedEndpoint), bucket: \(bucket), region: \(region), prefix: \(prefix), "
                + "path_style: \(pathStyle), credentials: \(credentialKind))"
        }
        public init() {}
    }

    /// `http.*`: the metrics and health endpoint.
    public struct HTTP: Sendable, Equatable {
        /// `http.port`: 0 turns the endpoint off.
        public var port: Int = 9090
        /// `http.host`: the address the endpoint binds.
        public var host: String = "0.0.0.0"
        public init() {}
    }

    /// `log.*`.
    public struct Log: Sendable, Equatable {
        /// `log.level`: trace, debug, info, notice, warning, error or critical.
        public var level: String = "info"
        /// `log.format`: text or json.
        public var format: Format = .text
        /// `log.summary_interval`: seconds between summary lines at info; 0 turns them off.
        public var summaryInterval: Double = 30

        /// How log lines look.
        public enum Format: String, Sendable, Equatable, CaseIterable {
            case text
            case json
        }
        public init() {}
    }

    /// `metrics.*`.
    public struct Metrics: Sendable, Equatable {
        /// `metrics.depth_interval`: seconds between queue-depth samples; 0 turns them off.
        public var depthInterval: Double = 10
        public init() {}
    }

    public var amqp = AMQP()
    public var queue = Queues()
    public var worker = Worker()
    public var fetch = Fetch()
    public var retry = Retry()
    public var scheduler = Scheduler()
    public var storage = Storage()
    public var s3 = S3()
    public var http = HTTP()
    public var log = Log()
    public var metrics = Metrics()

    /// The documented defaults.
    public init() {}
}

/// The worker's version: ``BuildInfo/version``.
public enum WorkerVersion {
    public static var current: String { BuildInfo.version }
}
