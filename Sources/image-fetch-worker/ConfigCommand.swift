import ArgumentParser
import Foundation
import ImageFetchWorker

struct Config: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print the effective configuration and where each value came from.",
        discussion: """
            Takes the same flags, environment and --config file as run, and prints every key with its \
            value and its source: flag, env (a variable or a *_FILE secret), file, or default. Secrets \
            are redacted. Exit status: 0 valid; 78 a bad value, with the same one line as run.
            """)

    @Argument(parsing: .allUnrecognized, help: "Configuration flags, as for run.")
    var settings: [String] = []

    func run() throws {
        do {
            let environment = ProcessInfo.processInfo.environment
            let resolved = try ConfigurationLoader.resolve(arguments: settings, environment: environment)
            // The OTEL_* variables stop run with 78 too, so they are checked here as run checks them.
            _ = try TracingSetup.configuration(environment: environment)
            print(ConfigurationHelp.report(resolved))
        } catch {
            StandardError.write("\(error)\n")
            throw ExitCode(ConfigurationError.exitStatus)
        }
    }
}
