import Foundation
import ImageFetchWorker
import Testing

/// Where the logs go is the platform's business: a log reader that went away, or a full disk
/// behind `2>>file`, costs log lines, never the worker.
@Suite(.enabled(if: TestBroker.isAvailable, "needs the RabbitMQ that `make test` starts"))
struct LogOutputTests {
    @Test(.timeLimit(.minutes(2)), arguments: ["json", "text"])
    func aStandardErrorNobodyReadsCostsLinesNotJobs(format: String) async throws {
        let origin = try await TestOrigin.start()
        let configuration = try TestBroker.configuration("stderr-\(format)")
        defer { TestBroker.cleanUp(configuration) }
        let bodies = (0..<5).map { JobPublisher.jobBody(id: "j\($0)", url: origin.url("/ok.png?n=\($0)")) }
        #expect(try TestBroker.publish(configuration, bodies: bodies) == bodies.count)
        let results = try QueueCollector(configuration, queue: configuration.queue.results)
        defer { results.close() }
        // A pipe whose reader is gone: every write to it fails with EPIPE.
        let pipe = Pipe()
        try pipe.fileHandleForReading.close()
        let worker = try WorkerProcess(
            environment: TestBroker.environment(configuration, storage: WorkerEndToEndTests.storageFolder())
                .merging(["LOG_FORMAT": format, "LOG_SUMMARY_INTERVAL": "1"]) { _, new in new },
            standardError: pipe.fileHandleForWriting)
        try pipe.fileHandleForWriting.close()
        let delivered = await results.wait(for: bodies.count, timeout: 30)
        #expect(delivered.count == bodies.count, "worker running: \(worker.isRunning)")
        // Summary lines (every second) keep failing to be written meanwhile.
        try await Task.sleep(for: .seconds(2))
        #expect(worker.isRunning, "the worker stopped")
        #expect(await worker.stop() == 0)
        try await origin.shutdown()
    }

    /// The commands' own lines on standard error (a configuration error here) are written the
    /// same way: the exit status is still the documented one. The worker starts with SIGPIPE at
    /// its default (a container's PID 1 does), not ignored as this test process has it.
    @Test func aConfigurationErrorToAStandardErrorNobodyReadsStillExits78() async throws {
        let pipe = Pipe()
        try pipe.fileHandleForReading.close()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = [
            "-c",
            "import os, signal, sys; signal.signal(signal.SIGPIPE, signal.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])",
            WorkerProcess.binary, "config",
        ]
        var environment = ProcessInfo.processInfo.environment
        environment["WORKER_CONCURRENCY"] = "lots"
        process.environment = environment
        process.standardError = pipe.fileHandleForWriting
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        try pipe.fileHandleForWriting.close()
        process.waitUntilExit()
        #expect(process.terminationReason == .exit)
        #expect(process.terminationStatus == 78)
    }
}
