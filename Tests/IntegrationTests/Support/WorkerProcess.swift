import Foundation
import Synchronization

/// The worker binary run as a user runs it: a child process with environment configuration,
/// its output captured to a log file.
final class WorkerProcess: @unchecked Sendable {
    // @unchecked Sendable: `process` is only started and signalled from the test's task.
    let process = Process()
    let logURL: URL
    private let exitedAt = ExitTime()

    /// The built executable: `IFW_WORKER_BINARY`, else `.build/debug/image-fetch-worker` of this package.
    static var binary: String {
        if let path = ProcessInfo.processInfo.environment["IFW_WORKER_BINARY"] { return path }
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent()
        return root.appendingPathComponent(".build/debug/image-fetch-worker").path
    }

    /// With `standardError`, the worker's standard error goes there instead of the log file.
    init(arguments: [String] = ["run"], environment: [String: String], standardError: FileHandle? = nil) throws {
        logURL = URL(fileURLWithPath: TestScratch.path("worker-\(UUID().uuidString).log"))
        _ = FileManager.default.createFile(atPath: logURL.path, contents: nil)
        let log = try FileHandle(forWritingTo: logURL)
        process.executableURL = URL(fileURLWithPath: Self.binary)
        process.arguments = arguments
        var env = ProcessInfo.processInfo.environment
        env.merge(environment) { _, new in new }
        env["LOG_SUMMARY_INTERVAL"] = env["LOG_SUMMARY_INTERVAL"] ?? "2"
        process.environment = env
        process.standardOutput = log
        process.standardError = standardError ?? log
        process.terminationHandler = { [exitedAt] _ in exitedAt.moment.withLock { $0 = Date() } }
        try process.run()
    }

    var isRunning: Bool { process.isRunning }

    /// Everything the worker logged so far.
    var log: String { (try? String(contentsOf: logURL, encoding: .utf8)) ?? "" }

    func signal(_ signo: Int32) { kill(process.processIdentifier, signo) }

    /// When the process exited, as seen by its termination handler; nil while it runs. Lets a test
    /// time the worker alone when the test itself was busy meanwhile (stopping a broker, say).
    var exitTime: Date? { exitedAt.moment.withLock { $0 } }

    /// Its own object so the termination handler does not hold the `WorkerProcess`, whose deinit
    /// kills a worker a failed test left running.
    private final class ExitTime: Sendable {
        let moment = Mutex<Date?>(nil)
    }

    /// Waits for the process to exit; returns its status, or nil on timeout.
    func waitForExit(timeout: Double) async -> Int32? {
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning, Date() < deadline { try? await Task.sleep(for: .milliseconds(20)) }
        return process.isRunning ? nil : process.terminationStatus
    }

    /// SIGTERM, then SIGKILL if it is still there after `grace` seconds.
    func stop(grace: Double = 30) async -> Int32? {
        guard process.isRunning else { return process.terminationStatus }
        signal(SIGTERM)
        if let status = await waitForExit(timeout: grace) { return status }
        signal(SIGKILL)
        return await waitForExit(timeout: 5)
    }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
    }
}

/// One scratch folder per test process for stored images and worker logs, removed when the
/// process exits, so test runs leave nothing behind in /tmp.
enum TestScratch {
    static let root: String = {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("ifw-tests-\(getpid())").path
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        atexit { try? FileManager.default.removeItem(atPath: TestScratch.root) }
        return path
    }()

    /// A path inside the scratch folder.
    static func path(_ name: String) -> String { root + "/" + name }
}

/// Raises this process's soft limit on open descriptors to at least `minimum` (up to the hard
/// limit); throws when the hard limit is lower, so the test fails with the reason.
func raiseFileDescriptorLimit(to minimum: rlim_t) throws {
    var limit = rlimit()
    guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { throw POSIXError(.EINVAL) }
    guard limit.rlim_cur < minimum else { return }
    guard limit.rlim_max >= minimum else {
        throw TestSetupError(
            "the hard limit on open files is \(limit.rlim_max); this test needs \(minimum) (ulimit -Hn)")
    }
    limit.rlim_cur = minimum
    guard setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { throw POSIXError(.EPERM) }
}
