import Foundation

/// One figure of the summary: value, target(s), and whether each target is met.
struct Figure {
    var name: String
    var value: String
    var target: String = "—"
    var met: String = "—"
}

extension Runner {
    /// Prints the summary; appends its rows to `--rows` and writes it as Markdown to `--markdown`.
    func report(figures: [Figure], notes: [String], jobs: Int, warmup: Int, loadAtStart: String, loadAtEnd: String) {
        let scenario = options.scenario
        let date = ISO8601DateFormatter().string(from: Date())
        let cores = ProcessInfo.processInfo.activeProcessorCount
        print("")
        print("== \(scenario.name): \(scenario.title)")
        print(
            "   \(cores) cores; load average \(loadAtStart) at start, \(loadAtEnd) at end; \(jobs) jobs (\(warmup) warm-up)"
        )
        for figure in figures {
            print(
                "   \(figure.name.padding(toLength: 46, withPad: " ", startingAt: 0)) \(figure.value)  [target \(figure.target): \(figure.met)]"
            )
        }
        for note in notes { print("   \(note)") }

        if let rowsFile = options.rowsFile {
            var rows = ""
            for figure in figures {
                rows +=
                    [scenario.name, figure.name, figure.value, figure.target, figure.met].joined(separator: "\t") + "\n"
            }
            append(rows, to: rowsFile)
        }
        if let markdownFile = options.markdownFile {
            var md = "### \(scenario.name): \(scenario.title)\n\n"
            md +=
                "Measured \(date) with `\(options.command)`: \(grouped(Double(jobs))) jobs, the first \(grouped(Double(warmup))) a warm-up that is not counted. "
            md +=
                "\(cores) cores; load average (1, 5, 15 min) \(loadAtStart) at the start, \(loadAtEnd) at the end.\n\n"
            md += "| figure | value | target | met |\n|---|---|---|---|\n"
            for figure in figures {
                md +=
                    "| \(figure.name) | \(figure.value.replacingOccurrences(of: "|", with: "\\|")) | \(figure.target) | \(figure.met) |\n"
            }
            md += "\n"
            for note in notes { md += "\(note)\n" }
            if !options.versions.isEmpty { md += "\nVersions: \(options.versions).\n" }
            md += "\n"
            try? md.write(toFile: markdownFile, atomically: true, encoding: .utf8)
        }
    }

    private func append(_ text: String, to path: String) {
        if let handle = FileHandle(forWritingAtPath: path) {
            handle.seekToEndOfFile()
            handle.write(Data(text.utf8))
            try? handle.close()
        } else {
            _ = FileManager.default.createFile(atPath: path, contents: Data(text.utf8))
        }
    }
}

func yes(_ condition: Bool) -> String { condition ? "yes" : "no" }

/// 6512.3 → "6,512".
func grouped(_ value: Double) -> String {
    let digits = String(Int(value.rounded()))
    var out = ""
    for (i, c) in digits.reversed().enumerated() {
        if i > 0, i % 3 == 0 { out.append(",") }
        out.append(c)
    }
    return String(out.reversed())
}
