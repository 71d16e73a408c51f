import Foundation
import Testing

@testable import ImageFetchWorker

@Suite struct S3CredentialSourceTests {
    static let base = ["STORAGE_KIND": "s3", "S3_BUCKET": "images"]

    private func load(_ environment: [String: String]) throws -> WorkerConfiguration.S3 {
        try ConfigurationLoader.load(arguments: [], environment: Self.base.merging(environment) { _, new in new }).s3
    }

    private func problem(_ environment: [String: String]) -> String {
        ConfigurationLoader.problem([], Self.base.merging(environment) { _, new in new })
    }

    @Test func staticKeysWinOverThePlatformsVariables() throws {
        let s3 = try load([
            "AWS_ACCESS_KEY_ID": "AKID", "AWS_SECRET_ACCESS_KEY": "s", "AWS_ROLE_ARN": "arn:aws:iam::1:role/r",
            "AWS_WEB_IDENTITY_TOKEN_FILE": "/nonexistent",
        ])
        #expect(s3.temporaryCredentials == nil)
        #expect(s3.accessKeyID == "AKID")
    }

    @Test func webIdentity() throws {
        let token = FileManager.default.temporaryDirectory.appendingPathComponent("ifw-token-\(UUID().uuidString)").path
        try Data("t".utf8).write(to: URL(fileURLWithPath: token))
        defer { try? FileManager.default.removeItem(atPath: token) }
        let s3 = try load([
            "AWS_ROLE_ARN": "arn:aws:iam::1:role/r", "AWS_WEB_IDENTITY_TOKEN_FILE": token, "S3_REGION": "eu-west-1",
        ])
        #expect(
            s3.temporaryCredentials
                == .webIdentity(
                    .init(
                        roleARN: "arn:aws:iam::1:role/r", tokenFile: token, sessionName: "image-fetch-worker",
                        stsEndpoint: "https://sts.eu-west-1.amazonaws.com")))
        #expect(s3.description.contains("web identity"))
        #expect(problem(["AWS_ROLE_ARN": "arn:aws:iam::1:role/r"]).contains("must be set together"))
        #expect(
            problem(["AWS_ROLE_ARN": "arn:aws:iam::1:role/r", "AWS_WEB_IDENTITY_TOKEN_FILE": "/nonexistent/t"])
                .contains("cannot be read"))
    }

    /// A worker that stores files has no use for the platform's AWS variables: a pod's half-set
    /// or unreadable web identity stopped it with exit 78 (failed before the fix).
    @Test func aFileStoreIgnoresThePlatformsVariables() throws {
        for environment in [
            ["AWS_ROLE_ARN": "arn:aws:iam::1:role/r"],
            ["AWS_ROLE_ARN": "arn:aws:iam::1:role/r", "AWS_WEB_IDENTITY_TOKEN_FILE": "/nonexistent/t"],
        ] {
            let configuration = try ConfigurationLoader.load(arguments: [], environment: environment)
            #expect(configuration.storage.kind == .file)
            #expect(configuration.s3.temporaryCredentials == nil)
        }
    }

    @Test func containerEndpoint() throws {
        let relative = try load(["AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "/v2/credentials/abc"])
        #expect(
            relative.temporaryCredentials
                == .container(
                    .init(
                        url: "http://169.254.170.2/v2/credentials/abc", authorizationToken: nil,
                        authorizationTokenFile: nil)))
        let full = try load([
            "AWS_CONTAINER_CREDENTIALS_FULL_URI": "http://169.254.170.23/v1/credentials",
            "AWS_CONTAINER_AUTHORIZATION_TOKEN": "tok",
        ])
        #expect(
            full.temporaryCredentials
                == .container(
                    .init(
                        url: "http://169.254.170.23/v1/credentials", authorizationToken: "tok",
                        authorizationTokenFile: nil)))
        #expect(try load(["AWS_CONTAINER_CREDENTIALS_FULL_URI": "https://creds.example/x"]).temporaryCredentials != nil)
        for untrusted in ["http://10.0.0.5/creds", "http://example.com/creds", "ftp://127.0.0.1/"] {
            let text = problem(["AWS_CONTAINER_CREDENTIALS_FULL_URI": untrusted])
            #expect(text.contains("s3.credentials") && text.contains("FULL_URI"), "\(untrusted): \(text)")
        }
        #expect(problem(["AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "v2/x"]).contains("RELATIVE_URI"))
    }

    @Test func noSourceNamesTheAlternatives() {
        let text = problem([:])
        #expect(text.contains("s3.access_key_id") && text.contains("AWS_WEB_IDENTITY_TOKEN_FILE"))
    }

    @Test func refreshTiming() {
        let now = Date()
        let hour = AWSCredentials(accessKeyID: "a", secretAccessKey: "s", expiration: now.addingTimeInterval(3600))
        #expect(CredentialProvider.refreshDelay(for: hour, now: now) == 3300)
        let short = AWSCredentials(accessKeyID: "a", secretAccessKey: "s", expiration: now.addingTimeInterval(8))
        #expect(CredentialProvider.refreshDelay(for: short, now: now) == 6)
        #expect(
            CredentialProvider.refreshDelay(for: AWSCredentials(accessKeyID: "a", secretAccessKey: "s"), now: now)
                == nil)
        #expect([1, 2, 3, 6, 10].map { CredentialProvider.retryDelay(failures: $0) } == [1, 2, 4, 30, 30])
    }

    /// A request signed a moment before the keys expire reaches S3 after: `400 ExpiredToken`, a
    /// final `storage_failed`, and the image is lost. Keys this close to expiry are not used.
    @Test func keysAboutToExpireAreNotSignedWith() throws {
        let now = Date()
        let expiration = now.addingTimeInterval(3600)
        let provider = try CredentialProvider(
            source: .fixed(AWSCredentials(accessKeyID: "a", secretAccessKey: "s", expiration: expiration)),
            userAgent: "test")
        #expect((try? provider.current(now: expiration.addingTimeInterval(-61)).get()) != nil)
        guard case .failure(let error) = provider.current(now: expiration.addingTimeInterval(-30)) else {
            Issue.record("keys 30 s from expiry were used")
            return
        }
        #expect(error.retryable)
        // Short-lived keys (the tests' few seconds) keep a tenth of their lifetime as the margin.
        let short = AWSCredentials(accessKeyID: "a", secretAccessKey: "s", expiration: now.addingTimeInterval(4))
        let shortProvider = try CredentialProvider(source: .fixed(short), userAgent: "test")
        #expect((try? shortProvider.current(now: now.addingTimeInterval(3.5)).get()) != nil)
        #expect((try? shortProvider.current(now: now.addingTimeInterval(3.7)).get()) == nil)
    }

    @Test func stsAnswersAreParsed() throws {
        let xml = """
            <AssumeRoleWithWebIdentityResponse><AssumeRoleWithWebIdentityResult><Credentials>
            <AccessKeyId>ASIAEXAMPLE</AccessKeyId><SecretAccessKey>s&amp;cret</SecretAccessKey>
            <SessionToken>tok</SessionToken><Expiration>2030-01-02T03:04:05.123Z</Expiration>
            </Credentials></AssumeRoleWithWebIdentityResult></AssumeRoleWithWebIdentityResponse>
            """
        let source = AWSCredentialSource.webIdentity(
            .init(roleARN: "r", tokenFile: "/t", sessionName: "n", stsEndpoint: "https://sts"))
        let credentials = try CredentialRequests.parse(
            FetchResponse(httpStatus: 200, body: Array(xml.utf8)), for: source
        ).get()
        #expect(credentials.accessKeyID == "ASIAEXAMPLE")
        #expect(credentials.secretAccessKey == "s&cret")
        #expect(credentials.expiration != nil)
        #expect(!credentials.description.contains("s&cret") && !credentials.description.contains("tok"))
        let refused = CredentialRequests.parse(FetchResponse(httpStatus: 403, failure: .httpStatus(403)), for: source)
        #expect(throws: ConfigProblem.self) { try refused.get() }
    }

    /// Credentials that expired already are no answer: taken, they would be refreshed again
    /// every second, and no upload could use them.
    @Test func credentialsThatExpiredAlreadyAreRefused() throws {
        let source = AWSCredentialSource.container(.init(url: "http://169.254.170.23/v1/credentials"))
        func parse(expiration: String) -> Result<AWSCredentials, ConfigProblem> {
            let json = #"{"AccessKeyId":"ASIAX","SecretAccessKey":"s","Token":"t","Expiration":"\#(expiration)"}"#
            return CredentialRequests.parse(
                FetchResponse(httpStatus: 200, body: Array(json.utf8)), for: source,
                now: CredentialRequests.parseDate("2026-01-01T00:00:00Z")!)
        }
        guard case .failure(let problem) = parse(expiration: "2025-12-31T23:59:00Z") else {
            Issue.record("expired credentials were taken")
            return
        }
        #expect(problem.text == "the container credentials endpoint answered with credentials that expired already")
        #expect((try? parse(expiration: "2026-01-01T00:15:00Z").get()) != nil)
    }

    /// The STS error's `<Code>` goes into a log line: only a short code of letters, digits, '.', '_'
    /// or '-' is copied, never a megabyte or a line break from the answer.
    @Test func onlyAShortPlainErrorCodeIsQuoted() throws {
        let source = AWSCredentialSource.webIdentity(
            .init(roleARN: "r", tokenFile: "/t", sessionName: "n", stsEndpoint: "https://sts"))
        func message(code: String) -> String {
            let body = Array("<ErrorResponse><Error><Code>\(code)</Code></Error></ErrorResponse>".utf8)
            let result = CredentialRequests.parse(
                FetchResponse(httpStatus: 403, body: body, failure: .httpStatus(403)), for: source)
            guard case .failure(let problem) = result else { return "succeeded" }
            return problem.text
        }
        #expect(message(code: "AccessDenied").hasSuffix("answered HTTP 403 (AccessDenied)"))
        for hostile in [
            String(repeating: "A", count: 1 << 20), "Denied\nlevel=info msg=forged", "Denied \u{1B}[31m", "",
        ] {
            let line = message(code: hostile)
            #expect(line.hasSuffix("answered HTTP 403"), "\(line.prefix(200))")
            #expect(line.utf8.count < 200)
        }
    }
}
