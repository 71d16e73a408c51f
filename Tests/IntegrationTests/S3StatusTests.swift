import Foundation
import ImageFetchWorker
import Testing

/// How the S3 sink classifies what a store answers, against a real HTTP server: TestOrigin's
/// `/status/N` route, reached as the path-style bucket `status` with the prefix `N/`.
@Suite struct S3StatusTests {
    static let sha = "5e" + String(repeating: "a1", count: 31)

    static func store(endpoint: String, prefix: String) async throws -> Result<StoredObject, StorageError> {
        var settings = WorkerConfiguration.S3()
        settings.endpoint = endpoint
        settings.bucket = "status"
        settings.prefix = prefix
        settings.pathStyle = true
        settings.accessKeyID = "AKIDEXAMPLE"
        settings.secretAccessKey = "secret-not-to-be-shown"
        var fetch = WorkerConfiguration.Fetch()
        fetch.timeout = 10
        fetch.connectTimeout = 5
        let sink = try S3Sink(settings: settings, fetch: fetch)
        let request = StorageRequest(
            body: Array(repeating: 7, count: 1000), sha256: sha,
            info: ImageInfo(format: .png, width: 1, height: 1), keyHint: nil,
            jobID: "s3-status", sourceURL: "http://127.0.0.1/a.png")
        return await sink.store(request)
    }

    @Test(arguments: [
        (status: 404, retryable: false, says: "does the bucket exist?"),
        (status: 403, retryable: false, says: "403"),
        (status: 408, retryable: true, says: "HTTP 408"),
        (status: 429, retryable: true, says: "HTTP 429"),
        (status: 500, retryable: true, says: "HTTP 500"),
        (status: 503, retryable: true, says: "HTTP 503"),
        (status: 400, retryable: false, says: "HTTP 400"),
    ])
    func anAnswerIsClassifiedByItsStatus(status: Int, retryable: Bool, says: String) async throws {
        let origin = try await TestOrigin.start()
        let result = try await Self.store(endpoint: origin.url(""), prefix: "\(status)/")
        guard case .failure(let error) = result else {
            Issue.record("HTTP \(status) was taken for a stored object")
            try await origin.shutdown()
            return
        }
        #expect(JobError(error).code == .storageFailed)
        #expect(error.retryable == retryable, "HTTP \(status): \(error.message)")
        #expect(error.message.contains(says), "\(error.message)")
        #expect(!error.message.contains("secret-not-to-be-shown"))
        #expect(origin.stats.requests >= 1, "the upload never reached the server")
        try await origin.shutdown()
    }

    @Test func aStoreWhoseNameDoesNotResolveIsRetryable() async throws {
        // `.invalid` never resolves (RFC 2606).
        let result = try await Self.store(endpoint: "http://s3.ifw-test.invalid:9000", prefix: "")
        guard case .failure(let error) = result else {
            Issue.record("stored on a host that does not exist")
            return
        }
        #expect(JobError(error).code == .storageFailed)
        #expect(error.retryable)
        #expect(error.message.contains("could not be reached"), "\(error.message)")
    }

    @Test func aStoredObjectIsASuccess() async throws {
        let origin = try await TestOrigin.start()
        // `/echo/...` answers 200: the sink takes any 2xx as stored.
        var settings = WorkerConfiguration.S3()
        settings.endpoint = origin.url("")
        settings.bucket = "echo"
        settings.pathStyle = true
        settings.accessKeyID = "AKIDEXAMPLE"
        settings.secretAccessKey = "secret"
        let sink = try S3Sink(settings: settings, fetch: WorkerConfiguration.Fetch())
        let request = StorageRequest(
            body: [1, 2, 3], sha256: Self.sha, info: ImageInfo(format: .png, width: 1, height: 1),
            keyHint: "k.png", jobID: "j", sourceURL: "http://127.0.0.1/a.png")
        let stored = try await sink.store(request).get()
        #expect(stored.location == "s3://echo/k.png")
        try await origin.shutdown()
    }
}

extension S3Sink {
    /// Stores and waits for the completion.
    fileprivate func store(_ request: StorageRequest) async -> Result<StoredObject, StorageError> {
        await withCheckedContinuation { continuation in
            store(request) { continuation.resume(returning: $0) }
        }
    }
}
