import Foundation
import Testing

@testable import ImageFetchWorker

@Suite("s3.* configuration and S3 addressing")
struct S3ConfigurationTests {
    private func load(_ environment: [String: String], _ arguments: [String] = []) throws -> WorkerConfiguration {
        try ConfigurationLoader.load(arguments: arguments, environment: environment)
    }

    private func error(_ environment: [String: String]) -> ConfigurationError? {
        #expect(throws: ConfigurationError.self) {
            try ConfigurationLoader.load(arguments: [], environment: environment)
        }
    }

    static let minimal = [
        "STORAGE_KIND": "s3", "S3_BUCKET": "images", "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE",
        "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
    ]

    @Test func defaults() throws {
        let s3 = try load(Self.minimal).s3
        #expect(s3.resolvedEndpoint == "https://s3.us-east-1.amazonaws.com")
        #expect(s3.region == "us-east-1")
        #expect(s3.prefix == "")
        #expect(s3.pathStyle == false)
        #expect(s3.accessKeyID == "AKIDEXAMPLE")
        #expect(s3.secretAccessKey == "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
        #expect(s3.sessionToken == nil)
        #expect(
            try load(Self.minimal.merging(["S3_REGION": "eu-west-3"]) { _, new in new }).s3.resolvedEndpoint
                == "https://s3.eu-west-3.amazonaws.com")
        // Without storage.kind=s3 nothing is required.
        #expect(try load([:]).s3 == WorkerConfiguration.S3())
    }

    @Test func s3KeysWinOverAWSVariablesAndSecretsComeFromFiles() throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("s3-secret-\(UUID().uuidString)")
        try Data("from-file\n".utf8).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        var environment = Self.minimal
        environment["S3_ACCESS_KEY_ID"] = "OWNKEY"
        environment["S3_SECRET_ACCESS_KEY_FILE"] = file.path
        environment["AWS_SESSION_TOKEN"] = "token"
        let s3 = try load(environment).s3
        #expect(s3.accessKeyID == "OWNKEY")
        #expect(s3.secretAccessKey == "from-file")
        #expect(s3.sessionToken == "token")

        environment["S3_SECRET_ACCESS_KEY_FILE"] = nil
        environment["AWS_SECRET_ACCESS_KEY"] = nil
        environment["AWS_SECRET_ACCESS_KEY_FILE"] = file.path
        #expect(try load(environment).s3.secretAccessKey == "from-file")
    }

    @Test func requiredWhenKindIsS3() {
        var environment = Self.minimal
        environment["S3_BUCKET"] = nil
        #expect(error(environment)?.key == "s3.bucket")
        #expect(error(environment)?.description.contains("must be set when storage.kind is s3") == true)
        environment = Self.minimal
        environment["AWS_SECRET_ACCESS_KEY"] = nil
        #expect(error(environment)?.key == "s3.secret_access_key")
        environment = Self.minimal
        environment["AWS_ACCESS_KEY_ID"] = nil
        #expect(error(environment)?.key == "s3.access_key_id")
    }

    @Test func invalidValuesNameTheKeyAndHideSecrets() {
        let secret = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
        let cases: [(String, String, String)] = [
            ("S3_ENDPOINT", "ftp://store", "s3.endpoint"),
            ("S3_ENDPOINT", "https://user:pw@store", "s3.endpoint"),
            ("S3_ENDPOINT", "https://store/path", "s3.endpoint"),
            // Swift's Int takes a sign; libcurl does not, so every upload failed instead.
            ("S3_ENDPOINT", "https://store:+9000", "s3.endpoint"),
            ("S3_BUCKET", "Bad_Bucket", "s3.bucket"),
            ("S3_REGION", "us east", "s3.region"),
            ("S3_PREFIX", "/abs/", "s3.prefix"),
            ("S3_PREFIX", "a/../b/", "s3.prefix"),
            ("AWS_ACCESS_KEY_ID", "has:colon", "s3.access_key_id"),
            ("AWS_SECRET_ACCESS_KEY", secret + "\r\nX-Evil: 1", "s3.secret_access_key"),
            ("AWS_SESSION_TOKEN", "tok\nen", "s3.session_token"),
        ]
        for (variable, value, key) in cases {
            let failure = error(Self.minimal.merging([variable: value]) { _, new in new })
            #expect(failure?.key == key, "\(variable)=\(value)")
            #expect(failure?.description.contains(secret) == false)
        }
        #expect(throws: Never.self) {
            try ConfigurationLoader.load(
                arguments: [],
                environment: Self.minimal.merging(
                    ["S3_BUCKET": "Under_Score", "S3_PATH_STYLE": "true", "S3_ENDPOINT": "http://127.0.0.1:9000/"]) {
                        _, new in new
                    })
        }
    }

    @Test func endpointsAreNormalised() {
        #expect(S3Addressing.validateEndpoint("HTTP://Minio:9000/") == "http://Minio:9000")
        #expect(S3Addressing.validateEndpoint("https://[::1]:9000") == "https://[::1]:9000")
        #expect(S3Addressing.validateEndpoint("https://store:0") == nil)
        #expect(S3Addressing.validateEndpoint("https://") == nil)
    }

    @Test func objectURLs() {
        #expect(
            S3Addressing.objectURL(
                endpoint: "http://127.0.0.1:9000", bucket: "b", key: "img/ab/ab.png", pathStyle: true)
                == "http://127.0.0.1:9000/b/img/ab/ab.png")
        #expect(
            S3Addressing.objectURL(
                endpoint: "https://s3.eu-west-1.amazonaws.com", bucket: "b", key: "a b/ü+=.png", pathStyle: false)
                == "https://b.s3.eu-west-1.amazonaws.com/a%20b/%C3%BC%2B%3D.png")
    }

    @Test func metadataCannotInjectHeaders() {
        let url = "http://example.com/a b\r\nx-amz-acl: public-read\u{7F}é"
        let safe = S3Addressing.headerSafe(url, limit: 1024)
        #expect(safe == "http://example.com/a%20b%0D%0Ax-amz-acl:%20public-read%7F%C3%A9")
        #expect(safe.utf8.allSatisfy { (0x21...0x7E).contains($0) })
        // Cut at the limit, never inside an escape.
        #expect(S3Addressing.headerSafe("ab\n", limit: 4) == "ab")
        let headers = S3Addressing.uploadHeaders(
            contentType: "image/png", sha256: "ab", jobID: "id\r\nx: y",
            sourceURL: url, sessionToken: "tok")
        #expect(headers.allSatisfy { !$0.contains("\r") && !$0.contains("\n") })
        #expect(headers.contains("x-amz-meta-job-id: id%0D%0Ax:%20y"))
        #expect(headers.contains("x-amz-security-token: tok"))
    }

    /// Object metadata can be public (a bucket or CDN that serves the images): the source URL's
    /// query and fragment, where presigned links and tokens live, stay out of it (issue 33). The
    /// result's `url` keeps the whole URL.
    @Test func theSourceURLMetadataKeepsNoQueryOrFragment() {
        let headers = S3Addressing.uploadHeaders(
            contentType: "image/png", sha256: "ab", jobID: "j",
            sourceURL: "https://cdn.example/a/b.png?X-Amz-Signature=SECRET&token=SECRET#SECRET", sessionToken: nil)
        #expect(headers.contains("x-amz-meta-source-url: https://cdn.example/a/b.png"))
        #expect(!headers.contains { $0.contains("SECRET") })
    }

    /// A redirect from the endpoint is not followed: libcurl would carry `x-amz-security-token`
    /// (a header of ours, not its own credentials) to whatever host it names, and without the
    /// address veto (issue 33). S3 does not redirect a correctly addressed request.
    @Test func requestsToTheEndpointFollowNoRedirect() {
        var head = FetchRequest(url: "https://b.s3.eu-west-1.amazonaws.com/k")
        head.method = .head
        S3Addressing.prepare(
            &head, signing: "aws:amz:eu-west-1:s3",
            credentials: AWSCredentials(accessKeyID: "AK", secretAccessKey: "SK", sessionToken: "TOKEN"))
        #expect(head.maxRedirects == 0)
        #expect(head.awsSigV4 == "aws:amz:eu-west-1:s3")
        #expect(head.userPassword == "AK:SK")
    }

    @Test func storeErrors() {
        let http403 = S3Addressing.storageError(for: .httpStatus(403), status: 403, bucket: "images")
        #expect(JobError(http403).code == .storageFailed && !http403.retryable && http403.message.contains("images"))
        #expect(S3Addressing.storageError(for: .httpStatus(503), status: 503, bucket: "b").retryable)
        #expect(!S3Addressing.storageError(for: .httpStatus(400), status: 400, bucket: "b").retryable)
        for status in [408, 429, 500, 599] {
            #expect(S3Addressing.storageError(for: .httpStatus(status), status: status, bucket: "b").retryable)
            // Without a status of the response's own, the engine's status decides the same way.
            #expect(S3Addressing.storageError(for: .httpStatus(status), status: nil, bucket: "b").retryable)
        }
        for status in [404, 409, 600] {
            #expect(!S3Addressing.storageError(for: .httpStatus(status), status: nil, bucket: "b").retryable)
        }
        #expect(S3Addressing.storageError(for: .timeout, status: nil, bucket: "b").retryable)
        // An upload over 1 MiB waits for `100 Continue`; a reset after it leaves 100 as the code.
        let afterContinue = S3Addressing.storageError(for: .connectFailed(.noResponse), status: 100, bucket: "b")
        #expect(afterContinue.retryable && !afterContinue.message.contains("HTTP 100"))
        #expect(S3Addressing.storageError(for: .connectFailed(.refused), status: nil, bucket: "b").retryable)
        #expect(!S3Addressing.storageError(for: .tls, status: nil, bucket: "b").retryable)
    }

    @Test func descriptionHidesTheSecret() throws {
        let s3 = try load(Self.minimal).s3
        #expect(!"\(s3)".contains("wJalrXUtnFEMI"))
        #expect(!"\(try load(Self.minimal))".contains("wJalrXUtnFEMI"))
    }
}
