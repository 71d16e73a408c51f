/// Everything the worker can be configured with, as read at start-up.
///
/// Each nested struct mirrors one key prefix of the configuration table (`amqp.*`, `fetch.*`, …).
/// The defaults here are the documented defaults; ``ConfigurationLoader`` fills the values in from
/// command-line flags, environment variables and a config file, in that order of precedence.
package struct WorkerConfiguration: Sendable, Equatable {
    /// `amqp.*`: the broker connection.
    package struct AMQP: Sendable, Equatable {
        /// `amqp.url`: one or more broker URLs, tried in turn. Never log these unredacted.
        package var urls: [AMQPURL] = [AMQPURL.default]
        /// `amqp.prefetch`: the `basic.qos` prefetch count. Default: 2 × `worker.concurrency`.
        package var prefetch: Int = 32
        /// `amqp.heartbeat`: heartbeat interval in seconds; 0 turns heartbeats off.
        package var heartbeat: Int = 20
        /// `amqp.confirm_timeout`: seconds a publish may wait for its confirm while the connection
        /// is not blocked, before the worker drops the connection; 0 turns the check off.
        package var confirmTimeout: Double = 60
        /// `amqp.tls.*`: TLS settings for `amqps://` URLs.
        package var tls: TLS = TLS()

        /// TLS to the broker.
        package struct TLS: Sendable, Equatable {
            /// `amqp.tls.ca_file`: CA bundle that verifies the broker; nil uses the system's.
            package var caFile: String? = nil
            /// `amqp.tls.cert_file`: client certificate (PEM), with ``keyFile``.
            package var certFile: String? = nil
            /// `amqp.tls.key_file`: client private key (PEM).
            package var keyFile: String? = nil
            /// `amqp.tls.verify`: verify the peer certificate and host name.
            package var verify: Bool = true
            package init() {}
        }
        package init() {}
    }

    /// `queue.*`: names and kind of the topology.
    package struct Queues: Sendable, Equatable {
        /// `queue.jobs`: the queue consumed.
        package var jobs: String = "image-fetch.jobs"
        /// `queue.results`: where results go unless the job has `reply_to`.
        package var results: String = "image-fetch.results"
        /// `queue.dead`: the dead-letter queue.
        package var dead: String = "image-fetch.dead"
        /// `queue.declare`: declare the topology at start-up.
        package var declare: Bool = true
        /// `queue.type`: classic or quorum.
        package var type: QueueType = .classic
        /// `queue.delivery_limit`: redeliveries before a job counts as poison.
        package var deliveryLimit: Int = 5
        /// `queue.max_job_bytes`: the largest job body read; a larger job is dead-lettered unread.
        package var maxJobBytes: Int = 1_048_576

        /// The kind of queue declared.
        package enum QueueType: String, Sendable, Equatable, CaseIterable {
            case classic
            case quorum
        }
        package init() {}
    }

    /// `worker.*`: admission and shutdown.
    package struct Worker: Sendable, Equatable {
        /// `worker.concurrency`: the semaphore's size, fetches in flight at once.
        package var concurrency: Int = 16
        /// `worker.drain_timeout`: seconds allowed for in-flight work after SIGTERM.
        package var drainTimeout: Double = 25
        package init() {}
    }

    /// `fetch.*`: limits on every HTTP transfer.
    package struct Fetch: Sendable, Equatable {
        /// `fetch.timeout`: seconds for the whole transfer.
        package var timeout: Double = 30
        /// `fetch.connect_timeout`: seconds to connect.
        package var connectTimeout: Double = 5
        /// `fetch.max_bytes`: the largest body accepted.
        package var maxBytes: Int = 20_971_520
        /// `fetch.max_redirects`: redirects followed before `too_many_redirects`.
        package var maxRedirects: Int = 5
        /// `fetch.max_pixels`: the largest width × height accepted.
        package var maxPixels: Int = 50_000_000
        /// `fetch.user_agent`.
        package var userAgent: String = "image-fetch-worker/\(WorkerVersion.current)"
        /// `fetch.allow_private_networks`: allow loopback, private and link-local targets.
        package var allowPrivateNetworks: Bool = false
        /// `fetch.allowed_networks`: CIDRs allowed even though private, such as `10.1.0.0/16` or
        /// `fd00::/8`. The loader checks their syntax and gives a bare address its host prefix
        /// (`/32` or `/128`), so every entry has an explicit prefix length.
        package var allowedNetworks: [String] = []
        /// `fetch.low_speed_limit` bytes/s over `fetch.low_speed_time` seconds aborts a trickle.
        package var lowSpeedLimit: Int = 1024
        /// `fetch.low_speed_time`: seconds below ``lowSpeedLimit`` before the transfer is aborted.
        package var lowSpeedTime: Int = 10
        /// `fetch.headers`: extra request headers for every job's fetch. Values may be secrets
        /// (an `Authorization`): never logged.
        package var headers: [HTTPHeaderField] = []
        /// `fetch.job_headers`: the header names (lower case) a job's `headers` may set.
        package var jobHeaders: Set<String> = []
        /// `fetch.allowed_hosts`: when not empty, the only hosts fetched (see ``HostPolicy``).
        package var allowedHosts: [String] = []
        /// `fetch.denied_hosts`: hosts never fetched, whatever ``allowedHosts`` says.
        package var deniedHosts: [String] = []
        /// `fetch.resolve`: `host:port:address` entries that override DNS (`CURLOPT_RESOLVE`), for
        /// tests and operations.
        package var resolve: [String] = []
        /// `fetch.tls.*`: how origins' certificates are verified.
        package var tls = TLS()
        /// `fetch.robots`: whether origins' robots.txt is fetched and obeyed.
        package var robots: RobotsMode = .off
        /// `fetch.opt_out.*`: which signals make a job end `opted_out`.
        package var optOut = OptOut()
        package init() {}

        package enum RobotsMode: String, Sendable, Equatable, CaseIterable {
            case off
            case respect
        }

        /// The opt-out signals (docs/configuration.md, "Opt-out signals").
        package struct OptOut: Sendable, Equatable {
            /// `fetch.opt_out.directives`: `X-Robots-Tag` directives that forbid a job, lower case.
            package var directives: Set<String> = ["noai", "noimageai", "noml", "noindex", "noimageindex"]
            /// `fetch.opt_out.tdm_reservation`: obey TDMRep's `tdm-reservation: 1`.
            package var tdmReservation = true
            /// `fetch.opt_out.user_agent`: the product token robots.txt groups and scoped
            /// `X-Robots-Tag` directives are matched against.
            package var userAgent = "image-fetch-worker"
            /// `fetch.opt_out.robots_ttl`: seconds a fetched robots.txt is kept.
            package var robotsTTL: Double = 86_400
            /// `fetch.opt_out.robots_error_ttl`: seconds an unreachable robots.txt (complete
            /// disallow) is kept before it is fetched again.
            package var robotsErrorTTL: Double = 600
            /// `fetch.opt_out.robots_max_origins`: origins whose robots.txt is kept at once (within
            /// ``RobotsCache/Settings/defaultMaxRuleBytes`` of rules).
            package var robotsMaxOrigins = 10_000
            package init() {}

            /// The header checks, nil when no header signal is obeyed.
            package var policy: OptOutPolicy? {
                let policy = OptOutPolicy(directives: directives, tdmReservation: tdmReservation, userAgent: userAgent)
                return policy.isActive ? policy : nil
            }
        }

        package struct TLS: Sendable, Equatable {
            /// `fetch.tls.ca_file`: the CA bundle (`CURLOPT_CAINFO`); nil uses libcurl's default,
            /// the system bundle.
            package var caFile: String? = nil
            package init() {}
        }
    }

    /// `image.*`: how a fetched body is checked (docs/image-formats.md).
    package struct Image: Sendable, Equatable {
        /// `image.verify`: the structure walk alone, or a full decode after it.
        package var verify: Verify = .structure

        /// How far a body is checked before it is `ok`.
        package enum Verify: String, Sendable, Equatable, CaseIterable {
            /// Headers, the pixel limit and a walk of the structure to its end.
            case structure
            /// The same, then libvips decodes every pixel; the result gains the decoded size and a dHash.
            case decode
        }
        package init() {}
    }

    /// `retry.*`: the retry policy for retryable failures.
    package struct Retry: Sendable, Equatable {
        /// `retry.max_attempts`: attempts in all, the first included.
        package var maxAttempts: Int = 4
        /// `retry.delays`: the delay before retry 1, 2, 3…, in seconds; the last repeats.
        package var delays: [Int] = [5, 30, 120]
        package init() {}
    }

    /// `scheduler.*`: origin-aware admission (docs/scheduling.md).
    package struct Scheduler: Sendable, Equatable {
        /// `scheduler.adaptive`: adapt each origin's limit to its responses; off, every origin may
        /// use ``maxLimit`` at once (fair shares and `Retry-After` still apply).
        package var adaptive: Bool = true
        /// `scheduler.min_limit`: the least concurrency an origin is cut to.
        package var minLimit: Int = 1
        /// `scheduler.max_limit`: the most an origin may use; 0 means `worker.concurrency`.
        package var maxLimit: Int = 0
        /// `scheduler.initial_limit`: where a new origin's slow start begins.
        package var initialLimit: Int = 8
        /// `scheduler.max_wait`: seconds a job may expect to wait for its origin in the prefetch
        /// window while other origins are active, before it is deferred.
        package var maxWait: Double = 1
        /// `scheduler.max_retry_after`: the longest pause a `Retry-After` sets, in seconds.
        package var maxRetryAfter: Double = 300
        /// `scheduler.overload_pause`: the first pause after a 429 or 503 without `Retry-After`,
        /// in seconds; it doubles with each further refusal. 0: such a refusal only cuts the limit.
        package var overloadPause: Double = 1
        /// `scheduler.max_overload_pause`: the longest pause that backoff reaches, in seconds.
        package var maxOverloadPause: Double = 60
        /// `scheduler.probe_interval`: seconds a known ceiling holds an origin's limit below it.
        package var probeInterval: Double = 30
        /// `scheduler.defer_delays`: the delay queues for deferral, in seconds; the n-th deferral
        /// of a job uses the n-th (the last repeats), or the first one as long as its origin's pause.
        package var deferDelays: [Int] = [1, 2, 5, 10, 30, 60]
        /// `scheduler.defer_budget`: seconds of deferral a job may accumulate before it fails with
        /// `origin_busy`.
        package var deferBudget: Double = 3600
        /// `scheduler.tenant_header`: the AMQP header that names a job's tenant when its body has
        /// no `tenant`; nil: the body only.
        package var tenantHeader: String?
        /// `scheduler.tenant_limit`: the most jobs of one tenant that run at once; 0: no cap.
        package var tenantLimit: Int = 0
        /// `scheduler.tenant_limits`: caps for named tenants, over ``tenantLimit``.
        package var tenantLimits: [String: Int] = [:]
        package init() {}

        /// ``maxLimit``, or the concurrency when it is 0.
        package func resolvedMaxLimit(concurrency: Int) -> Int {
            maxLimit > 0 ? min(maxLimit, concurrency) : concurrency
        }
    }

    /// `storage.*`: where images go.
    package struct Storage: Sendable, Equatable {
        /// `storage.kind`.
        package var kind: Kind = .file
        /// `storage.path`: root of the file sink.
        package var path: String = "./data/images"
        /// `storage.fsync`: fsync the file and its folder before the result is published.
        package var fsync: Bool = true

        /// The sink.
        package enum Kind: String, Sendable, Equatable, CaseIterable {
            case file
            case s3
            case none
        }
        package init() {}
    }

    /// `s3.*`: the S3-compatible object store of `storage.kind=s3`.
    package struct S3: Sendable, Equatable, CustomStringConvertible {
        /// `s3.endpoint`: the store's base URL, `http(s)://host[:port]`. nil means AWS for the
        /// region: `https://s3.<region>.amazonaws.com` (see ``resolvedEndpoint``).
        package var endpoint: String? = nil
        /// `s3.bucket`: the bucket; required when `storage.kind` is `s3`.
        package var bucket: String = ""
        /// `s3.region`: the SigV4 signing region.
        package var region: String = "us-east-1"
        /// `s3.prefix`: put in front of every object key, as is (`images/` gives `images/ab/ab….png`).
        package var prefix: String = ""
        /// `s3.path_style`: address the bucket in the path (`endpoint/bucket/key`), as MinIO, Ceph
        /// and most S3-compatible stores want, instead of the host (`bucket.endpoint/key`).
        package var pathStyle: Bool = false
        /// `s3.access_key_id`, else `AWS_ACCESS_KEY_ID`.
        package var accessKeyID: String? = nil
        /// `s3.secret_access_key`, else `AWS_SECRET_ACCESS_KEY`. A secret: never logged.
        package var secretAccessKey: String? = nil
        /// `s3.session_token`, else `AWS_SESSION_TOKEN`: sent as `x-amz-security-token` for
        /// temporary credentials. A secret: never logged.
        package var sessionToken: String? = nil
        /// Where temporary credentials come from when no access key is configured: a web
        /// identity or the container credentials endpoint, named by the AWS variables of the
        /// environment (see ``AWSCredentialSource``).
        package var temporaryCredentials: AWSCredentialSource? = nil

        /// ``endpoint``, or AWS's endpoint for ``region`` when it is unset; no trailing `/`.
        package var resolvedEndpoint: String {
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
        package var description: String {
            "S3(endpoint: \(resolvedEndpoint), bucket: \(bucket), region: \(region), prefix: \(prefix), "
                + "path_style: \(pathStyle), credentials: \(credentialKind))"
        }
        package init() {}
    }

    /// `http.*`: the metrics and health endpoint.
    package struct HTTP: Sendable, Equatable {
        /// `http.port`: 0 turns the endpoint off.
        package var port: Int = 9090
        /// `http.host`: the address the endpoint binds.
        package var host: String = "0.0.0.0"
        package init() {}
    }

    /// `log.*`.
    package struct Log: Sendable, Equatable {
        /// `log.level`: trace, debug, info, notice, warning, error or critical.
        package var level: String = "info"
        /// `log.format`: text or json.
        package var format: Format = .text
        /// `log.summary_interval`: seconds between summary lines at info; 0 turns them off.
        package var summaryInterval: Double = 30

        /// How log lines look.
        package enum Format: String, Sendable, Equatable, CaseIterable {
            case text
            case json
        }
        package init() {}
    }

    /// `metrics.*`.
    package struct Metrics: Sendable, Equatable {
        /// `metrics.depth_interval`: seconds between queue-depth samples; 0 turns them off.
        package var depthInterval: Double = 10
        /// `metrics.tenants`: how many tenants get their own label on the per-tenant metrics (the
        /// rest count as `other`); 0 turns those metrics off, since tenant names are unbounded.
        package var tenants: Int = 0
        package init() {}
    }

    package var amqp = AMQP()
    package var queue = Queues()
    package var worker = Worker()
    package var fetch = Fetch()
    package var image = Image()
    package var retry = Retry()
    package var scheduler = Scheduler()
    package var storage = Storage()
    package var s3 = S3()
    package var http = HTTP()
    package var log = Log()
    package var metrics = Metrics()

    /// The documented defaults.
    package init() {}
}

/// The worker's version: ``BuildInfo/version``.
package enum WorkerVersion {
    package static var current: String { BuildInfo.version }
}
