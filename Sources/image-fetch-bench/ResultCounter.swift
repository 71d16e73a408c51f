import Dispatch
import Foundation
import ImageFetchWorker
import Logging
import Synchronization

/// Consumes the results queue on its own ``BrokerSession`` (like the integration tests'
/// QueueCollector), acks each message, and keeps only counts and the admission→result durations,
/// so a million results cost a few megabytes. It marks two moments: the warm-up boundary (the
/// `warmup`-th distinct result) and the last result; `onMark` runs on the channel queue at each, so
/// readings taken there are as close to the result as possible.
final class ResultCounter: BrokerSessionDelegate, @unchecked Sendable {
    // @unchecked Sendable: the tally is behind a Mutex; `session` is written once, in init.
    enum Mark: Sendable { case warmupDone, allDone }

    private struct Tally {
        var seen: [UInt64]
        var distinct = 0
        var ok = 0
        var failed = 0
        var duplicates = 0
        var foreign = 0
        var firstFailure: String?
        /// Failed results by their error code.
        var codes: [String: Int] = [:]
        /// duration_ms of each counted (post-warm-up) result.
        var durations: [Float] = []
        /// Sums over the counted results that carry libcurl's timings: first byte, whole transfer,
        /// and admission→result, for where a permit's time goes.
        var phases = (count: 0, ttfb: 0.0, total: 0.0, admissionToResult: 0.0)
    }

    private let total: Int
    private let warmup: Int
    private let idPrefix: [UInt8]
    private let onMark: @Sendable (Mark) -> Void
    private let tally: Mutex<Tally>
    private var session: BrokerSession?

    init(
        configuration: WorkerConfiguration, total: Int, warmup: Int, idPrefix: String,
        onMark: @escaping @Sendable (Mark) -> Void
    ) throws {
        self.total = total
        self.warmup = warmup
        self.idPrefix = Array(idPrefix.utf8)
        self.onMark = onMark
        var tally = Tally(seen: [UInt64](repeating: 0, count: total / 64 + 1))
        tally.durations.reserveCapacity(total - warmup)
        self.tally = Mutex(tally)
        session = try startResultsConsumer(configuration, delegate: self)
    }

    func session(_ session: BrokerSession, didReceive delivery: Delivery) {
        session.ackOnQueue(delivery)
        let body = delivery.body
        let mark = tally.withLock { tally -> Mark? in
            guard let index = Self.index(in: body, prefix: idPrefix), index < total else {
                tally.foreign += 1
                return nil
            }
            let word = index / 64
            let bit = UInt64(1) << UInt64(index % 64)
            if tally.seen[word] & bit != 0 {
                tally.duplicates += 1
                return nil
            }
            tally.seen[word] |= bit
            tally.distinct += 1
            if Self.find(body, Array(#""status":"ok""#.utf8)) != nil {
                tally.ok += 1
            } else {
                tally.failed += 1
                tally.codes[Self.string(in: body, after: Array(#""code":""#.utf8)) ?? "?", default: 0] += 1
                if tally.firstFailure == nil { tally.firstFailure = String(decoding: body, as: UTF8.self) }
            }
            if tally.distinct > warmup, let duration = Self.number(in: body, after: Array(#""duration_ms":"#.utf8)) {
                tally.durations.append(Float(duration))
                if let ttfb = Self.number(in: body, after: Array(#""ttfb_ms":"#.utf8)),
                    let whole = Self.number(in: body, after: Array(#""total_ms":"#.utf8))
                {
                    tally.phases.count += 1
                    tally.phases.ttfb += ttfb
                    tally.phases.total += whole
                    tally.phases.admissionToResult += duration
                }
            }
            if tally.distinct == total { return .allDone }
            if tally.distinct == warmup { return .warmupDone }
            return nil
        }
        if let mark { onMark(mark) }
    }

    func session(_ session: BrokerSession, didConnect epoch: UInt64) {}
    func session(_ session: BrokerSession, didLoseConnection error: AMQPError) {
        FileHandle.standardError.write(Data("bench: the results consumer lost its connection: \(error)\n".utf8))
    }
    func session(_ session: BrokerSession, blocked: Bool) {}

    var snapshot: (distinct: Int, ok: Int, failed: Int, duplicates: Int, foreign: Int, firstFailure: String?) {
        tally.withLock { ($0.distinct, $0.ok, $0.failed, $0.duplicates, $0.foreign, $0.firstFailure) }
    }

    /// Failed results by their error code.
    var codes: [String: Int] { tally.withLock { $0.codes } }

    /// The admission→result durations of the counted results, sorted (milliseconds).
    func sortedDurations() -> [Float] {
        tally.withLock { $0.durations.sorted() }
    }

    /// Means over the counted results with timings (milliseconds): libcurl's first byte and whole
    /// transfer, and admission→result; nil without such results.
    func phaseMeans() -> (ttfb: Double, total: Double, admissionToResult: Double)? {
        tally.withLock { tally in
            let phases = tally.phases
            guard phases.count > 0 else { return nil }
            let n = Double(phases.count)
            return (phases.ttfb / n, phases.total / n, phases.admissionToResult / n)
        }
    }

    func close() { session?.close() }

    // MARK: - Scanning the result JSON without decoding it

    /// The N of `"id":"PREFIXN"`.
    private static func index(in body: [UInt8], prefix: [UInt8]) -> Int? {
        guard let start = find(body, Array(#""id":""#.utf8)) else { return nil }
        var i = start
        for byte in prefix {
            guard i < body.count, body[i] == byte else { return nil }
            i += 1
        }
        var value = 0
        var digits = 0
        while i < body.count, body[i] >= 48, body[i] <= 57 {
            value = value * 10 + Int(body[i] - 48)
            i += 1
            digits += 1
        }
        return digits > 0 && i < body.count && body[i] == UInt8(ascii: "\"") ? value : nil
    }

    private static func number(in body: [UInt8], after key: [UInt8]) -> Double? {
        guard var i = find(body, key) else { return nil }
        let start = i
        while i < body.count, body[i] != UInt8(ascii: ","), body[i] != UInt8(ascii: "}") { i += 1 }
        return Double(String(decoding: body[start..<i], as: UTF8.self))
    }

    /// The characters after `key` up to the next quote.
    private static func string(in body: [UInt8], after key: [UInt8]) -> String? {
        guard let start = find(body, key), let end = body[start...].firstIndex(of: UInt8(ascii: "\"")) else {
            return nil
        }
        return String(decoding: body[start..<end], as: UTF8.self)
    }

    /// The index just past the first occurrence of `needle`.
    static func find(_ haystack: [UInt8], _ needle: [UInt8]) -> Int? {
        guard needle.count <= haystack.count else { return nil }
        var i = 0
        let last = haystack.count - needle.count
        while i <= last {
            if haystack[i] == needle[0] {
                var j = 1
                while j < needle.count, haystack[i + j] == needle[j] { j += 1 }
                if j == needle.count { return i + needle.count }
            }
            i += 1
        }
        return nil
    }
}

/// A session that consumes the run's results queue (declared by the publisher) for `delegate`.
func startResultsConsumer(
    _ configuration: WorkerConfiguration, delegate: any BrokerSessionDelegate
) throws -> BrokerSession {
    var consumer = configuration
    consumer.queue.jobs = configuration.queue.results
    consumer.queue.declare = false
    consumer.amqp.prefetch = 2000
    let session = BrokerSession(configuration: consumer, logger: quietLogger("bench.results"), delegate: nil)
    session.setDelegate(delegate)
    try session.start(retrying: false)
    return session
}
