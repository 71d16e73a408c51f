import Foundation
import ImageFetchWorker

/// The worker's operations endpoint (`/metrics`, `/healthz`, `/readyz`) seen from a test, through
/// the worker's own libcurl engine.
final class OperationsEndpoint: Sendable {
    let port: Int
    private let engine: FetchEngine

    init(port: Int) throws {
        self.port = port
        var limits = WorkerConfiguration.Fetch()
        limits.timeout = 5
        limits.connectTimeout = 2
        engine = try FetchEngine(configuration: limits, addressPolicy: nil, maxConnections: 4)
    }

    /// GET `path`; the HTTP status (nil when nothing answered) and the body (only for 2xx).
    func get(_ path: String) async -> (status: Int?, body: String) {
        let response = await withCheckedContinuation { (continuation: CheckedContinuation<FetchResponse, Never>) in
            engine.fetch(FetchRequest(url: "http://127.0.0.1:\(port)\(path)")) { continuation.resume(returning: $0) }
        }
        return (response.httpStatus, String(decoding: response.body, as: UTF8.self))
    }

    /// The status of `/readyz`.
    func readiness() async -> Int? { await get("/readyz").status }

    /// One scrape of `/metrics`, parsed; empty if it failed.
    func metrics() async -> PrometheusSamples {
        let (status, body) = await get("/metrics")
        return status == 200 ? PrometheusSamples(text: body) : PrometheusSamples(text: "")
    }
}

/// Samples of a Prometheus text exposition, keyed by name and labels.
struct PrometheusSamples: Sendable {
    /// `name` or `name{a="x",b="y"}` (labels sorted by name) → value.
    private(set) var values: [String: Double] = [:]
    /// `# TYPE` lines: metric family → type.
    private(set) var types: [String: String] = [:]

    init(text: String) {
        for line in text.split(separator: "\n") {
            if line.hasPrefix("# TYPE ") {
                let parts = line.split(separator: " ")
                if parts.count >= 4 { types[String(parts[2])] = String(parts[3]) }
                continue
            }
            if line.hasPrefix("#") { continue }
            guard let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...]) else {
                continue
            }
            let series = line[..<space]
            if let brace = series.firstIndex(of: "{") {
                let name = String(series[..<brace])
                let inner = series[series.index(after: brace)..<series.index(before: series.endIndex)]
                let labels = inner.split(separator: ",").map(String.init).sorted()
                values["\(name){\(labels.joined(separator: ","))}"] = value
            } else {
                values[String(series)] = value
            }
        }
    }

    /// The value of `name` with exactly these labels, if present.
    subscript(_ name: String, _ labels: [String: String] = [:]) -> Double? {
        if labels.isEmpty { return values[name] }
        let inner = labels.map { "\($0.key)=\"\($0.value)\"" }.sorted().joined(separator: ",")
        return values["\(name){\(inner)}"]
    }

    /// Every series of a family, with its label text.
    func series(_ name: String) -> [String: Double] {
        values.filter { $0.key == name || $0.key.hasPrefix(name + "{") }
    }

    var isEmpty: Bool { values.isEmpty }
}

/// ``eventually(timeout:_:)`` for conditions that await (HTTP probes).
func eventuallyAsync(timeout: Double, _ condition: () async throws -> Bool) async rethrows -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
        if try await condition() { return true }
        try? await Task.sleep(for: .milliseconds(100))
    }
    return try await condition()
}
