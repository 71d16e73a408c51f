import Crypto
import Foundation
import ImageFetchWorker
import Testing

/// `storage.kind=s3` end to end: the worker process uploads to moto's S3 server on 127.0.0.1, which
/// checks SigV4 signatures, and the test reads every object back with signed GETs.
@Suite(
    .enabled(if: TestBroker.isAvailable, "needs the RabbitMQ that `make test` starts"),
    // Under `make test` (IFW_TEST_STRICT) a missing moto_server fails the suite rather than skipping it.
    .enabled(
        if: TestS3.isAvailable || TestBroker.isStrict, "needs moto_server (scripts/deps.sh installs moto[server])"),
    .serialized)
struct S3SinkTests {
    static let bucket = "ifw-images"

    /// The worker's environment for the S3 sink. The secret goes through S3_SECRET_ACCESS_KEY_FILE
    /// and the key id through the AWS_ACCESS_KEY_ID fallback, so both paths are exercised.
    static func environment(
        _ configuration: WorkerConfiguration, store: TestS3, keyID: String, secret: String
    )
        throws -> [String: String]
    {
        let secretFile = FileManager.default.temporaryDirectory.appendingPathComponent(
            "ifw-s3-secret-\(UUID().uuidString)")
        try Data((secret + "\n").utf8).write(to: secretFile)
        return TestBroker.environment(configuration, storage: "/nonexistent-unused")
            .merging([
                "STORAGE_KIND": "s3",
                "S3_ENDPOINT": store.endpoint,
                "S3_BUCKET": bucket,
                "S3_REGION": store.region,
                "S3_PATH_STYLE": "true",
                "S3_PREFIX": "img/",
                "AWS_ACCESS_KEY_ID": keyID,
                "S3_SECRET_ACCESS_KEY_FILE": secretFile.path,
                "LOG_LEVEL": "debug",
            ]) { _, new in new }
    }

    static func hex(_ bytes: some Sequence<UInt8>) -> String {
        SHA256.hash(data: Array(bytes)).map { String(format: "%02x", $0) }.joined()
    }

    @Test(.timeLimit(.minutes(3)))
    func twoHundredJobsAreStoredAndReadBackWithSignedGets() async throws {
        let origin = try await TestOrigin.start()
        let store = try await TestS3.start()
        try await store.createBucket(Self.bucket)
        let (keyID, secret) = try await store.enforceSignatures()
        let credentials = "\(keyID):\(secret)"

        var configuration = try TestBroker.configuration("s3")
        configuration.retry.delays = [1]
        defer { TestBroker.cleanUp(configuration) }
        // Every tenth job is content-addressed; the others name their own keys. (The origin serves
        // one body, so content-addressed jobs all write the same key, and moto 5 sometimes answers
        // 500 to concurrent overwrites of one key; those jobs would only be retried.)
        let bodies = (0..<200).map { index in
            JobPublisher.jobBody(
                id: "s3-\(index)", url: origin.url("/ok.png?n=\(index)"),
                key: index % 10 == 0 ? nil : "named/job \(index).png")
        }
        #expect(try TestBroker.publish(configuration, bodies: bodies) == 200)
        let results = try QueueCollector(configuration, queue: configuration.queue.results)
        defer { results.close() }
        let worker = try WorkerProcess(
            environment: Self.environment(configuration, store: store, keyID: keyID, secret: secret)
                .merging(["WORKER_CONCURRENCY": "16"]) { _, new in new })
        await results.wait(for: 200, timeout: 120)

        let objects = results.objects
        #expect(objects.count == 200, "worker log:\n\(worker.log.suffix(3000))\nmoto log:\n\(store.log(tail: 1500))")
        let expected = Self.hex(TestOrigin.okBody)
        var read = 0
        for object in objects {
            #expect(object["status"] as? String == "ok", "\(object)\nmoto log:\n\(store.log(tail: 6000))")
            let location = try #require(object["location"] as? String, "\(object)")
            let prefix = "s3://\(Self.bucket)/"
            #expect(location.hasPrefix(prefix))
            let key = String(location.dropFirst(prefix.count))
            let index = Int((object["id"] as? String ?? "").dropFirst(3)) ?? -1
            if index % 10 == 0 {
                #expect(key == "img/\(expected.prefix(2))/\(expected).png")
            } else {
                #expect(key == "img/named/job \(index).png")
            }
            let stored = await store.getObject(bucket: Self.bucket, key: key, credentials: credentials)
            let body = try #require(stored.body, "GET \(key): HTTP \(stored.status ?? 0)")
            #expect(Self.hex(body) == object["sha256"] as? String)
            #expect(stored.contentType == "image/png")
            read += 1
        }
        #expect(read == 200)
        // Signatures are checked: the same GET with a wrong secret is refused.
        let refused = await store.getObject(
            bucket: Self.bucket, key: "img/\(expected.prefix(2))/\(expected).png",
            credentials: "\(keyID):wrong")
        #expect(refused.status == 403)
        #expect(await worker.stop() == 0)
        #expect(!worker.log.contains(secret), "the secret access key leaked into the worker's log")
        await store.stop()
        try await origin.shutdown()
    }

    @Test(.timeLimit(.minutes(2)))
    func aWrongSecretIsANonRetryableStorageFailure() async throws {
        let origin = try await TestOrigin.start()
        let store = try await TestS3.start()
        try await store.createBucket(Self.bucket)
        let (keyID, _) = try await store.enforceSignatures()
        let wrongSecret = "wrong-\(UUID().uuidString)"

        let configuration = try TestBroker.configuration("s3denied")
        defer { TestBroker.cleanUp(configuration) }
        let bodies = (0..<3).map { JobPublisher.jobBody(id: "denied-\($0)", url: origin.url("/ok.png?n=\($0)")) }
        #expect(try TestBroker.publish(configuration, bodies: bodies) == 3)
        let results = try QueueCollector(configuration, queue: configuration.queue.results)
        defer { results.close() }
        let worker = try WorkerProcess(
            environment: Self.environment(configuration, store: store, keyID: keyID, secret: wrongSecret))
        await results.wait(for: 3, timeout: 60)

        let objects = results.objects
        #expect(objects.count == 3, "worker log:\n\(worker.log.suffix(3000))")
        for object in objects {
            #expect(object["status"] as? String == "failed")
            #expect(object["attempt"] as? Int == 1, "a 403 must not be retried")
            let error = try #require(object["error"] as? [String: Any])
            #expect(error["code"] as? String == "storage_failed")
            #expect(error["retryable"] as? Bool == false)
            let message = error["message"] as? String ?? ""
            #expect(message.contains(Self.bucket), "\(message)")
            #expect(message.contains("403"), "\(message)")
            #expect(!message.contains(wrongSecret) && !message.contains(keyID), "\(message)")
            #expect(object["location"] == nil)
        }
        #expect(try TestBroker.ready(configuration, queue: configuration.queue.dead) == 0)
        #expect(await worker.stop() == 0)
        #expect(!worker.log.contains(wrongSecret))
        await store.stop()
        try await origin.shutdown()
    }

    @Test(.timeLimit(.minutes(3)))
    func aStoppedStoreGivesRetriesThenSuccessOnceItIsBack() async throws {
        let origin = try await TestOrigin.start()
        let store = try await TestS3.start()
        let credentials = (keyID: "AKIAIOSFODNN7EXAMPLE", secret: "moto-accepts-any-secret-until-told-otherwise")
        try await store.createBucket(Self.bucket)

        var configuration = try TestBroker.configuration("s3retry")
        configuration.retry.delays = [1]
        configuration.retry.maxAttempts = 60
        defer { TestBroker.cleanUp(configuration) }
        await store.stop()

        let bodies = (0..<5).map { JobPublisher.jobBody(id: "retry-\($0)", url: origin.url("/ok.png?n=\($0)")) }
        #expect(try TestBroker.publish(configuration, bodies: bodies) == 5)
        let results = try QueueCollector(configuration, queue: configuration.queue.results)
        defer { results.close() }
        let worker = try WorkerProcess(
            environment: Self.environment(
                configuration, store: store, keyID: credentials.keyID, secret: credentials.secret))

        // While the store is down, jobs go round the 1 s retry queue instead of failing.
        #expect(
            await eventually(timeout: 30) { worker.log.components(separatedBy: "outcome=retry").count > 10 },
            "no retries seen; worker log:\n\(worker.log.suffix(3000))")
        #expect(results.received.isEmpty, "no result may be published while the store is down")

        // Back on the same port; moto keeps nothing in memory, so the bucket is made again. The
        // worker is paused meanwhile, so that no upload lands between moto's start and the new
        // bucket (that would be a 404, which is final).
        worker.signal(SIGSTOP)
        try await store.launch()
        try await store.createBucket(Self.bucket)
        worker.signal(SIGCONT)
        await results.wait(for: 5, timeout: 60)
        let objects = results.objects
        #expect(objects.count == 5, "worker log:\n\(worker.log.suffix(3000))")
        for object in objects {
            #expect(object["status"] as? String == "ok", "\(object)")
            #expect((object["attempt"] as? Int ?? 0) > 1, "\(object)")
            let location = try #require(object["location"] as? String)
            let key = String(location.dropFirst("s3://\(Self.bucket)/".count))
            let stored = await store.getObject(
                bucket: Self.bucket, key: key, credentials: "\(credentials.keyID):\(credentials.secret)")
            #expect(stored.body.map { Self.hex($0) } == object["sha256"] as? String)
        }
        #expect(await worker.stop() == 0)
        await store.stop()
        try await origin.shutdown()
    }

    @Test(.timeLimit(.minutes(1)))
    func aMissingBucketStopsTheWorkerWithExit78() async throws {
        let worker = try WorkerProcess(environment: [
            "STORAGE_KIND": "s3", "S3_BUCKET": "", "HTTP_PORT": "0",
            "AMQP_URL": TestBroker.url ?? "",
        ])
        #expect(await worker.waitForExit(timeout: 20) == 78)
        let lines = worker.log.split(separator: "\n")
        #expect(lines.count == 1, "\(worker.log)")
        #expect(worker.log.contains("s3.bucket"), "\(worker.log)")
    }
}
