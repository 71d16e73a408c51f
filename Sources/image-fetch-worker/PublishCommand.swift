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
            Configuration flags (see run --help) may come before or after the URLs.
            """)

    @Option(name: .long, help: "Read URLs from a file, one per line ('-' for standard input).")
    var file: String?

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
        var urls = operands
        if let file {
            let text: String
            if file == "-" {
                text = String(decoding: FileHandle.standardInput.readDataToEndOfFile(), as: UTF8.self)
            } else {
                guard let data = FileManager.default.contents(atPath: file) else {
                    throw ValidationError("cannot read \(file)")
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
        var properties = AMQPProperties()
        properties.contentType = "application/json"
        properties.replyTo = replyTo
        properties.correlationID = correlationID
        properties.priority = priority
        for pair in header {
            guard let equals = pair.firstIndex(of: "="), equals != pair.startIndex else {
                throw ValidationError("--header takes NAME=VALUE, got \(pair)")
            }
            properties.headers[String(pair[..<equals])] = .string(String(pair[pair.index(after: equals)...]))
        }
        let configuration = loadConfiguration(settings)
        LoggingSetup.bootstrap(configuration.log)
        let bodies = urls.map { JobPublisher.jobBody(id: id ?? UUID().uuidString.lowercased(), url: $0, key: key) }
        do {
            let publisher = try JobPublisher(configuration: configuration, logger: Logger(label: "image-fetch-worker.publish"))
            let confirmed = publisher.publish(bodies: bodies, properties: properties)
            publisher.close()
            print("\(confirmed) of \(urls.count) jobs confirmed on \(configuration.queue.jobs)")
            if confirmed != urls.count { throw ExitCode(1) }
        } catch let error as AMQPError {
            FileHandle.standardError.write(Data("cannot publish: \(error)\n".utf8))
            throw ExitCode(1)
        }
    }
}
