/// An invalid configuration value, or a config or secret file that cannot be read.
///
/// The worker prints ``description`` as its only line and exits with ``exitStatus`` (78,
/// `EX_CONFIG`) before it connects to anything. ``description`` never contains a secret: errors
/// about `amqp.url` show the URL with its password replaced by `***`, and errors about other
/// secrets (keys ending in `password` or `secret`, and `*_FILE` contents) do not show the value.
package struct ConfigurationError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The configuration key at fault, such as `worker.concurrency`; `config` for the
    /// `--config` file itself, `arguments` for an unknown command-line flag.
    package var key: String
    /// What is wrong, such as `must be an integer between 1 and 4096, got "abc"`.
    package var problem: String
    /// Where the value came from, such as `flag --worker-concurrency`, `environment variable
    /// WORKER_CONCURRENCY` or `config file w.yaml`; nil when unknown or for defaults.
    package var source: String?

    /// The exit status for a configuration error: 78, `EX_CONFIG` from `sysexits.h`.
    package static let exitStatus: Int32 = 78

    /// Creates an error about `key`.
    ///
    /// - Parameters:
    ///   - key: The configuration key at fault.
    ///   - problem: What is wrong with it. Must not contain a secret value.
    ///   - source: Where the value came from, if known.
    package init(key: String, problem: String, source: String? = nil) {
        self.key = key
        self.problem = problem
        self.source = source
    }

    /// One line: `configuration error: worker.concurrency: must be … (from environment variable
    /// WORKER_CONCURRENCY)`.
    package var description: String {
        var line = "configuration error: \(key): \(problem)"
        if let source {
            line += " (from \(source))"
        }
        return line.oneLine()
    }
}

extension String {
    /// The string with line breaks turned into spaces, so that an error stays on one line.
    fileprivate func oneLine() -> String {
        String(self.map { $0.isNewline ? " " : $0 })
    }
}
