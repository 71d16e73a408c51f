import Foundation

#if canImport(Glibc)
import Glibc
#endif

// The end-to-end benchmark driver that scripts/bench.sh runs. See that script for the whole setup
// (RabbitMQ, nginx, the release build); this program publishes the jobs, runs the slow origin,
// starts and watches the worker, consumes the results and reports.
//
//   image-fetch-bench images DIR                    write DIR/bench.png (12 KB) and DIR/noise.ppm (for cjpeg)
//   image-fetch-bench origin [--port P] [--delay-ms MS] --png FILE
//                                                   run the slow origin alone, until interrupted
//   image-fetch-bench run SCENARIO [options]        one scenario; options as in RunOptions:
//       --jobs N --warmup-fraction F --worker PATH --amqp URL --fast-origin URL --png FILE --jpeg FILE
//       --http-port P --work-dir DIR --rows FILE --markdown FILE --origin-rate R --origin-tool TEXT
//       --watch NAME=PID[,PID…] --command TEXT --versions TEXT --stall-seconds S --results during|after
//       --jobs-file FILE (internet*: the job list) --env KEY=VALUE (more environment for the worker)
//   image-fetch-bench list                          scenario names, default job counts and titles

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("image-fetch-bench: \(message)\n".utf8))
    exit(2)
}

func parse<T: LosslessStringConvertible>(_ value: String, _ key: String) -> T {
    guard let parsed = T(value) else { fail("--\(key) needs a number, got \(value)") }
    return parsed
}

func options(_ arguments: ArraySlice<String>) -> [(String, String)] {
    var result: [(String, String)] = []
    var iterator = arguments.makeIterator()
    while let key = iterator.next() {
        guard key.hasPrefix("--") else { fail("unexpected argument \(key)") }
        guard let value = iterator.next() else { fail("\(key) needs a value") }
        result.append((String(key.dropFirst(2)), value))
    }
    return result
}

let arguments = CommandLine.arguments
switch arguments.count > 1 ? arguments[1] : "" {
case "images":
    guard arguments.count == 3 else { fail("usage: image-fetch-bench images DIR") }
    let dir = arguments[2]
    try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    try Data(BenchImages.png()).write(to: URL(fileURLWithPath: dir + "/bench.png"))
    // 1,776² pixels of noise: cjpeg -quality 92 makes about 3 MB of it.
    try Data(BenchImages.ppm(width: 1776, height: 1776)).write(to: URL(fileURLWithPath: dir + "/noise.ppm"))

case "origin":
    var port = 0, delay: Int64 = Scenario.slowDelayMilliseconds, png = ""
    for (key, value) in options(arguments.dropFirst(2)) {
        switch key {
        case "port": port = Int(value) ?? 0
        case "delay-ms": delay = Int64(value) ?? delay
        case "png": png = value
        default: fail("unknown option --\(key)")
        }
    }
    guard let body = FileManager.default.contents(atPath: png) else { fail("cannot read --png \(png)") }
    let origin = try SlowOrigin.start(port: port, delayMilliseconds: delay, body: Array(body), contentType: "image/png")
    print("http://127.0.0.1:\(origin.port)/slow.png (\(delay) ms)")
    while true { sleep(3600) }

case "run":
    guard arguments.count >= 3, let scenario = Scenario.named(arguments[2]) else {
        fail(
            "usage: image-fetch-bench run SCENARIO [options]; scenarios: \(Scenario.all.map(\.name).joined(separator: ", "))"
        )
    }
    var run = RunOptions(scenario: scenario, jobs: scenario.defaultJobs)
    for (key, value) in options(arguments.dropFirst(3)) {
        switch key {
        case "jobs": run.jobs = parse(value, "jobs")
        case "warmup-fraction": run.warmupFraction = parse(value, "warmup-fraction")
        case "worker": run.worker = value
        case "amqp": run.amqpURL = value
        case "fast-origin": run.fastOrigin = value
        case "png": run.png = value
        case "jpeg": run.jpeg = value
        case "http-port": run.httpPort = parse(value, "http-port")
        case "work-dir": run.workDir = value
        case "rows": run.rowsFile = value
        case "markdown": run.markdownFile = value
        case "origin-rate": run.originRate = Double(value)
        case "origin-tool": run.originTool = value
        case "watch":
            let parts = value.split(separator: "=", maxSplits: 1)
            guard parts.count == 2 else { fail("--watch NAME=PID[,PID…]") }
            run.watch.append((String(parts[0]), parts[1].split(separator: ",").compactMap { Int32($0) }))
        case "command": run.command = value
        case "versions": run.versions = value
        case "jobs-file": run.jobsFile = value
        case "env":
            let parts = value.split(separator: "=", maxSplits: 1)
            guard parts.count == 2 else { fail("--env KEY=VALUE") }
            run.environment[String(parts[0])] = String(parts[1])
        case "stall-seconds": run.stallSeconds = parse(value, "stall-seconds")
        case "results":
            guard value == "during" || value == "after" else { fail("--results during|after") }
            run.consumeDuringRun = value == "during"
        default: fail("unknown option --\(key)")
        }
    }
    guard run.jobs >= 2 else { fail("--jobs must be at least 2") }
    do {
        exit(try Runner(options: run).run())
    } catch {
        fail("\(error)")
    }

case "list":
    for scenario in Scenario.all {
        print("\(scenario.name)\t\(scenario.defaultJobs)\t\(scenario.title)")
    }

default:
    fail("usage: image-fetch-bench images DIR | origin … | run SCENARIO … | list")
}
