import Foundation
import ImageFetchWorker
import Synchronization
import Testing

/// Temporary S3 credentials, the cloud way: a web identity exchanged at moto's STS, and a
/// container credentials endpoint served by the test's origin. The uploads go to the origin's
/// `/echo` (path-style bucket `echo`), which records the headers each upload was signed with.
@Suite(.serialized)
struct S3CredentialsTests {
    static func scratchFile(_ contents: String) throws -> String {
        let path = TestScratch.path("cred-\(UUID().uuidString)")
        try Data(contents.utf8).write(to: URL(fileURLWithPath: path))
        return path
    }

    /// The sink's configuration as the loader builds it from `environment`.
    static func configuration(_ origin: TestOrigin, _ environment: [String: String]) throws -> WorkerConfiguration {
        try ConfigurationLoader.load(
            arguments: [],
            environment: [
                "STORAGE_KIND": "s3", "S3_BUCKET": "echo", "S3_ENDPOINT": "http://127.0.0.1:\(origin.port)",
                "S3_PATH_STYLE": "true",
            ].merging(environment) { _, new in new })
    }

    static func store(_ sink: S3Sink, key: String) async -> Result<StoredObject, StorageError> {
        let body = TestOrigin.okBody
        guard case .image(let info) = ImageSniffer.inspect(body) else {
            return .failure(StorageError("not an image", retryable: false))
        }
        let request = StorageRequest(
            body: body, sha256: String(repeating: "a", count: 64), info: info, keyHint: key, jobID: key,
            sourceURL: "http://example.test/a.png")
        return await withCheckedContinuation { continuation in
            sink.store(request) { continuation.resume(returning: $0) }
        }
    }

    /// The headers of the upload of `key`, as the origin received them.
    static func uploadHeaders(_ origin: TestOrigin, key: String) -> [String] {
        origin.stats.headers.first { $0.key.hasPrefix("/echo/") && $0.key.hasSuffix("/\(key)") }?.value ?? []
    }

    static func accessKey(inAuthorization headers: [String]) -> String? {
        guard let line = headers.first(where: { $0.hasPrefix("authorization: ") }),
            let range = line.range(of: "Credential=")
        else { return nil }
        return String(line[range.upperBound...].prefix { $0 != "/" })
    }

    // Under `make test` (IFW_TEST_STRICT) a missing moto_server fails the test rather than skipping it.
    @Test(
        .enabled(
            if: TestS3.isAvailable || TestBroker.isStrict, "needs moto_server (scripts/deps.sh installs moto[server])"),
        .timeLimit(.minutes(2)))
    func webIdentityIsExchangedAtSTS() async throws {
        let origin = try await TestOrigin.start()
        let sts = try await TestS3.start()
        defer { Task { await sts.stop() } }
        let token = try Self.scratchFile("eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQ6aWZ3In0.c2ln\n")
        let configuration = try Self.configuration(
            origin,
            [
                "AWS_ROLE_ARN": "arn:aws:iam::123456789012:role/image-fetch-worker",
                "AWS_WEB_IDENTITY_TOKEN_FILE": token,
                "AWS_ENDPOINT_URL_STS": sts.endpoint,
            ])
        guard case .webIdentity? = configuration.s3.temporaryCredentials else {
            Issue.record("no web identity source: \(configuration.s3)")
            return
        }
        let sink = try S3Sink(settings: configuration.s3, fetch: configuration.fetch)
        let issued = try sink.credentials.current().get()
        #expect(issued.accessKeyID.hasPrefix("ASIA"), "moto's STS issues temporary ASIA… keys")
        #expect(issued.sessionToken?.isEmpty == false)
        #expect(issued.expiration.map { $0 > Date() } == true)

        let stored = await Self.store(sink, key: "web-identity.png")
        #expect((try? stored.get()) != nil, "\(stored)")
        let headers = Self.uploadHeaders(origin, key: "web-identity.png")
        #expect(Self.accessKey(inAuthorization: headers) == issued.accessKeyID)
        #expect(headers.contains("x-amz-security-token: \(issued.sessionToken ?? "-")"))
        try await origin.shutdown()
    }

    @Test(.timeLimit(.minutes(2)))
    func containerCredentialsAreRefreshedBeforeTheyExpire() async throws {
        let origin = try await TestOrigin.start()
        let tokenFile = try Self.scratchFile("pod-identity-token-1\n")
        let configuration = try Self.configuration(
            origin,
            [
                "AWS_CONTAINER_CREDENTIALS_FULL_URI": "http://127.0.0.1:\(origin.port)/credentials?ttl=4",
                "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE": tokenFile,
            ])
        let sink = try S3Sink(settings: configuration.s3, fetch: configuration.fetch)
        #expect(origin.stats.headers["/credentials?ttl=4"]?.contains("authorization: pod-identity-token-1") == true)
        #expect((try? await Self.store(sink, key: "first.png").get()) != nil)
        #expect(Self.accessKey(inAuthorization: Self.uploadHeaders(origin, key: "first.png")) == "ASIATEST1")
        #expect(Self.uploadHeaders(origin, key: "first.png").contains("x-amz-security-token: token1"))

        // The refresh is due with a quarter of the 4 s lifetime left: new keys before the old expire.
        // The wait is for the sink to hold them, not for the origin to have sent them: the sink
        // takes them only once the answer is read, and an upload in between still signs with the old.
        let refreshed = await eventually(timeout: 3.8) {
            (try? sink.credentials.current().get().accessKeyID) == "ASIATEST2"
        }
        #expect(refreshed, "no refresh before expiry (issued: \(origin.stats.credentialsIssued))")
        #expect((try? await Self.store(sink, key: "second.png").get()) != nil)
        #expect(Self.accessKey(inAuthorization: Self.uploadHeaders(origin, key: "second.png")) == "ASIATEST2")
        try await origin.shutdown()
    }

    @Test(.timeLimit(.minutes(2)))
    func expiredCredentialsAreARetryableStorageFailureUntilARefreshSucceeds() async throws {
        let origin = try await TestOrigin.start()
        let configuration = try Self.configuration(
            origin,
            [
                "AWS_CONTAINER_CREDENTIALS_FULL_URI": "http://127.0.0.1:\(origin.port)/credentials?ttl=3",
                "AWS_CONTAINER_AUTHORIZATION_TOKEN": "static-token",
            ])
        let sink = try S3Sink(settings: configuration.s3, fetch: configuration.fetch)
        origin.failCredentials(true)
        let expiration = try #require(try sink.credentials.current().get().expiration)
        try await Task.sleep(for: .seconds(max(0, expiration.timeIntervalSinceNow) + 0.3))

        guard case .failure(let error) = await Self.store(sink, key: "expired.png") else {
            Issue.record("an upload with expired credentials succeeded")
            return
        }
        #expect(JobError(error).code == .storageFailed)
        #expect(error.retryable)
        #expect(error.message.contains("expired"))
        #expect(!error.message.contains("secret") && !error.message.contains("token"))
        #expect(Self.uploadHeaders(origin, key: "expired.png").isEmpty, "nothing is sent with expired keys")

        origin.failCredentials(false)
        let recovered = await eventually(timeout: 10) { (try? sink.credentials.current().get()) != nil }
        #expect(recovered)
        #expect((try? await Self.store(sink, key: "after.png").get()) != nil)
        #expect(Self.accessKey(inAuthorization: Self.uploadHeaders(origin, key: "after.png")) == "ASIATEST2")
        try await origin.shutdown()
    }

    /// An endpoint that answers with credentials that expired already has not refreshed them: the
    /// valid ones are kept until they expire, the failure is named, and the request is tried again
    /// with the backoff, not every second.
    @Test(.timeLimit(.minutes(2)))
    func credentialsThatExpiredAlreadyAreAFailedRefresh() async throws {
        let origin = try await TestOrigin.start()
        let configuration = try Self.configuration(
            origin,
            [
                "AWS_CONTAINER_CREDENTIALS_FULL_URI": "http://127.0.0.1:\(origin.port)/credentials?ttl=4",
                "AWS_CONTAINER_AUTHORIZATION_TOKEN": "static-token",
            ])
        let started = Date()
        let sink = try S3Sink(settings: configuration.s3, fetch: configuration.fetch)
        origin.credentialsLifetime(-60)
        let expiration = try #require(try sink.credentials.current().get().expiration)

        // The refresh is due after 3 s; its answer must not replace the keys that still hold.
        let refreshed = await eventually(timeout: 3.9) { origin.stats.credentialsIssued >= 2 }
        #expect(refreshed, "no refresh before expiry")
        try await Task.sleep(for: .milliseconds(200))
        if Date() < expiration {
            #expect((try? sink.credentials.current().get().accessKeyID) == "ASIATEST1")
        }

        try await Task.sleep(for: .seconds(max(0, expiration.timeIntervalSinceNow) + 0.3))
        guard case .failure(let error) = sink.credentials.current() else {
            Issue.record("credentials that expired already were used")
            return
        }
        #expect(error.retryable)
        #expect(error.message.contains("expired already"), "\(error.message)")

        // Failed refreshes are tried again after 1, 2, 4 … s: by 8 s from the start, the first
        // answer and at most three more, not one a second.
        try await Task.sleep(for: .seconds(max(0, 8 - Date().timeIntervalSince(started))))
        #expect(origin.stats.credentialsIssued <= 4, "\(origin.stats.credentialsIssued) requests in 8 s")
        try await origin.shutdown()
    }

    @Test(
        .timeLimit(.minutes(1)),
        arguments: [
            ("/status/403", "answered HTTP 403"),
            ("/credentials-missing", "answered HTTP 404"),
        ])
    func aCredentialProblemAtStartUpIsOneLineAndExit78(path: String, expected: String) async throws {
        let origin = try await TestOrigin.start()
        let worker = try WorkerProcess(environment: [
            "STORAGE_KIND": "s3", "S3_BUCKET": "echo", "S3_ENDPOINT": "http://127.0.0.1:\(origin.port)",
            "S3_PATH_STYLE": "true", "HTTP_PORT": "0",
            "AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "",
            "AWS_CONTAINER_CREDENTIALS_FULL_URI": "http://127.0.0.1:\(origin.port)\(path)",
            "AWS_CONTAINER_AUTHORIZATION_TOKEN": "do-not-print-me",
        ])
        let status = await worker.waitForExit(timeout: 30)
        #expect(status == 78, "log:\n\(worker.log)")
        let lines = worker.log.split(whereSeparator: \.isNewline)
        #expect(lines.count == 1, "\(worker.log)")
        #expect(lines.first?.contains("s3.credentials") == true)
        #expect(lines.first?.contains(expected) == true, "\(worker.log)")
        #expect(!worker.log.contains("do-not-print-me"))
        try await origin.shutdown()
    }
}
