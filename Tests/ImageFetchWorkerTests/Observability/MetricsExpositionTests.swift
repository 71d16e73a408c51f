import Foundation
import Testing

@testable import ImageFetchWorker

@Suite struct MetricsExpositionTests {
    /// The families of an exposition, from its `# TYPE` lines, and those that have `# HELP`.
    static func families(_ text: String) -> (typed: Set<String>, helped: Set<String>) {
        var typed = Set<String>(), helped = Set<String>()
        for line in text.split(separator: "\n") {
            let parts = line.split(separator: " ", maxSplits: 3)
            guard parts.count >= 3, parts[0] == "#" else { continue }
            if parts[1] == "TYPE" { typed.insert(String(parts[2])) }
            if parts[1] == "HELP", parts.count == 4, !parts[3].isEmpty { helped.insert(String(parts[2])) }
        }
        return (typed, helped)
    }

    @Test func everyFamilyHasHelpOnceEveryMetricHasBeenRecorded() {
        let metrics = WorkerMetrics(concurrency: 3)
        // The families that appear only on first use.
        metrics.result(status: .ok, code: nil)
        metrics.result(status: .failed, code: .httpError)
        metrics.depth(queue: "jobs", ready: 1, consumers: 1)
        let text = String(decoding: metrics.render(), as: UTF8.self)
        let (typed, helped) = Self.families(text)
        #expect(typed.count >= 20)
        #expect(typed.subtracting(helped).isEmpty, "without # HELP: \(typed.subtracting(helped).sorted())")
        for family in typed { #expect(MetricCatalogue.help[family] != nil, "\(family) is not in MetricCatalogue") }
    }

    @Test func buildInfoIsOneWithVersionRevisionAndSwift() {
        let text = String(decoding: WorkerMetrics(concurrency: 1).render(), as: UTF8.self)
        let line = text.split(separator: "\n").first { $0.hasPrefix("image_fetch_build_info{") }
        #expect(line.flatMap { Double($0.split(separator: " ").last ?? "") } == 1, "\(line ?? "no build_info line")")
        #expect(line?.contains(#"version="\#(WorkerVersion.current)""#) == true)
        #expect(line?.contains(#"revision=""#) == true)
        #expect(line?.contains(#"swift="6."#) == true)
    }

    @Test func parsesProcSelfStatWithSpacesAndParenthesesInTheName() throws {
        // proc(5) fields 1-24; the name "(a b) c" holds a space and a ')'.
        let text =
            "4242 ((a b) c) S 1 4242 4242 0 -1 4194560 900 0 0 0 150 50 0 0 20 0 9 0 123456 987654321 2048 "
            + "18446744073709551615 1 1 0 0 0 0 0 4096 0 0 0 17 1 0 0 0 0 0\n"
        let stat = try #require(ProcessMetrics.Stat(parsing: text[...]))
        #expect(stat.cpuTicks == 200)
        #expect(stat.startTicks == 123456)
        #expect(stat.virtualBytes == 987654321)
        #expect(stat.residentPages == 2048)
        #expect(ProcessMetrics.Stat(parsing: "4242 (cut short) S 1 2 3"[...]) == nil)
        #expect(ProcessMetrics.Stat(parsing: "no parenthesis"[...]) == nil)
    }

    @Test func parsesBootTime() {
        #expect(
            ProcessMetrics.bootTime(parsing: "cpu  1 2 3\nintr 5\nbtime 1763942400\nprocesses 9\n"[...]) == 1763942400)
        #expect(ProcessMetrics.bootTime(parsing: "cpu 1\n"[...]) == nil)
    }

    @Test func readsWholeFilesLargerThanOneReadAndNothingForAMissingOne() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("ifw-read-\(getpid())").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        // Three and a half reads' worth, with a multi-byte character across the 4,096-byte boundary.
        let text = String(repeating: "a", count: 4095) + "é" + String(repeating: "b", count: 10_000)
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        #expect(ProcessMetrics.readFile(path) == text)
        #expect(ProcessMetrics.readFile(path + ".missing") == nil)
    }

    @Test func countsOpenDescriptorsWithoutTheOneThatListsThem() throws {
        // Other tests open and close descriptors in parallel, so only a lower bound is exact.
        var pipes: [[Int32]] = []
        defer { for pair in pipes { pair.forEach { close($0) } } }
        for _ in 0..<64 {
            var pair: [Int32] = [0, 0]
            try #require(pipe(&pair) == 0)
            pipes.append(pair)
        }
        let count = try #require(ProcessMetrics.openDescriptorCount())
        #expect(count >= 128 + 3)
        let listed = try FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count - 1
        #expect(abs(count - listed) <= 32, "counted \(count), Foundation lists \(listed)")
    }

    @Test func processMetricsAgreeWithProcSelf() throws {
        let values = Self.values(String(decoding: WorkerMetrics(concurrency: 1).render(), as: UTF8.self))
        let status = try String(contentsOfFile: "/proc/self/status", encoding: .utf8)
        let rssKiB = try #require(
            status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") }
                .flatMap { Double($0.split(separator: " ")[1]) })
        let rss = try #require(values["process_resident_memory_bytes"])
        #expect(abs(rss - rssKiB * 1024) <= 0.1 * rssKiB * 1024, "RSS \(rss) against VmRSS \(rssKiB) KiB")
        #expect(try #require(values["process_virtual_memory_bytes"]) >= rss)
        #expect(try #require(values["process_cpu_seconds_total"]) > 0)
        let open = try #require(values["process_open_fds"])
        #expect(open >= 3 && open <= (values["process_max_fds"] ?? 0))
        let start = try #require(values["process_start_time_seconds"])
        #expect(start <= Date().timeIntervalSince1970 && start > Date().timeIntervalSince1970 - 24 * 3600)
    }

    /// Unlabelled samples of an exposition.
    static func values(_ text: String) -> [String: Double] {
        var values: [String: Double] = [:]
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            let parts = line.split(separator: " ")
            if parts.count == 2, let value = Double(parts[1]) { values[String(parts[0])] = value }
        }
        return values
    }
}
