import Benchmark
import Crypto
import Dispatch
import Foundation
@_spi(Benchmarks) import ImageFetchWorker
import ImageSamples

// The per-job pieces of the worker's hot path, each alone: decoding a job, encoding a result,
// encoding a publish, sniffing an image header, hashing a body and writing it to the file sink
// (fsync off, as in the end-to-end benchmark). Throughput is in operations per second; for SHA-256
// divide by the size.
//
// The gate: scripts/benchmark-gate.sh (run by `make test`) checks the malloc counts of the
// benchmarks marked `gated` against Benchmarks/Thresholds/, and fails on any increase. Malloc counts
// are the same on every run of a build; time is not (this machine's speed drifts by a third), so
// time is never gated. Gated names have no spaces: the plugin writes threshold files with `_` for
// a space but looks them up by the name as it is.

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .throughput, .mallocCountTotal],
        warmupIterations: 100,
        scalingFactor: .kilo,
        maxDuration: .seconds(2),
        maxIterations: 1_000_000
    )
    // Not one allocation more per 1,000 calls than the thresholds file says.
    let gated = Benchmark.Configuration(thresholds: [.mallocCountTotal: .init(absolute: [.p90: 0])])

    // MARK: Job decoding

    let jobBody = JobPublisher.jobBody(
        id: "0b6f1c5e-6a2d-4c1e-9a57-3d1f0c2b7e11",
        url: "https://images.example.com/catalogue/2024/05/product-123456.png",
        key: "catalogue/product-123456.png")
    var properties = AMQPProperties()
    properties.contentType = "application/json"
    properties.correlationID = "corr-42"
    let delivery = Delivery(
        tag: 1, epoch: 1, redelivered: false, routingKey: "image-fetch.jobs",
        properties: properties, body: jobBody)
    Benchmark("Job.decode", configuration: gated) { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(Job.decode(delivery))
        }
    }

    // MARK: Result encoding

    let job = try! Job.decode(delivery).get()
    var ok = JobResult(job: job, status: .ok, durationMs: 3.25, worker: "worker-7f9c", finishedAt: 1_767_225_600.123)
    ok.httpStatus = 200
    ok.contentType = "image/png"
    ok.image = ImageInfo(format: .png, width: 64, height: 64)
    ok.bytes = 12_415
    ok.sha256 = String(repeating: "ab", count: 32)
    ok.location = "file:///var/lib/images/ab/" + String(repeating: "ab", count: 32) + ".png"
    ok.finalURL = job.url
    ok.redirects = 0
    ok.timings = FetchTimings(dnsMs: 0.01, connectMs: 0.05, tlsMs: 0, ttfbMs: 0.4, totalMs: 0.6)
    Benchmark("JobResult.encoded", configuration: gated) { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(ok.encoded())
        }
    }

    // MARK: Publishing

    // What AMQPConnection.publish encodes into its arena (properties, exchange, routing key, and the
    // publish sequence number the channel adds to the headers) for a result and for a retry copy;
    // the arena is reused, as on a connection.
    var resultProperties = AMQPProperties()
    resultProperties.contentType = "application/json"
    resultProperties.persistent = true
    resultProperties.correlationID = "corr-42"
    let traceparent = "00-" + String(repeating: "a", count: 32) + "-" + String(repeating: "b", count: 16) + "-01"
    resultProperties.headers = ["traceparent": .string(traceparent)]
    let result = OutboundMessage(routingKey: "image-fetch.results", properties: resultProperties, body: ok.encoded())
    var retryProperties = properties
    retryProperties.persistent = true
    retryProperties.headers = [
        "x-attempt": .int(2), "x-first-seen": .string("2026-11-21T13:46:00.123Z"),
        "traceparent": .string(traceparent),
    ]
    let retry = OutboundMessage(routingKey: "image-fetch.jobs.retry.5s", properties: retryProperties, body: jobBody)
    for (name, message) in [("PublishArena.result", result), ("PublishArena.retryCopy", retry)] {
        let arena = AMQPArena()
        Benchmark(name, configuration: gated) { benchmark in
            for _ in benchmark.scaledIterations {
                blackHole(arena.envelope(of: message, adding: ("x-publish-seq", .int(123_456))))
                arena.reset()
            }
        }
    }

    // MARK: Admission

    // A full window of one origin at concurrency 1,024: 1,024 running, 2,048 waiting.
    let round = OriginSchedulerRound(concurrency: 1_024)
    Benchmark("OriginScheduler.round", configuration: gated) { benchmark in
        for _ in benchmark.scaledIterations {
            round.run()
        }
    }

    // MARK: Header sniffing, per format

    let samples: [(String, [UInt8])] = [
        ("png", ImageSamples.png(width: 64, height: 64)),
        ("jpeg", ImageSamples.jpeg(width: 1920, height: 1080)),
        ("gif", ImageSamples.gif(width: 320, height: 200)),
        ("webp", ImageSamples.webpExtended(width: 800, height: 600)),
        ("bmp", ImageSamples.bmpInfo(width: 16, height: 16)),
        ("tiff", ImageSamples.tiff(width: 16, height: 16, bigEndian: false, longDimensions: true, ifdLast: true)),
        ("avif", ImageSamples.avif(width: 1024, height: 768)),
        ("heic", ImageSamples.heic(width: 4032, height: 3024)),
    ]
    for (name, bytes) in samples {
        precondition(
            { if case .image = ImageSniffer.inspect(bytes) { true } else { false } }(), "\(name) sample not recognised")
        Benchmark("ImageSniffer.inspect \(name)") { benchmark in
            for _ in benchmark.scaledIterations {
                blackHole(ImageSniffer.inspect(bytes))
            }
        }
    }

    // MARK: SHA-256

    for (label, size) in [("12 KB", 12 * 1024), ("3 MB", 3 * 1024 * 1024)] {
        var random = SystemRandomNumberGenerator()
        let body = (0..<size).map { _ in UInt8.random(in: 0...255, using: &random) }
        Benchmark("SHA-256 \(label)", configuration: .init(scalingFactor: size > 100_000 ? .one : .kilo)) { benchmark in
            for _ in benchmark.scaledIterations {
                blackHole(SHA256.hash(data: body))
            }
        }
    }

    // MARK: File sink

    let root = NSTemporaryDirectory() + "ifw-sink-bench-\(getpid())"
    let sink = try! FileSink(root: root, fsync: false, lanes: 4)
    let png = ImageSamples.png(width: 64, height: 64) + [UInt8](repeating: 0x55, count: 12 * 1024 - 500)
    let digest = SHA256.hash(data: png).map { String(format: "%02x", $0) }.joined()
    let request = StorageRequest(
        body: png, sha256: digest, info: ImageInfo(format: .png, width: 64, height: 64),
        keyHint: nil, jobID: "bench", sourceURL: "http://127.0.0.1/bench.png")
    // The same content-addressed image again: the sink finds the file in place and skips the write.
    Benchmark("FileSink.store 12 KB, already stored (fsync off)", configuration: .init(scalingFactor: .one)) {
        benchmark in
        let done = DispatchSemaphore(value: 0)
        for _ in benchmark.scaledIterations {
            sink.store(request) { result in
                blackHole(result)
                done.signal()
            }
            done.wait()
        }
    } teardown: {
        try? FileManager.default.removeItem(atPath: root)
    }
    // Each store under a key of its own: a new file every time (temporary file, write, rename).
    Benchmark("FileSink.store 12 KB, new file (fsync off)", configuration: .init(scalingFactor: .one)) { benchmark in
        let done = DispatchSemaphore(value: 0)
        var counter = 0
        for _ in benchmark.scaledIterations {
            counter += 1
            let fresh = StorageRequest(
                body: png, sha256: digest, info: request.info,
                keyHint: "new/\(counter / 1000)/\(counter)", jobID: "bench",
                sourceURL: request.sourceURL)
            sink.store(fresh) { result in
                blackHole(result)
                done.signal()
            }
            done.wait()
        }
    } teardown: {
        try? FileManager.default.removeItem(atPath: root)
    }
}
