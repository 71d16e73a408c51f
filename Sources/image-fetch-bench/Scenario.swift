/// The end-to-end scenarios of issues 2 and 6. The same job (one URL) and origin for every run.
struct Scenario: Sendable {
    enum Origin: Sendable {
        /// nginx on 127.0.0.1 serving the 12 KB PNG.
        case fastPNG
        /// nginx serving the 3 MB JPEG.
        case fastJPEG
        /// The driver's own origin: the 12 KB PNG after 100 ms.
        case slowPNG
        /// Origins of their own on other loopback addresses (`OriginScenarios`).
        case origins
        /// 100 HTTPS origins (nginx, scripts/bench-internet/origins.sh) and a job list of their URLs
        /// (`--jobs-file`): the internet-like scenario of issue 31.
        case internet
    }

    let name: String
    let title: String
    let concurrency: Int
    let defaultJobs: Int
    let origin: Origin
    /// Each job names its own storage key, so each writes a new file. Otherwise every job is the
    /// same (one URL, no key): the first stores the content-addressed file, and the others find
    /// it in place with the right size and do not write it again.
    var newFilePerJob = false
    /// Settings of the worker for this scenario, as environment variables (IMAGE_VERIFY=decode).
    var workerEnvironment: [String: String] = [:]
    /// Workers started side by side on the same queue: a fleet (`capacity4`, `capacity12`).
    var replicas = 1

    /// The slow origin's delay.
    static let slowDelayMilliseconds: Int64 = 100

    static let all: [Scenario] = [
        Scenario(
            name: "png32", title: "12 KB PNG, fast origin (nginx), concurrency 32",
            concurrency: 32, defaultJobs: 100_000, origin: .fastPNG),
        Scenario(
            name: "floor32",
            title:
                "png32's job done by the C floor (Benchmarks/Floor/floor.c: one thread, rabbitmq-c and libcurl), concurrency 32",
            concurrency: 32, defaultJobs: 100_000, origin: .fastPNG),
        Scenario(
            name: "python32",
            title: "png32's job done by the Python peer (Benchmarks/python-peer: aio-pika and aiohttp), concurrency 32",
            concurrency: 32, defaultJobs: 100_000, origin: .fastPNG),
        Scenario(
            name: "png32-files", title: "12 KB PNG, fast origin (nginx), concurrency 32, a new file per job",
            concurrency: 32, defaultJobs: 60_000, origin: .fastPNG, newFilePerJob: true),
        // Decode mode's cost made visible (docs/image-formats.md, "Full decode"): png32 and jpeg16
        // with libvips decoding every body.
        Scenario(
            name: "png32-decode", title: "png32 with image.verify=decode (libvips decodes each 12 KB PNG)",
            concurrency: 32, defaultJobs: 60_000, origin: .fastPNG, workerEnvironment: ["IMAGE_VERIFY": "decode"]),
        Scenario(
            name: "jpeg16-decode", title: "jpeg16 with image.verify=decode (libvips decodes each 3 MB JPEG)",
            concurrency: 16, defaultJobs: 3_000, origin: .fastJPEG, workerEnvironment: ["IMAGE_VERIFY": "decode"]),
        Scenario(
            name: "slow256", title: "100 ms origin, concurrency 256",
            concurrency: 256, defaultJobs: 30_000, origin: .slowPNG),
        Scenario(
            name: "slow1024", title: "100 ms origin, concurrency 1,024",
            concurrency: 1024, defaultJobs: 80_000, origin: .slowPNG),
        Scenario(
            name: "floor1024",
            title: "slow1024's job done by the C floor (Benchmarks/Floor/floor.c), concurrency 1,024",
            concurrency: 1024, defaultJobs: 80_000, origin: .slowPNG),
        Scenario(
            name: "jpeg16", title: "3 MB JPEG, fast origin (nginx), concurrency 16",
            concurrency: 16, defaultJobs: 6_000, origin: .fastJPEG),
        Scenario(
            name: "floor16", title: "jpeg16's job done by the C floor (Benchmarks/Floor/floor.c), concurrency 16",
            concurrency: 16, defaultJobs: 6_000, origin: .fastJPEG),
        Scenario(
            name: "mixed",
            title: "a fast origin (nginx) beside a 2 s origin on another address, one job in eleven, concurrency 32",
            concurrency: 32, defaultJobs: 3_000, origin: .origins),
        Scenario(
            name: "capacity",
            title: "an origin that serves 8 at once and answers 429 with Retry-After: 1 beyond, concurrency 64",
            concurrency: 64, defaultJobs: 600, origin: .origins),
        // A fleet against the same origin (issue 35 §6): each replica learns the origin's limit on
        // its own; docs/scheduling.md, "What a fleet guarantees".
        Scenario(
            name: "capacity4", title: "capacity's origin and jobs, 4 workers of concurrency 64 on one queue",
            concurrency: 64, defaultJobs: 600, origin: .origins, replicas: 4),
        Scenario(
            name: "capacity12", title: "capacity's origin and jobs, 12 workers of concurrency 64 on one queue",
            concurrency: 64, defaultJobs: 600, origin: .origins, replicas: 12),
        Scenario(
            name: "internet",
            title: "100 HTTPS origins 20–80 ms away, Zipf popularity, real images and some bad answers, concurrency 64",
            concurrency: 64, defaultJobs: 20_000, origin: .internet),
        Scenario(
            name: "internet-python",
            title:
                "internet's jobs done by the Python peer (Benchmarks/python-peer: aio-pika and aiohttp), concurrency 64",
            concurrency: 64, defaultJobs: 20_000, origin: .internet),
        Scenario(
            name: "internet512",
            title:
                "100 HTTPS origins 20–80 ms away, Zipf popularity, real images and some bad answers, concurrency 512",
            concurrency: 512, defaultJobs: 20_000, origin: .internet),
        Scenario(
            name: "internet512-python",
            title:
                "internet512's jobs done by the Python peer (Benchmarks/python-peer: aio-pika and aiohttp), concurrency 512",
            concurrency: 512, defaultJobs: 20_000, origin: .internet),
        Scenario(
            name: "soak", title: "1,000,000 small jobs (12 KB PNG, fast origin, concurrency 32), RSS each second",
            concurrency: 32, defaultJobs: 1_000_000, origin: .fastPNG),
    ]

    static func named(_ name: String) -> Scenario? { all.first { $0.name == name } }

    /// The scenario runs a yardstick for the worker, not the worker: the C floor
    /// (`Benchmarks/Floor/floor.c`) or the Python peer (`Benchmarks/python-peer`). The worker's
    /// targets do not apply to it.
    var runsAYardstick: Bool { name.hasPrefix("floor") || name.hasPrefix("python") || name.hasSuffix("-python") }

    /// The ideal rate against the slow origin: concurrency ÷ latency.
    var idealRate: Double? {
        origin == .slowPNG ? Double(concurrency) / (Double(Self.slowDelayMilliseconds) / 1000) : nil
    }
}
