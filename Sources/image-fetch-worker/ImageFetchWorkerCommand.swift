import ArgumentParser
import Dispatch
import Foundation
import ImageFetchWorker
import Logging

/// Loads the configuration or exits 78 (EX_CONFIG) with one line naming the key and the problem.
func loadConfiguration(_ arguments: [String]) -> WorkerConfiguration {
    do {
        return try ConfigurationLoader.load(arguments: arguments, environment: ProcessInfo.processInfo.environment)
    } catch {
        StandardError.write("\(error)\n")
        exit(ConfigurationError.exitStatus)
    }
}

struct Run: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the worker (the default).",
        discussion: ConfigurationHelp.keys)

    @Argument(parsing: .allUnrecognized, help: "Configuration flags, as listed below.")
    var settings: [String] = []

    func run() throws {
        // Before the worker allocates anything: keep freed buffers for the next job, in one malloc
        // arena for all threads.
        let retention = MallocRetention.apply(environment: ProcessInfo.processInfo.environment)
        let configuration = loadConfiguration(settings)
        LoggingSetup.bootstrap(configuration.log)
        let logger = Logger(label: "image-fetch-worker")
        logger.debug("malloc settings", metadata: ["retention": "\(retention)"])
        // OTEL_* variables; without an endpoint no tracer exists (docs/operations.md, "Traces").
        do {
            try TracingSetup.bootstrap(environment: ProcessInfo.processInfo.environment, logger: logger)
        } catch {
            StandardError.write("\(error)\n")
            throw ExitCode(error is ConfigurationError ? ConfigurationError.exitStatus : 1)
        }
        let worker: Worker
        let signals: ShutdownSignals
        do {
            worker = try Worker(configuration: configuration, logger: logger)
            // Before connecting: a SIGTERM during the first connection attempts drains too.
            signals = ShutdownSignals(worker: worker, logger: logger)
            try worker.start()
        } catch let error as ConfigurationError {
            // Such as S3 credentials that cannot be had at start-up: one line, EX_CONFIG.
            StandardError.write("\(error)\n")
            Foundation.exit(ConfigurationError.exitStatus)
        } catch {
            logger.critical("cannot start: \(error)")
            throw ExitCode(1)
        }
        withExtendedLifetime((worker, signals)) { parkMainThread() }
    }
}

/// Keeps the main thread waiting for good while the worker's own queues do the work; a signal's
/// `exit` ends the process. Not `dispatchMain()`: nothing uses the main queue, and its
/// `pthread_exit` unwinds this stack through the binary's unwind tables, whose pages (about 0.8 MB)
/// then stay resident for the life of the process.
func parkMainThread() -> Never {
    while true { pause() }
}

struct Depth: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print ready messages and consumers for the jobs, retry, dead and results queues.",
        discussion: """
            Reads the queues with passive declares on the broker of the first amqp.url. With \
            --management-url it adds unacked messages and publish, deliver and ack rates from the RabbitMQ \
            management API; its credentials come from that URL, or else from amqp.url, and are never printed.

            Exit status: 0 ok; 1 a queue holds more than --max-ready ready messages; 2 the depth could not \
            be read (broker or management API unreachable, credentials refused); 78 invalid configuration.
            """)

    @Flag(help: "Print JSON.")
    var json = false

    @Option(name: .customLong("max-ready"), help: "Exit 1 when a queue holds more than N ready messages.")
    var maxReady: Int?

    @Option(
        name: .customLong("management-url"),
        help: "RabbitMQ management API base URL, e.g. http://user:password@rabbitmq:15672.")
    var managementURL: String?

    @Argument(parsing: .allUnrecognized, help: "Configuration flags.")
    var settings: [String] = []

    func validate() throws {
        if let maxReady, maxReady < 0 { throw ValidationError("--max-ready must be 0 or more") }
    }

    func run() throws {
        let configuration = loadConfiguration(settings)
        // The URL is checked before the broker is asked anything: a wrong one is the command's mistake.
        var api: ManagementAPI?
        if let managementURL {
            do {
                api = try ManagementAPI(
                    url: managementURL, fallback: configuration.amqp.urls[0], fetch: configuration.fetch)
            } catch {
                StandardError.write(
                    "\(error.isConfiguration ? "configuration error" : "cannot read the management API"): \(error)\n"
                )
                throw ExitCode(error.isConfiguration ? ConfigurationError.exitStatus : QueueDepth.ExitStatus.cannotRead)
            }
        }
        var rows: [QueueDepth.Row]
        do {
            rows = try QueueDepth.sample(configuration)
        } catch {
            StandardError.write("cannot read queue depth: \(error)\n")
            throw ExitCode(QueueDepth.ExitStatus.cannotRead)
        }
        if let api {
            do {
                rows = try QueueDepth.addManagementStats(rows, api: api, configuration: configuration)
            } catch {
                StandardError.write("cannot read the management API: \(error)\n")
                throw ExitCode(QueueDepth.ExitStatus.cannotRead)
            }
        }
        let management = managementURL != nil
        print(json ? QueueDepth.json(rows, management: management) : QueueDepth.table(rows, management: management))
        if let maxReady, QueueDepth.exceeds(rows, maxReady: maxReady) {
            throw ExitCode(QueueDepth.ExitStatus.overMaxReady)
        }
    }
}

@main
struct ImageFetchWorkerCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "image-fetch-worker",
        abstract: "Fetch images named by RabbitMQ jobs, store them, and publish results.",
        version: BuildInfo.description,
        subcommands: [Run.self, Publish.self, Depth.self, Config.self, Redrive.self],
        defaultSubcommand: Run.self)

    static func main() {
        // Before any line is written: a reader of standard output or error that went away must
        // cost lines (StandardError drops them), not end the process with SIGPIPE.
        signal(SIGPIPE, SIG_IGN)
        main(nil)
    }
}
