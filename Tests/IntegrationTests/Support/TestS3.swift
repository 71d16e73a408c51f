import Foundation
import ImageFetchWorker

/// moto's S3-compatible server (`moto_server`) on 127.0.0.1, started by a test, with helpers to
/// create a bucket, make moto check signatures, and read objects back with signed GETs.
///
/// `moto_server` is looked up on PATH, then in `.run/moto-venv/bin` (where scripts/deps.sh installs
/// it when PATH has none), or taken from `IFW_MOTO_SERVER`.
final class TestS3: @unchecked Sendable {
    // @unchecked Sendable: `process` is started and stopped from the test's task only.
    let port: Int
    private(set) var process: Process?
    let logURL: URL
    let region = "us-east-1"
    /// Its own engine, for the test's signed requests.
    let engine: FetchEngine

    /// The `moto_server` to run, if one is installed.
    static var executable: String? {
        let environment = ProcessInfo.processInfo.environment
        if let path = environment["IFW_MOTO_SERVER"], FileManager.default.isExecutableFile(atPath: path) { return path }
        for folder in (environment["PATH"] ?? "").split(separator: ":") {
            let path = "\(folder)/moto_server"
            if FileManager.default.isExecutableFile(atPath: path) { return path }
        }
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent()
        let venv = root.appendingPathComponent(".run/moto-venv/bin/moto_server").path
        return FileManager.default.isExecutableFile(atPath: venv) ? venv : nil
    }

    static var isAvailable: Bool { executable != nil }

    /// Starts moto on a free port (or on `port`, to bring a stopped store back).
    static func start(port: Int? = nil) async throws -> TestS3 {
        let server = try TestS3(port: port ?? TestBroker.freePort())
        try await server.launch()
        return server
    }

    private init(port: Int) throws {
        self.port = port
        logURL = FileManager.default.temporaryDirectory.appendingPathComponent("ifw-moto-\(UUID().uuidString).log")
        var fetch = WorkerConfiguration.Fetch()
        fetch.timeout = 20
        engine = try FetchEngine(configuration: fetch, addressPolicy: nil)
    }

    var endpoint: String { "http://127.0.0.1:\(port)" }

    /// Starts (or restarts) the server process and waits until it answers.
    func launch() async throws {
        guard let executable = Self.executable else { throw TestS3Error("moto_server is not installed") }
        _ = FileManager.default.createFile(atPath: logURL.path, contents: nil)
        let handle = try FileHandle(forWritingTo: logURL)
        handle.seekToEndOfFile()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = ["-H", "127.0.0.1", "-p", "\(port)"]
        process.standardOutput = handle
        process.standardError = handle
        try process.run()
        self.process = process
        let deadline = Date().addingTimeInterval(60)
        while Date() < deadline {
            var probe = FetchRequest(url: "\(endpoint)/moto-api/data.json")
            probe.checkAddresses = false
            if await send(probe).httpStatus == 200 { return }
            guard process.isRunning else { break }
            try await Task.sleep(for: .milliseconds(200))
        }
        throw TestS3Error("moto_server did not answer on port \(port); log:\n\(log(tail: 2000))")
    }

    /// Kills the server (SIGKILL, by its pid) and waits for it to exit.
    func stop() async {
        guard let process, process.isRunning else { return }
        kill(process.processIdentifier, SIGKILL)
        while process.isRunning { try? await Task.sleep(for: .milliseconds(20)) }
    }

    func log(tail: Int) -> String {
        String(((try? String(contentsOf: logURL, encoding: .utf8)) ?? "").suffix(tail))
    }

    deinit {
        if let process, process.isRunning { kill(process.processIdentifier, SIGKILL) }
    }

    // MARK: Requests

    func send(_ request: FetchRequest) async -> FetchResponse {
        await withCheckedContinuation { continuation in
            engine.fetch(request) { continuation.resume(returning: $0) }
        }
    }

    /// A request signed for `service` with `credentials` ("key:secret").
    func signed(_ url: String, service: String = "s3", credentials: String) -> FetchRequest {
        var request = FetchRequest(url: url)
        request.checkAddresses = false
        request.awsSigV4 = "aws:amz:\(region):\(service)"
        request.userPassword = credentials
        return request
    }

    /// Creates a bucket with a signed PUT.
    func createBucket(_ name: String, credentials: String = "AKIAIOSFODNN7EXAMPLE:any") async throws {
        var request = signed("\(endpoint)/\(name)", credentials: credentials)
        request.method = .put
        request.uploadBody = []
        request.headers = ["x-amz-content-sha256: \(Self.emptySHA256)"]
        let response = await send(request)
        guard response.error == nil else {
            throw TestS3Error("create bucket \(name): \(response.error!) (HTTP \(response.httpStatus ?? 0))")
        }
    }

    /// Makes moto check SigV4 signatures from now on, and returns the only credentials it then
    /// accepts: an IAM user's access key ("key:secret") with a policy that allows everything.
    func enforceSignatures() async throws -> (keyID: String, secret: String) {
        let anyone = "AKIAIOSFODNN7EXAMPLE:any"
        func iam(_ query: String) async throws -> String {
            let response = await send(
                signed("\(endpoint)/?\(query)&Version=2010-05-08", service: "iam", credentials: anyone))
            guard response.error == nil else { throw TestS3Error("IAM \(query.prefix(40)): \(response.error!)") }
            return String(decoding: response.body, as: UTF8.self)
        }
        let policy = #"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"*","Resource":"*"}]}"#
            .addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
        _ = try await iam("Action=CreateUser&UserName=ifw-worker")
        _ = try await iam("Action=PutUserPolicy&UserName=ifw-worker&PolicyName=all&PolicyDocument=\(policy)")
        let xml = try await iam("Action=CreateAccessKey&UserName=ifw-worker")
        guard let keyID = Self.element("AccessKeyId", in: xml), let secret = Self.element("SecretAccessKey", in: xml)
        else {
            throw TestS3Error("CreateAccessKey answered without a key")
        }
        // POST /moto-api/reset-auth with "0": every later request must be signed by a known key.
        // FetchRequest has no POST, so a one-line Python (moto needs Python anyway) sends it.
        let script = """
            import urllib.request, sys
            urllib.request.urlopen(urllib.request.Request(sys.argv[1], data=b"0", method="POST",
                                                          headers={"Content-Type": "text/plain"}))
            """
        guard try TestBroker.run("/usr/bin/env", ["python3", "-c", script, "\(endpoint)/moto-api/reset-auth"]) == 0
        else {
            throw TestS3Error("moto-api/reset-auth failed")
        }
        return (keyID, secret)
    }

    /// Reads an object with a signed GET; nil and the status when it fails.
    func getObject(
        bucket: String, key: String, credentials: String
    ) async -> (body: [UInt8]?, status: Int?, contentType: String?) {
        // SigV4's URI encoding: everything but the unreserved characters and '/'.
        let unreserved = CharacterSet(
            charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~/")
        let path = key.addingPercentEncoding(withAllowedCharacters: unreserved)!
        var request = signed("\(endpoint)/\(bucket)/\(path)", credentials: credentials)
        request.headers = ["x-amz-content-sha256: \(Self.emptySHA256)"]
        let response = await send(request)
        return (response.error == nil ? response.body : nil, response.httpStatus, response.contentType)
    }

    static let emptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

    static func element(_ name: String, in xml: String) -> String? {
        guard let open = xml.range(of: "<\(name)>"),
            let close = xml.range(of: "</\(name)>", range: open.upperBound..<xml.endIndex)
        else { return nil }
        return String(xml[open.upperBound..<close.lowerBound])
    }
}

struct TestS3Error: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
