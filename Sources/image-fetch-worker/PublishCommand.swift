import ArgumentParser
import Foundation
import ImageFetchWorker
import Logging

struct Publish: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Enqueue image-fetch jobs with publisher confirms and print how many were confirmed.",
        discussion: """
            Examples:
              image-fetch-worker publish https://example.com/a.png --amqp-url amqp://guest:guest@localhost/
              image-fetch-worker publish https://example.com/a.png --id a-1 --key cats/a.png --reply-to my.results \\
                --correlation-id req-7 --header tenant=acme --priority 5
              image-fetch-worker publish --jsonl jobs.jsonl --amqp-url amqp://guest:guest@localhost/
              image-fetch-worker publish --jsonl jobs.jsonl --resume
            Configuration flags (see run --help) may come before or after the URLs.

            --jsonl reads one job object a line (docs/schemas/job.schema.json), and checks each as the
            worker will, with this configuration's fetch.job_headers and queue.max_job_bytes. An invalid
            line is reported on standard error with its number and reason, and not sent; a line without
            an id gets a fresh one as its message_id. A summary ends the run; the exit status is 0 when
            every line was sent and confirmed, 65 when some were invalid (the others confirmed), 1 when
            the broker did not confirm one (the run stops there), 128+N after signal N (the run stops
            reading, waits for the confirms of what it sent and records them), 74 when the input could
            not be read to its end (an I/O error; the run stops there as for a signal), 66 when the
            input (--jsonl or --file) or the --resume progress file cannot be read at the start.
            FILE.progress (or --resume-file) records the line L through which every line is confirmed,
            about once a second and at the end; --resume starts after L. A crash re-sends at most the
            lines after L: delivery is at least once, as for every publish.
            """)

    @Option(name: .long, help: "Read URLs from a file, one per line ('-' for standard input).")
    var file: String?

    @Option(name: .long, help: "Read job objects from a JSON Lines file, one a line ('-' for standard input).")
    var jsonl: String?

    @Flag(name: .long, help: "With --jsonl FILE: skip the lines an earlier run recorded as confirmed.")
    var resume = false

    @Option(name: .customLong("resume-file"), help: "With --jsonl FILE: the progress file (default FILE.progress).")
    var resumeFile: String?

    @Option(name: .customLong("max-lines"), help: "With --jsonl: read at most this many lines this run.")
    var maxLines: Int?

    @Option(name: .long, help: "The job id (one URL only); by default a fresh UUID per job.")
    var id: String?

    @Option(name: .long, help: "The storage key hint (one URL only).")
    var key: String?

    @Option(name: .customLong("reply-to"), help: "The queue the result goes to, instead of queue.results.")
    var replyTo: String?

    @Option(name: .customLong("correlation-id"), help: "Copied into the result's correlation_id.")
    var correlationID: String?

    @Option(name: .long, help: "A message header NAME=VALUE (string value); repeatable.")
    var header: [String] = []

    @Option(name: .long, help: "The message priority, 0 to 255 (for queues with x-max-priority).")
    var priority: UInt8?

    @Argument(parsing: .allUnrecognized, help: "URLs, and configuration flags.")
    var rest: [String] = []

    func run() throws {
        let (settings, operands) = ConfigurationLoader.partition(rest)
        if let jsonl {
            guard operands.isEmpty, file == nil, id == nil, key == nil else {
                throw ValidationError("--jsonl takes its jobs from the file only: no URLs, --file, --id or --key")
            }
            return try publishJSONL(jsonl, settings: settings)
        }
        guard !resume, resumeFile == nil, maxLines == nil else {
            throw ValidationError("--resume, --resume-file and --max-lines go with --jsonl")
        }
        var urls = operands
        if let file {
            let text: String
            if file == "-" {
                text = String(decoding: FileHandle.standardInput.readDataToEndOfFile(), as: UTF8.self)
            } else {
                // EX_NOINPUT, as for --jsonl: an input that is not there is no usage mistake.
                guard let data = FileManager.default.contents(atPath: file) else {
                    StandardError.write("cannot read \(file)\n")
                    throw ExitCode(66)
                }
                text = String(decoding: data, as: UTF8.self)
            }
            urls += text.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }
                .filter { !$0.isEmpty && !$0.hasPrefix("#") }
        }
        guard !urls.isEmpty else { throw ValidationError("give at least one URL, or --file PATH") }
        if urls.count > 1, id != nil || key != nil {
            throw ValidationError("--id and --key name one job: give exactly one URL with them")
        }
        let properties = try messageProperties()
        let configuration = loadConfiguration(settings)
        LoggingSetup.bootstrap(configuration.log)
        let bodies = urls.map { JobPublisher.jobBody(id: id ?? UUID().uuidString.lowercased(), url: $0, key: key) }
        do {
            let publisher = try JobPublisher(
                configuration: configuration, logger: Logger(label: "image-fetch-worker.publish"))
            let confirmed = publisher.publish(bodies: bodies, properties: properties)
            publisher.close()
            print("\(confirmed) of \(urls.count) jobs confirmed on \(configuration.queue.jobs)")
            if confirmed != urls.count { throw ExitCode(1) }
        } catch let error as AMQPError {
            StandardError.write("cannot publish: \(error)\n")
            throw ExitCode(1)
        }
    }

    /// The AMQP properties every job of this run gets.
    private func messageProperties() throws -> AMQPProperties {
        var properties = AMQPProperties()
        properties.contentType = "application/json"
        properties.replyTo = replyTo
        properties.correlationID = correlationID
        properties.priority = priority
        for (position, pair) in header.enumerated() {
            // Named by position, not echoed: the argument may hold a credential.
            guard let equals = pair.firstIndex(of: "=") else {
                throw ValidationError("--header takes NAME=VALUE; --header \(position + 1) has no '='")
            }
            guard equals != pair.startIndex else {
                throw ValidationError("--header takes NAME=VALUE; --header \(position + 1) has no name before '='")
            }
            properties.headers[String(pair[..<equals])] = .string(String(pair[pair.index(after: equals)...]))
        }
        return properties
    }

    private func publishJSONL(_ input: String, settings: [String]) throws {
        let path = input == "-" ? nil : input
        if path == nil, resume || resumeFile != nil {
            throw ValidationError("--resume and --resume-file need --jsonl FILE: standard input cannot be read again")
        }
        if let maxLines, maxLines < 1 { throw ValidationError("--max-lines takes a positive number") }
        let properties = try messageProperties()
        let progressPath = path.map { resumeFile ?? PublishProgress.defaultPath(for: $0) }
        var startAfter = 0
        if resume, let progressPath {
            do {
                startAfter = try PublishProgress.read(progressPath)
            } catch {
                StandardError.write("cannot resume: \(error)\n")
                throw ExitCode(66)
            }
        }
        if let path, !FileManager.default.isReadableFile(atPath: path) {
            StandardError.write("cannot read \(path)\n")
            throw ExitCode(66)
        }
        let configuration = loadConfiguration(settings)
        LoggingSetup.bootstrap(configuration.log)
        let run = JSONLPublishRun(
            path: path, properties: properties, allowedHeaders: configuration.fetch.jobHeaders,
            maxLineBytes: configuration.queue.maxJobBytes, startAfter: startAfter, progressPath: progressPath,
            maxLines: maxLines)
        let publisher: JobPublisher
        do {
            publisher = try JobPublisher(
                configuration: configuration,
                logger: Logger(label: "image-fetch-worker.publish"))
        } catch {
            StandardError.write("cannot publish: \(error)\n")
            throw ExitCode(1)
        }
        let stop = StopSignal()
        stop.install()
        guard let summary = run.run(publisher, stop: stop) else {
            publisher.close()
            throw ExitCode(66)
        }
        publisher.close()
        var text =
            "\(input): \(summary.sent) sent, \(summary.confirmed) confirmed, \(summary.invalid) invalid, "
            + "\(summary.skipped) skipped on \(configuration.queue.jobs)"
        if let progressPath { text += "; every line through \(summary.confirmedThrough) is done (\(progressPath))" }
        print(text)
        if let (line, outcome) = summary.unconfirmed {
            let text = "line \(line) was not confirmed (\(outcome)); the run stopped there\n"
            StandardError.write(text)
            throw ExitCode(1)
        }
        if let signal = summary.stoppedBySignal { throw ExitCode(128 + signal) }
        // EX_IOERR: the input could not be read to its end; --resume goes on after the confirmed lines.
        if summary.readError != nil { throw ExitCode(74) }
        if summary.stoppedByBudget {
            print("stopped after --max-lines \(maxLines ?? 0); --resume goes on after line \(summary.confirmedThrough)")
        }
        if summary.invalid > 0 { throw ExitCode(65) }
    }
}
