/// The configuration keys, in the order of the documentation. Each default is the initial
/// value of its field in ``WorkerConfiguration``.
extension ConfigurationKey {
    package static let all: [ConfigurationKey] =
        worker + amqp + queue + fetch + image + retry + scheduler + storage + s3 + other

    /// The entry for a key name, if there is one.
    package static func named(_ name: String) -> ConfigurationKey? {
        all.first { $0.name == name }
    }

    static let amqp: [ConfigurationKey] = [
        .list(
            "amqp.url", \.amqp.urls, secret: true,
            help: "Broker URLs amqp[s]://user:pass@host:port/vhost, comma-separated.",
            show: { $0.map(\.description).joined(separator: ",") },
            parse: { items throws(Invalid) in
                do throws(ConfigurationError) {
                    return try AMQPURL.parseList(items.joined(separator: ","))
                } catch {
                    throw Invalid(error.problem, showsValue: false)
                }
            }),
        .int(
            "amqp.prefetch", \.amqp.prefetch, in: 1...65535, default: "2 × worker.concurrency",
            derive: { $0.amqp.prefetch = min(2 * $0.worker.concurrency, 65535) },
            help: "Unacknowledged deliveries the broker sends ahead (basic.qos)."),
        .int(
            "amqp.heartbeat", \.amqp.heartbeat, in: 0...3600,
            help: "Heartbeat interval in seconds; 0 turns heartbeats off."),
        .seconds(
            "amqp.confirm_timeout", \.amqp.confirmTimeout, allowZero: true, atLeast: 1,
            help: "Seconds a publish may wait for its confirm before the connection is dropped, at least 1; 0 is off."),
        .optionalText(
            "amqp.tls.ca_file", \.amqp.tls.caFile,
            help: "CA bundle (PEM) that verifies the broker; unset uses the system's.", check: Check.pemCertificates),
        .optionalText(
            "amqp.tls.cert_file", \.amqp.tls.certFile, help: "Client certificate (PEM), with amqp.tls.key_file.",
            check: Check.pemCertificates),
        .optionalText(
            "amqp.tls.key_file", \.amqp.tls.keyFile, help: "Client private key (PEM), with amqp.tls.cert_file.",
            check: Check.pemPrivateKey),
        .bool("amqp.tls.verify", \.amqp.tls.verify, help: "Verify the broker's certificate and host name."),
    ]

    static let queue: [ConfigurationKey] = [
        .text("queue.jobs", \.queue.jobs, help: "The queue of jobs consumed.", check: Check.queueName),
        .text(
            "queue.results", \.queue.results, help: "Where results go unless a job names reply_to.",
            check: Check.queueName),
        .text("queue.dead", \.queue.dead, help: "The dead-letter queue.", check: Check.queueName),
        .bool("queue.declare", \.queue.declare, help: "Declare the queues at start-up."),
        .choice("queue.type", \.queue.type, help: "The kind of queue declared: classic or quorum."),
        .int(
            "queue.delivery_limit", \.queue.deliveryLimit, in: 1...10_000,
            help: "Redeliveries of one job before it counts as poison and is dead-lettered."),
        // RabbitMQ refuses messages over 512 MiB whatever its max_message_size says.
        .int(
            "queue.max_job_bytes", \.queue.maxJobBytes, in: 1...536_870_912,
            help: "The largest job body read; a larger job is dead-lettered unread (job_too_large)."),
    ]

    static let worker: [ConfigurationKey] = [
        .int("worker.concurrency", \.worker.concurrency, in: 1...4096, help: "Fetches in flight at once."),
        .seconds(
            "worker.drain_timeout", \.worker.drainTimeout, allowZero: true,
            help: "Seconds allowed for in-flight jobs after SIGTERM; the rest are requeued."),
    ]

    static let fetch: [ConfigurationKey] =
        [
            .seconds("fetch.timeout", \.fetch.timeout, allowZero: false, help: "Seconds allowed for a whole transfer."),
            .seconds(
                "fetch.connect_timeout", \.fetch.connectTimeout, allowZero: false, help: "Seconds allowed to connect."),
            // A body is held in memory whole: no limit past 4 GiB.
            .int(
                "fetch.max_bytes", \.fetch.maxBytes, in: 1...(1 << 32),
                help: "The largest image body accepted, in bytes (at most 4 GiB)."),
            .int(
                "fetch.max_redirects", \.fetch.maxRedirects, in: 0...50,
                help: "Redirects followed before too_many_redirects."),
            .int("fetch.max_pixels", \.fetch.maxPixels, in: 1...Int.max, help: "The largest width × height accepted."),
            .text(
                "fetch.user_agent", \.fetch.userAgent, help: "The User-Agent header sent.",
                check: { text throws(Invalid) in try Check.headerSafe(text, limit: 1024) }),
            .bool(
                "fetch.allow_private_networks", \.fetch.allowPrivateNetworks,
                help: "Allow loopback, private and link-local targets."),
            .list(
                "fetch.allowed_networks", \.fetch.allowedNetworks,
                help: "CIDR blocks allowed although private, comma-separated, like 10.1.0.0/16.",
                show: { $0.joined(separator: ",") },
                parse: { items throws(Invalid) in
                    var networks: [String] = []
                    for item in items {
                        switch NetworkSyntax.normalizedCIDR(item) {
                        case .success(let network): networks.append(network)
                        case .failure(let problem):
                            throw Invalid(
                                "must be a comma-separated list of CIDR blocks, but \(problem.message)",
                                showsValue: false)
                        }
                    }
                    return networks
                }),
            .int(
                "fetch.low_speed_limit", \.fetch.lowSpeedLimit, in: 0...Int.max,
                help: "Bytes per second below which, for fetch.low_speed_time, a transfer is aborted; 0 turns it off."),
            .int(
                "fetch.low_speed_time", \.fetch.lowSpeedTime, in: 0...3600,
                help: "Seconds below fetch.low_speed_limit before a transfer is aborted."),
            .parsed(
                "fetch.headers", \.fetch.headers, separator: "\n", secret: true,
                help:
                    "Extra request headers for every fetch, as lines of \"Name: value\" (a secret: FETCH_HEADERS_FILE works).",
                show: { $0.isEmpty ? nil : "<redacted>" }, parse: FetchControlsSyntax.headers),
            .parsed(
                "fetch.job_headers", \.fetch.jobHeaders,
                help: "Header names a job's own headers object may set, comma-separated; empty refuses job headers.",
                show: { $0.isEmpty ? nil : $0.sorted().joined(separator: ",") }, parse: FetchControlsSyntax.headerNames),
            .parsed(
                "fetch.allowed_hosts", \.fetch.allowedHosts,
                help:
                    "If set, only these hosts (names, *.name patterns, IP addresses) are fetched, on every redirect hop.",
                show: { $0.isEmpty ? nil : $0.joined(separator: ",") }, parse: FetchControlsSyntax.hosts),
            .parsed(
                "fetch.denied_hosts", \.fetch.deniedHosts,
                help: "Hosts never fetched (names, *.name patterns, IP addresses), on every redirect hop.",
                show: { $0.isEmpty ? nil : $0.joined(separator: ",") }, parse: FetchControlsSyntax.hosts),
            .parsed(
                "fetch.resolve", \.fetch.resolve,
                help: "host:port:address entries that override DNS (CURLOPT_RESOLVE), for tests and operations.",
                show: { $0.isEmpty ? nil : $0.joined(separator: ",") }, parse: FetchControlsSyntax.resolve),
            .optionalText(
                "fetch.tls.ca_file", \.fetch.tls.caFile,
                help: "CA bundle (PEM) that verifies the origins fetched; unset uses libcurl's system bundle.",
                check: Check.pemCertificates),
        ] + optOut

    /// Opt-out signals (docs/configuration.md, "Opt-out signals").
    static let optOut: [ConfigurationKey] = [
        .choice(
            "fetch.robots", \.fetch.robots,
            help: "off, or respect: fetch each origin's robots.txt and end disallowed jobs opted_out."),
        .parsed(
            "fetch.opt_out.directives", \.fetch.optOut.directives,
            help: "X-Robots-Tag directives that end a job opted_out, comma-separated; empty ignores X-Robots-Tag.",
            show: { $0.isEmpty ? nil : $0.sorted().joined(separator: ",") }, parse: OptOutSyntax.directives),
        .bool(
            "fetch.opt_out.tdm_reservation", \.fetch.optOut.tdmReservation,
            help: "End a job opted_out when the image's response says tdm-reservation: 1 (TDMRep)."),
        .text(
            "fetch.opt_out.user_agent", \.fetch.optOut.userAgent,
            help: "Product token matched against robots.txt groups and X-Robots-Tag user-agent prefixes.",
            check: OptOutSyntax.productToken),
        .seconds(
            "fetch.opt_out.robots_ttl", \.fetch.optOut.robotsTTL, allowZero: false,
            help: "How long an origin's robots.txt is kept before it is fetched again."),
        .seconds(
            "fetch.opt_out.robots_error_ttl", \.fetch.optOut.robotsErrorTTL, allowZero: false,
            help: "How long an unreachable robots.txt (5xx, no answer: disallow all) is kept."),
        .int(
            "fetch.opt_out.robots_max_origins", \.fetch.optOut.robotsMaxOrigins, in: 1...10_000_000,
            help: "Origins whose robots.txt is kept at once; the least recently used go first."),
    ]

    static let image: [ConfigurationKey] = [
        .choice(
            "image.verify", \.image.verify,
            help: "How a body is checked: structure (walk it to its end) or decode (libvips decodes every pixel).")
    ]

    static let retry: [ConfigurationKey] = [
        .int("retry.max_attempts", \.retry.maxAttempts, in: 1...100, help: "Attempts in all, the first included."),
        .list(
            "retry.delays", \.retry.delays,
            help: "Delays before retry 1, 2, 3…, comma-separated durations; the last repeats.",
            show: showDelays, parse: parseDelays),
    ]

    static let scheduler: [ConfigurationKey] = [
        .bool(
            "scheduler.adaptive", \.scheduler.adaptive,
            help: "Adapt each origin's concurrency limit to its responses (docs/scheduling.md)."),
        .int(
            "scheduler.min_limit", \.scheduler.minLimit, in: 1...4096,
            help: "The least an origin's limit is cut to; at most the max limit."),
        .int(
            "scheduler.max_limit", \.scheduler.maxLimit, in: 0...4096,
            help: "The most an origin may use at once; 0 means worker.concurrency."),
        .int(
            "scheduler.initial_limit", \.scheduler.initialLimit, in: 1...4096,
            help: "Where a new origin's slow start begins (capped at the max limit)."),
        .seconds(
            "scheduler.max_wait", \.scheduler.maxWait, allowZero: false,
            help: "Longest expected wait for an origin in the prefetch window before a job is deferred."),
        .seconds(
            "scheduler.max_retry_after", \.scheduler.maxRetryAfter, allowZero: true,
            help: "The longest pause a Retry-After sets; 0 ignores Retry-After."),
        .seconds(
            "scheduler.overload_pause", \.scheduler.overloadPause, allowZero: true,
            help: "First pause after a 429 or 503 without Retry-After; doubles per refusal; 0: none."),
        .seconds(
            "scheduler.max_overload_pause", \.scheduler.maxOverloadPause, allowZero: false,
            help: "The longest pause the backoff after refusals without Retry-After reaches."),
        .seconds(
            "scheduler.probe_interval", \.scheduler.probeInterval, allowZero: false,
            help: "How long a known ceiling holds an origin's limit below it, before one probe above."),
        .list(
            "scheduler.defer_delays", \.scheduler.deferDelays,
            help: "Delay queues of deferral, sorted: the n-th deferral uses the n-th shortest, the last repeats.",
            show: showDelays, parse: parseDelays),
        .seconds(
            "scheduler.defer_budget", \.scheduler.deferBudget, allowZero: false,
            help: "Seconds of deferral a job may accumulate before it fails with origin_busy."),
        .optionalText(
            "scheduler.tenant_header", \.scheduler.tenantHeader,
            help: "AMQP header that names a job's tenant when its body has no tenant; unset: the body only.",
            check: TenantSyntax.headerName),
        .int(
            "scheduler.tenant_limit", \.scheduler.tenantLimit, in: 0...4096,
            help: "The most jobs of one tenant that run at once; 0: no cap per tenant."),
        .parsed(
            "scheduler.tenant_limits", \.scheduler.tenantLimits,
            help: "Caps for named tenants over scheduler.tenant_limit, as tenant=limit entries, e.g. a=8,b=16.",
            show: TenantSyntax.showLimits, parse: TenantSyntax.limits),
    ]

    @Sendable static func showDelays(_ delays: [Int]) -> String {
        delays.map { "\($0)s" }.joined(separator: ",")
    }

    /// Whole seconds from 1 s to 7 days, because delay queue names are made from them.
    @Sendable static func parseDelays(_ items: [String]) throws(Invalid) -> [Int] {
        var delays: [Int] = []
        for item in items {
            guard let seconds = ConfigText.seconds(item) else {
                throw Invalid(
                    "must be a comma-separated list of durations like 5s,30s,2m,1h, got \(ConfigText.quoted(item))",
                    showsValue: false)
            }
            guard seconds >= 1, seconds.rounded(.down) == seconds, seconds <= 86_400 * 7 else {
                throw Invalid(
                    "delays must be whole seconds from 1s to 7d, because retry queue names are made from them, got \(ConfigText.quoted(item))",
                    showsValue: false)
            }
            delays.append(Int(seconds))
        }
        guard !delays.isEmpty else { throw Invalid("must list at least one delay, like 5s,30s,2m") }
        return delays
    }

    static let storage: [ConfigurationKey] = [
        .choice("storage.kind", \.storage.kind, help: "Where images go: file, s3 or none."),
        .text("storage.path", \.storage.path, help: "The root folder of the file sink.", check: Check.nonEmpty),
        .bool("storage.fsync", \.storage.fsync, help: "fsync each file and its folder before the result is published."),
    ]

    static let s3: [ConfigurationKey] = [
        .optionalText(
            "s3.endpoint", \.s3.endpoint, help: "The store's base URL; unset means AWS for s3.region.",
            check: { text throws(Invalid) in
                guard let endpoint = S3Addressing.validateEndpoint(text) else {
                    // Not shown: a refused endpoint may hold credentials in its user info or query.
                    throw Invalid(
                        "must be an http:// or https:// URL with a host and no user info, path, query or fragment, like https://minio.internal:9000",
                        showsValue: false)
                }
                return endpoint
            }),
        .text(
            "s3.bucket", \.s3.bucket, help: "The bucket; required when storage.kind is s3.",
            check: { ConfigText.trimmed($0) }),
        .text(
            "s3.region", \.s3.region, help: "The SigV4 signing region.",
            check: { text throws(Invalid) in
                let text = ConfigText.trimmed(text)
                guard !text.isEmpty, text.utf8.count <= 64,
                    text.unicodeScalars.allSatisfy({ ("a"..."z").contains($0) || ("0"..."9").contains($0) || $0 == "-" }
                    )
                else { throw Invalid("must be 1 to 64 characters of a-z, 0-9 and -") }
                return text
            }),
        .text(
            "s3.prefix", \.s3.prefix, help: "Put in front of every object key, as is, like images/.",
            check: { prefix throws(Invalid) in
                guard !prefix.isEmpty else { return prefix }
                // The prefix becomes the front of a key: the sanitiser's rules apply to it too.
                let probe = prefix.hasSuffix("/") ? prefix + "x" : prefix
                guard !prefix.hasPrefix("/"), StorageKey.sanitize(probe) == probe, prefix.utf8.count <= 512 else {
                    throw Invalid(
                        "must be up to 512 bytes without a leading '/', empty, '.' or '..' segments, backslashes or control characters"
                    )
                }
                return prefix
            }),
        .bool(
            "s3.path_style", \.s3.pathStyle,
            help: "Address the bucket in the path (MinIO, Ceph) instead of the host name."),
        .optionalText(
            "s3.access_key_id", \.s3.accessKeyID, help: "The access key id; else AWS_ACCESS_KEY_ID.",
            check: { text throws(Invalid) in
                let text = try Check.headerSafe(text, limit: 4096)
                guard !text.utf8.contains(UInt8(ascii: ":")) else {
                    throw Invalid("must not contain ':'", showsValue: false)
                }
                return text
            }),
        .optionalText(
            "s3.secret_access_key", \.s3.secretAccessKey, secret: true,
            help: "The secret access key; else AWS_SECRET_ACCESS_KEY. Also as S3_SECRET_ACCESS_KEY_FILE.",
            check: { text throws(Invalid) in try Check.headerSafe(text, limit: 4096) }),
        .optionalText(
            "s3.session_token", \.s3.sessionToken, secret: true,
            help: "A session token for temporary credentials; else AWS_SESSION_TOKEN.",
            check: { text throws(Invalid) in try Check.headerSafe(text, limit: 4096) }),
    ]

    static let other: [ConfigurationKey] = [
        .int("http.port", \.http.port, in: 0...65535, help: "Port of the metrics and health endpoint; 0 turns it off."),
        .text(
            "http.host", \.http.host, help: "Address the metrics and health endpoint binds.", check: Check.bindAddress),
        .text(
            "log.level", \.log.level, help: "trace, debug, info, notice, warning, error or critical.",
            check: Check.logLevel),
        .choice("log.format", \.log.format, help: "Log lines as text or json."),
        .seconds(
            "log.summary_interval", \.log.summaryInterval, allowZero: true, atLeast: 1,
            help: "Seconds between summary lines at info, at least 1; 0 turns them off."),
        .seconds(
            "metrics.depth_interval", \.metrics.depthInterval, allowZero: true, atLeast: 1,
            help: "Seconds between queue-depth samples, at least 1; 0 turns them off."),
        .int(
            "metrics.tenants", \.metrics.tenants, in: 0...1000,
            help: "Tenants that get their own metric label (the rest are \"other\"); 0 turns tenant metrics off."),
    ]

    /// The AWS variables each credential falls back to when its `s3.*` key is not set anywhere.
    static let awsFallbacks: [String: String] = [
        "s3.access_key_id": "AWS_ACCESS_KEY_ID",
        "s3.secret_access_key": "AWS_SECRET_ACCESS_KEY",
        "s3.session_token": "AWS_SESSION_TOKEN",
    ]
}
