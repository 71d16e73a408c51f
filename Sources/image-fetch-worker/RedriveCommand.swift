import ArgumentParser
import Foundation
import ImageFetchWorker

struct Redrive: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Move dead-lettered jobs back to the jobs queue.",
        discussion: """
            Looks once at every message queue.dead holds, and moves those the filters select to queue.jobs: \
            each copy is published and its original acked in one transaction, so a message is in exactly \
            one of the two queues even if the command is killed. The copy's attempt count starts again \
            (x-attempt and x-error-* are dropped), and x-redrive-count, x-redriven-at and x-redriven-code \
            record the redrive. Messages not selected stay where they were.

            Exit status: 0 done; 1 the broker failed mid-way (what was committed stays moved); 78 invalid \
            configuration.
            """)

    @Option(help: "Only dead letters with this x-error-code, such as timeout or dns_failure.")
    var code: String?

    @Option(help: "Move at most N messages.")
    var limit: Int?

    @Option(
        name: .customLong("older-than"),
        help: "Only jobs older than this, like 30m, 2h or 1d (age from the message's timestamp).")
    var olderThan: String?

    @Flag(name: .customLong("dry-run"), help: "Print what would move, and move nothing.")
    var dryRun = false

    @Option(name: .customLong("batch-size"), help: ArgumentHelp("Messages per transaction.", visibility: .hidden))
    var batchSize = 50

    @Argument(parsing: .allUnrecognized, help: "Configuration flags, as for run.")
    var settings: [String] = []

    func validate() throws {
        if let limit, limit < 1 { throw ValidationError("--limit must be 1 or more") }
        if let olderThan, ConfigurationLoader.duration(olderThan) == nil {
            throw ValidationError("--older-than takes a duration like 90s, 30m, 2h or 1d")
        }
        if batchSize < 1 { throw ValidationError("--batch-size must be 1 or more") }
    }

    func run() throws {
        let configuration = loadConfiguration(settings)
        let policy = RedrivePolicy(code: code, olderThan: olderThan.flatMap(ConfigurationLoader.duration), limit: limit)
        let redrive = DeadLetterRedrive(
            configuration: configuration, policy: policy, dryRun: dryRun, batchSize: batchSize)
        let verb = dryRun ? "would move" : "moved"
        do {
            let summary = try redrive.run { entry in
                let line = entry.reportLine
                if let why = entry.kept {
                    StandardError.write("kept \(line): its copy cannot be written (\(why))\n")
                } else {
                    print("\(verb) \(line)")
                }
            }
            print(
                "\(summary.moved) of \(summary.scanned) dead letters \(verb) from \(configuration.queue.dead) to \(configuration.queue.jobs)"
            )
        } catch {
            StandardError.write("cannot redrive: \(error)\n")
            throw ExitCode(1)
        }
    }
}
