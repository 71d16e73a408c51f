import Crypto
import Foundation
import ImageFetchWorker
import Testing

/// One object per content on S3 (issue 35, item 3): a content-addressed object already in the
/// store with these bytes is not uploaded again (a HEAD first), and anything else at that key is
/// replaced, so a result never points at other bytes. moto checks the signatures.
@Suite(
    .enabled(
        if: TestS3.isAvailable || TestBroker.isStrict, "needs moto_server (scripts/deps.sh installs moto[server])"),
    .serialized)
struct S3ContentAddressTests {
    static let bucket = "ifw-content"

    private static func store(_ sink: S3Sink, _ body: [UInt8]) async -> Result<StoredObject, StorageError> {
        let sha256 = SHA256.hash(data: body).map { String(format: "%02x", $0) }.joined()
        let request = StorageRequest(
            body: body, sha256: sha256, info: ImageInfo(format: .png, width: 1, height: 1), keyHint: nil,
            jobID: "content", sourceURL: "http://127.0.0.1/a.png")
        return await withCheckedContinuation { continuation in
            sink.store(request) { continuation.resume(returning: $0) }
        }
    }

    @Test(.timeLimit(.minutes(2)))
    func anObjectAlreadyThereIsNotUploadedAgainButOtherBytesAreReplaced() async throws {
        let store = try await TestS3.start()
        try await store.createBucket(Self.bucket)
        let (keyID, secret) = try await store.enforceSignatures()
        var settings = WorkerConfiguration.S3()
        settings.endpoint = store.endpoint
        settings.region = store.region
        settings.bucket = Self.bucket
        settings.pathStyle = true
        settings.accessKeyID = keyID
        settings.secretAccessKey = secret
        let sink = try S3Sink(settings: settings, fetch: WorkerConfiguration.Fetch())
        let body = TestOrigin.okBody

        let first = try await Self.store(sink, body).get()
        #expect(first.wrote, "the first store must upload")
        let again = try await Self.store(sink, body).get()
        #expect(!again.wrote, "the object was there with these bytes: uploaded again")
        #expect(again.location == first.location)

        // Other bytes at the content address (put there by hand): replaced, not trusted.
        let location = try #require(first.location)
        let key = String(location.dropFirst("s3://\(Self.bucket)/".count))
        var planted = store.signed("\(store.endpoint)/\(Self.bucket)/\(key)", credentials: "\(keyID):\(secret)")
        planted.method = .put
        let plantedBytes = Array("not the image".utf8)
        planted.uploadBody = plantedBytes
        let plantedDigest = SHA256.hash(data: plantedBytes).map { String(format: "%02x", $0) }.joined()
        planted.headers = ["x-amz-content-sha256: \(plantedDigest)"]
        let put = await store.send(planted)
        #expect(put.error == nil, "\(String(describing: put.error))")
        let replaced = try await Self.store(sink, body).get()
        #expect(replaced.wrote, "other bytes at the content address were kept")
        let read = await store.getObject(bucket: Self.bucket, key: key, credentials: "\(keyID):\(secret)")
        #expect(read.body == body)
        await store.stop()
    }
}
