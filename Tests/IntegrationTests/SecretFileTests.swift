import Foundation
import ImageFetchWorker
import Testing

/// Secrets from files: a broker password given only through `AMQP_URL_FILE` works, and it shows up
/// in no log line, in no error, on `/metrics` or in `depth` output.
@Suite(.enabled(if: TestBroker.isAvailable, "needs the RabbitMQ that `make test` starts"), .serialized)
struct SecretFileTests {
    @Test(.timeLimit(.minutes(3)))
    func aPasswordFromAMQPURLFileWorksAndIsNeverPrinted() async throws {
        let script = try #require(TestBroker.script)
        let base = try #require(TestBroker.url.flatMap { try? AMQPURL(parsing: $0) })
        let user = "ifw-secret-\(UUID().uuidString.prefix(8).lowercased())"
        let password = "Pw-\(UUID().uuidString)"
        #expect(try TestBroker.run(script, ["ctl", "add_user", user, password]) == 0)
        #expect(try TestBroker.run(script, ["ctl", "set_permissions", "-p", "/", user, ".*", ".*", ".*"]) == 0)
        defer { _ = try? TestBroker.run(script, ["ctl", "delete_user", user]) }

        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("ifw-secrets-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let urlFile = folder.appendingPathComponent("amqp_url")
        try Data("amqp://\(user):\(password)@127.0.0.1:\(base.port)/%2F\n".utf8).write(to: urlFile)
        let wrongFile = folder.appendingPathComponent("amqp_url_wrong")
        let wrongPassword = "Wrong-\(UUID().uuidString)"
        try Data("amqp://\(user):\(wrongPassword)@127.0.0.1:\(base.port)/%2F".utf8).write(to: wrongFile)

        let origin = try await TestOrigin.start()
        let configuration = try TestBroker.configuration("secret")
        defer { TestBroker.cleanUp(configuration) }
        let bodies = (0..<20).map { JobPublisher.jobBody(id: "secret-\($0)", url: origin.url("/ok.png?n=\($0)")) }
        #expect(try TestBroker.publish(configuration, bodies: bodies) == 20)
        let results = try QueueCollector(configuration, queue: configuration.queue.results)
        defer { results.close() }

        var environment = TestBroker.environment(configuration, storage: WorkerEndToEndTests.storageFolder())
        environment["AMQP_URL"] = nil
        environment["AMQP_URL_FILE"] = urlFile.path
        environment["LOG_LEVEL"] = "trace"
        let httpPort = try TestBroker.freePort()
        environment["HTTP_PORT"] = "\(httpPort)"
        environment["HTTP_HOST"] = "127.0.0.1"
        environment["METRICS_DEPTH_INTERVAL"] = "1"
        let worker = try WorkerProcess(environment: environment)
        await results.wait(for: 20, timeout: 60)
        #expect(results.objects.count == 20, "worker log:\n\(worker.log.suffix(3000))")
        #expect(results.objects.allSatisfy { $0["status"] as? String == "ok" })

        // /metrics, read with the fetch engine.
        let engine = try FetchEngine(configuration: WorkerConfiguration.Fetch(), addressPolicy: nil)
        let metrics: FetchResponse = await withCheckedContinuation { continuation in
            engine.fetch(FetchRequest(url: "http://127.0.0.1:\(httpPort)/metrics")) {
                continuation.resume(returning: $0)
            }
        }
        #expect(metrics.httpStatus == 200)
        #expect(!String(decoding: metrics.body, as: UTF8.self).contains(password))
        engine.shutdown()

        // `depth` and `depth --json` with the same file.
        for arguments in [["depth"], ["depth", "--json"]] {
            let depth = try WorkerProcess(arguments: arguments, environment: environment)
            #expect(await depth.waitForExit(timeout: 30) == 0, "\(depth.log)")
            #expect(depth.log.contains(configuration.queue.jobs), "\(depth.log)")
            #expect(!depth.log.contains(password))
        }
        #expect(await worker.stop() == 0)

        // A wrong password from the file: the login fails with one line that names neither password.
        environment["AMQP_URL_FILE"] = wrongFile.path
        let refused = try WorkerProcess(environment: environment)
        #expect(await refused.waitForExit(timeout: 30) == 1, "\(refused.log)")
        #expect(refused.log.contains("cannot start"), "\(refused.log)")
        #expect(!refused.log.contains(wrongPassword))

        // Setting both the variable and its _FILE is a configuration error that shows neither value.
        environment["AMQP_URL"] = "amqp://\(user):\(password)@127.0.0.1:\(base.port)/%2F"
        let both = try WorkerProcess(environment: environment)
        #expect(await both.waitForExit(timeout: 30) == 78)
        #expect(!both.log.contains(password))

        for log in [worker.log, refused.log, both.log] {
            for line in log.split(separator: "\n") {
                #expect(
                    !line.contains(password) && !line.contains(wrongPassword), "a log line holds the password: \(line)")
            }
        }
        try await origin.shutdown()
    }
}
