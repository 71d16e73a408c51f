import Foundation
import ImageFetchWorker

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Readings from /proc for one process (Linux only).
enum ProcStats {
    static let ticksPerSecond = Double(sysconf(Int32(_SC_CLK_TCK)))

    /// User + system CPU seconds of the whole process (all threads), from /proc/PID/stat, or nil
    /// when the process is gone.
    static func cpuSeconds(pid: Int32) -> Double? {
        // utime (field 14) and stime (field 15).
        guard let fields = statFields(pid: pid), fields.count > 12,
            let user = Double(fields[11]), let system = Double(fields[12])
        else { return nil }
        return (user + system) / ticksPerSecond
    }

    /// Minor page faults of the whole process so far (field 10 of /proc/PID/stat), or nil when the
    /// process is gone: how often the kernel had to map and zero a fresh page for it.
    static func minorFaults(pid: Int32) -> Double? {
        guard let fields = statFields(pid: pid), fields.count > 7 else { return nil }
        return Double(fields[7])
    }

    /// The fields of /proc/PID/stat after the command name in parentheses: field 3 (state) is
    /// index 0, field N is index N - 3.
    private static func statFields(pid: Int32) -> [Substring]? {
        guard let text = read("/proc/\(pid)/stat"), let close = text.lastIndex(of: ")") else { return nil }
        return text[text.index(after: close)...].split(separator: " ")
    }

    /// Sum of `cpuSeconds` over several processes (missing ones count 0).
    static func cpuSeconds(pids: [Int32]) -> Double {
        pids.reduce(0) { $0 + (cpuSeconds(pid: $1) ?? 0) }
    }

    /// VmRSS, VmHWM (bytes) and Threads from /proc/PID/status.
    struct Status {
        var rss = 0
        var hwm = 0
        var threads = 0
    }

    static func status(pid: Int32) -> Status? {
        guard let text = read("/proc/\(pid)/status") else { return nil }
        var status = Status()
        for line in text.split(separator: "\n") {
            if line.hasPrefix("VmRSS:") {
                status.rss = kilobytes(line) * 1024
            } else if line.hasPrefix("VmHWM:") {
                status.hwm = kilobytes(line) * 1024
            } else if line.hasPrefix("Threads:") {
                status.threads = Int(line.split(separator: "\t").last?.trimmingCharacters(in: .whitespaces) ?? "") ?? 0
            }
        }
        return status
    }

    /// Busy and total jiffies of the whole machine, from the first line of /proc/stat.
    static func machineTicks() -> (busy: Double, total: Double) {
        guard let text = read("/proc/stat"), let line = text.split(separator: "\n").first else { return (0, 0) }
        let values = line.split(separator: " ").dropFirst().compactMap { Double($0) }
        guard values.count >= 5 else { return (0, 0) }
        let total = values.prefix(8).reduce(0, +)
        let idle = values[3] + values[4]  // idle + iowait
        return (total - idle, total)
    }

    /// The three load averages, as printed in /proc/loadavg.
    static func loadAverage() -> String {
        guard let text = read("/proc/loadavg") else { return "?" }
        return text.split(separator: " ").prefix(3).joined(separator: " ")
    }

    private static func kilobytes(_ line: Substring) -> Int {
        Int(
            line.split(separator: " ").dropFirst().first { !$0.isEmpty }.map { $0.trimmingCharacters(in: .whitespaces) }
                ?? "") ?? 0
    }

    /// Reads a small file whole (files in /proc report size 0, so read until EOF).
    static func read(_ path: String) -> String? {
        ProcessMetrics.readFile(path)
    }
}

/// A plain HTTP/1.0 GET over a blocking socket to 127.0.0.1 (for the worker's /metrics).
enum LocalHTTP {
    static func get(port: Int, path: String, timeout: Int = 5) -> String? {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var tv = timeval(tv_sec: timeout, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else { return nil }
        let request = Array("GET \(path) HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n".utf8)
        guard request.withUnsafeBytes({ send(fd, $0.baseAddress, $0.count, 0) }) == request.count else { return nil }
        var response: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { break }
            response.append(contentsOf: chunk[0..<n])
        }
        let text = String(decoding: response, as: UTF8.self)
        guard let split = text.range(of: "\r\n\r\n") else { return nil }
        return String(text[split.upperBound...])
    }
}

/// A Prometheus histogram: cumulative counts per upper bound (`le`), read from the text exposition.
struct Histogram {
    var buckets: [(le: Double, count: Double)] = []

    init(buckets: [(le: Double, count: Double)]) { self.buckets = buckets }

    /// Parses `NAME_bucket{...le="X"...} N` lines.
    init(text: String, name: String) {
        var byBound: [Double: Double] = [:]
        for line in text.split(separator: "\n") where line.hasPrefix(name + "_bucket") {
            guard let leRange = line.range(of: "le=\""),
                let end = line[leRange.upperBound...].firstIndex(of: "\""),
                let value = line.split(separator: " ").last.flatMap({ Double($0) })
            else { continue }
            let bound = String(line[leRange.upperBound..<end])
            let le = bound == "+Inf" ? Double.infinity : Double(bound) ?? .nan
            byBound[le, default: 0] += value
        }
        buckets = byBound.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
    }

    /// `self - earlier`, bucket by bucket.
    func minus(_ earlier: Histogram) -> Histogram {
        let old = Dictionary(earlier.buckets.map { ($0.le, $0.count) }, uniquingKeysWith: +)
        return Histogram(buckets: buckets.map { ($0.le, $0.count - (old[$0.le] ?? 0)) })
    }

    var count: Double { buckets.last?.count ?? 0 }

    /// The q-quantile by linear interpolation inside the bucket, as PromQL's histogram_quantile.
    func quantile(_ q: Double) -> Double? {
        let total = count
        guard total > 0 else { return nil }
        let rank = q * total
        var lowerBound = 0.0
        var lowerCount = 0.0
        for bucket in buckets {
            if bucket.count >= rank {
                if bucket.le.isInfinite { return lowerBound }
                let inBucket = bucket.count - lowerCount
                guard inBucket > 0 else { return bucket.le }
                return lowerBound + (bucket.le - lowerBound) * (rank - lowerCount) / inBucket
            }
            lowerBound = bucket.le
            lowerCount = bucket.count
        }
        return lowerBound
    }
}
