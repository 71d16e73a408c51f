import Prometheus
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The standard `process_*` metrics of Prometheus client libraries, read from `/proc/self` when
/// `/metrics` is rendered. (No maintained Swift package in reach exports them.) Where `/proc` is
/// missing, the families stay at 0 except `process_max_fds`.
///
/// The files are read with POSIX calls, not Foundation's: `String(contentsOfFile:)` and
/// `FileManager` bring ICU's converters and Foundation's file code into the worker's resident
/// pages for a few hundred bytes (docs/benchmarks.md, "Memory at concurrency 1,024").
package final class ProcessMetrics: Sendable {
    /// One reading of `/proc/self/stat`.
    package struct Stat: Equatable, Sendable {
        /// User plus system CPU time, in clock ticks.
        package var cpuTicks: UInt64
        /// Start time after boot, in clock ticks.
        package var startTicks: UInt64
        package var virtualBytes: UInt64
        package var residentPages: UInt64

        /// Parses `/proc/self/stat` (proc(5)). The command name, field 2, is in parentheses and
        /// may itself hold spaces and parentheses, so the fields are counted after the last `)`.
        package init?(parsing text: Substring) {
            guard let close = text.lastIndex(of: ")") else { return nil }
            // Field 3 (state) is the first after the parenthesis: fields[0] is field 3.
            let fields = text[text.index(after: close)...].split(separator: " ", omittingEmptySubsequences: true)
            func field(_ number: Int) -> UInt64? {
                let index = number - 3
                return index < fields.count ? UInt64(fields[index]) : nil
            }
            guard let utime = field(14), let stime = field(15), let start = field(22),
                let vsize = field(23), let rss = field(24)
            else { return nil }
            cpuTicks = utime + stime
            startTicks = start
            virtualBytes = vsize
            residentPages = rss
        }
    }

    /// The `btime` line of `/proc/stat`: the boot time in seconds since the epoch.
    package static func bootTime(parsing text: Substring) -> UInt64? {
        for line in text.split(separator: "\n") where line.hasPrefix("btime ") {
            return UInt64(ConfigText.trimmed(line.dropFirst(6)))
        }
        return nil
    }

    private let cpu: Prometheus.Counter
    private let resident: Prometheus.Gauge
    private let virtual: Prometheus.Gauge
    private let openFDs: Prometheus.Gauge
    private let maxFDs: Prometheus.Gauge
    private let startTime: Prometheus.Gauge
    /// CPU seconds already added to the counter, which only counts up.
    private let cpuRecorded = Mutex(0.0)
    private let ticksPerSecond = Double(sysconf(Int32(_SC_CLK_TCK)))
    private let pageSize = UInt64(sysconf(Int32(_SC_PAGESIZE)))

    package init(registry: PrometheusCollectorRegistry) {
        func gauge(_ name: String) -> Prometheus.Gauge {
            registry.makeGauge(name: name, labels: [], help: MetricCatalogue.help(for: name))
        }
        cpu = registry.makeCounter(
            name: "process_cpu_seconds_total", labels: [],
            help: MetricCatalogue.help(for: "process_cpu_seconds_total"))
        resident = gauge("process_resident_memory_bytes")
        virtual = gauge("process_virtual_memory_bytes")
        openFDs = gauge("process_open_fds")
        maxFDs = gauge("process_max_fds")
        startTime = gauge("process_start_time_seconds")
        if let stat = Self.readStat(),
            let proc = Self.readFile("/proc/stat"),
            let boot = Self.bootTime(parsing: proc[...])
        {
            startTime.set(Double(boot) + Double(stat.startTicks) / ticksPerSecond)
        }
        update()
    }

    /// Reads `/proc/self` and sets the families; called before each rendering of `/metrics`.
    package func update() {
        if let stat = Self.readStat() {
            let seconds = Double(stat.cpuTicks) / ticksPerSecond
            let delta = cpuRecorded.withLock { recorded -> Double in
                guard seconds > recorded else { return 0 }
                defer { recorded = seconds }
                return seconds - recorded
            }
            if delta > 0 { cpu.increment(by: delta) }
            resident.set(Double(stat.residentPages * pageSize))
            virtual.set(Double(stat.virtualBytes))
        }
        if let count = Self.openDescriptorCount() { openFDs.set(Double(count)) }
        var limit = rlimit()
        if getrlimit(RLIMIT_NOFILE_VALUE, &limit) == 0 { maxFDs.set(Double(limit.rlim_cur)) }
    }

    private static func readStat() -> Stat? {
        readFile("/proc/self/stat").flatMap { Stat(parsing: $0[...]) }
    }

    /// The whole of a small file, or nil if it cannot be read.
    package static func readFile(_ path: String) -> String? {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count == 0 { return String(decoding: bytes, as: UTF8.self) }
            if count < 0 {
                if errno == EINTR { continue }
                return nil
            }
            bytes.append(contentsOf: chunk[..<count])
        }
    }

    /// The descriptors open in this process, less the one that lists them.
    package static func openDescriptorCount() -> Int? {
        guard let directory = opendir("/proc/self/fd") else { return nil }
        defer { closedir(directory) }
        var count = 0
        while let entry = readdir(directory) {
            let isDot = withUnsafeBytes(of: entry.pointee.d_name) { name in
                name[0] == UInt8(ascii: ".") && (name[1] == 0 || (name[1] == UInt8(ascii: ".") && name[2] == 0))
            }
            if !isDot { count += 1 }
        }
        return max(count - 1, 0)
    }
}

#if canImport(Glibc)
private let RLIMIT_NOFILE_VALUE = Int32(RLIMIT_NOFILE.rawValue)
#else
private let RLIMIT_NOFILE_VALUE = RLIMIT_NOFILE
#endif
