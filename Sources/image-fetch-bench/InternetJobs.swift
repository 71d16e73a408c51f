import Foundation

/// The internet scenario's job list, written by scripts/bench-internet/corpus.py: one job a line,
/// `url \t kind \t delay_ms \t host`. Kind is what the origin answers: `image`, `missing` (404),
/// `html` (a text/html page) or `cut` (a JPEG cut short, served whole).
struct InternetJobs {
    var urls: [String] = []
    var kinds: [String] = []
    var delays: [Double] = []

    init(path: String, count: Int) throws {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
            throw BenchError("cannot read the jobs file \(path)")
        }
        for line in text.split(separator: "\n").prefix(count) {
            let fields = line.split(separator: "\t")
            guard fields.count >= 3, let delay = Double(fields[2]) else {
                throw BenchError("bad line in \(path): \(line)")
            }
            urls.append(String(fields[0]))
            kinds.append(String(fields[1]))
            delays.append(delay)
        }
        guard urls.count == count else { throw BenchError("\(path) has \(urls.count) jobs, fewer than \(count)") }
    }

    /// The origins' mean delay over the jobs in `range`, in seconds: the latency Little's law
    /// divides the concurrency by (the transfers add a little).
    func meanDelay(_ range: Range<Int>) -> Double {
        range.isEmpty ? 0 : range.reduce(0) { $0 + delays[$1] } / Double(range.count) / 1000
    }

    /// How many jobs of each kind.
    var kindCounts: [String: Int] { kinds.reduce(into: [:]) { $0[$1, default: 0] += 1 } }
}
