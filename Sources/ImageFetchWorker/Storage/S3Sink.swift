import Crypto
import Dispatch

/// Stores bodies as objects in an S3-compatible store (AWS S3, MinIO, Ceph, moto) with one
/// SigV4-signed `PUT` each, for `storage.kind=s3`. A content-addressed key is checked with a
/// `HEAD` first: an object already there with these bytes (its ETag is their MD5) is not uploaded
/// again, and the result says `stored: false`.
///
/// - The object key is `<s3.prefix><key>`, where the key is the job's sanitised `key` when usable,
///   else the content-addressed `<sha256[0..2]>/<sha256>.<ext>` (``StorageRequest/resolvedKey``).
/// - The upload carries `Content-Type` (the sniffed format's MIME type), `x-amz-content-sha256`
///   (the body's digest, which the worker already has), and the metadata `x-amz-meta-job-id` and
///   `x-amz-meta-source-url` (without its query and fragment), made header-safe by
///   ``S3Addressing/headerSafe(_:limit:)``.
/// - libcurl signs the request (`CURLOPT_AWS_SIGV4` = `aws:amz:<region>:s3`) with the access key
///   and secret; temporary credentials add `x-amz-security-token`. The keys are the configured
///   ones, or temporary ones from a web identity (STS) or the container credentials endpoint,
///   refreshed before they expire (``CredentialProvider``); while expired ones cannot be
///   refreshed, uploads fail with a retryable `storage_failed`.
/// - Uploads run on a ``FetchEngine`` of the sink's own: the same non-blocking libcurl multi loop
///   as fetches, without the connect-time address veto (the endpoint is configured, not taken from
///   a job, and is often on a private network), and without sharing connections with the guarded
///   fetch engine. No GCD thread blocks on an upload.
///
/// Failures are a ``StorageError`` (`storage_failed` in the result): retryable for a 5xx, 408 or 429 answer, a timeout,
/// or a store that cannot be reached; not retryable for a 403 (its message names the bucket, never
/// the credentials) or any other 4xx. The location of a stored object is `s3://<bucket>/<key>`.
package final class S3Sink: ImageSink {
    /// The settings the sink was created with (``WorkerConfiguration/S3/description`` hides secrets).
    package let settings: WorkerConfiguration.S3
    private let engine: FetchEngine
    private let signing: String
    /// The credentials uploads are signed with, kept current (``CredentialProvider``).
    package let credentials: CredentialProvider
    private let completions = DispatchQueue(label: "image-fetch-worker.s3-sink.completions", attributes: .concurrent)

    /// Creates the sink and its upload engine, and gets the first credentials.
    ///
    /// - Parameters:
    ///   - settings: `s3.*`; the bucket must be set, and either the access key and secret or a
    ///     temporary source (``WorkerConfiguration/S3/temporaryCredentials``); the loader checks this.
    ///   - fetch: the transfer limits to apply to uploads (`fetch.timeout`, `fetch.connect_timeout`,
    ///     the low-speed limit and the user agent).
    ///   - maxConnections: keep-alive connections to the store; give at least `worker.concurrency`.
    /// - Throws: ``ConfigurationError`` (exit 78) when a setting is missing (the loader checks them
    ///   first) or temporary credentials cannot be had; ``StartupError`` when libcurl cannot be
    ///   initialised.
    package init(settings: WorkerConfiguration.S3, fetch: WorkerConfiguration.Fetch, maxConnections: Int = 64) throws {
        guard !settings.bucket.isEmpty else { throw ConfigurationError(key: "s3.bucket", problem: "is not set") }
        let source: AWSCredentialSource
        if let keyID = settings.accessKeyID, let secret = settings.secretAccessKey {
            source = .fixed(
                AWSCredentials(accessKeyID: keyID, secretAccessKey: secret, sessionToken: settings.sessionToken))
        } else if let temporary = settings.temporaryCredentials {
            source = temporary
        } else {
            throw ConfigurationError(
                key: "s3.access_key_id",
                problem: "the S3 credentials are not set (s3.access_key_id, s3.secret_access_key)")
        }
        guard S3Addressing.validateEndpoint(settings.resolvedEndpoint) != nil else {
            throw ConfigurationError(key: "s3.endpoint", problem: "is not a valid http or https URL")
        }
        self.settings = settings
        self.signing = "aws:amz:\(settings.region):s3"
        self.credentials = try CredentialProvider(source: source, userAgent: fetch.userAgent)
        // fetch.tls.ca_file is the origins' CA, not the storage's: uploads keep the system bundle.
        var fetch = fetch
        fetch.tls.caFile = nil
        do {
            self.engine = try FetchEngine(
                configuration: fetch, addressPolicy: nil, maxConnections: max(maxConnections, 4))
        } catch {
            throw StartupError("the S3 upload engine could not start: \(error.message)")
        }
    }

    deinit {
        engine.shutdown()
    }

    /// Uploads the body with a signed PUT, then calls `completion` on a queue of the sink's own.
    package func store(
        _ request: StorageRequest,
        completion: @escaping @Sendable (Result<StoredObject, StorageError>) -> Void
    ) {
        guard StorageKey.isDigest(request.sha256) else {
            completion(.failure(StorageError("the sha256 is not lowercase hex")))
            return
        }
        let signer: AWSCredentials
        switch credentials.current() {
        case .success(let current): signer = current
        case .failure(let error):
            completions.async { completion(.failure(error)) }
            return
        }
        let (resolvedKey, contentAddressed) = request.resolved
        let key = settings.prefix + resolvedKey
        let url = S3Addressing.objectURL(
            endpoint: settings.resolvedEndpoint, bucket: settings.bucket, key: key, pathStyle: settings.pathStyle)
        let location = "s3://\(settings.bucket)/\(key)"
        guard contentAddressed else { return upload(request, url: url, location: location, signer: signer, completion) }
        // A content address names its bytes: when the object is there with them (its ETag, the
        // MD5 of a single-part PUT, matches), it is not uploaded again. Any other answer (none,
        // 404, another ETag) leads to the PUT, which reports what goes wrong.
        var head = FetchRequest(url: url)
        head.method = .head
        S3Addressing.prepare(&head, signing: signing, credentials: signer)
        head.headers = ["x-amz-content-sha256: \(S3Addressing.emptySHA256)"]
        if let token = signer.sessionToken {
            head.headers.append("x-amz-security-token: \(S3Addressing.headerSafe(token, limit: 8192))")
        }
        let expected = "\"" + Insecure.MD5.hash(data: request.body).hexString + "\""
        engine.fetch(head) { [self, completions] response in
            // Off the engine's loop, like every completion.
            completions.async { [self] in
                guard response.failure == nil, response.httpStatus == 200, response.etag == expected else {
                    return upload(request, url: url, location: location, signer: signer, completion)
                }
                completion(.success(StoredObject(location: location, wrote: false)))
            }
        }
    }

    private func upload(
        _ request: StorageRequest, url: String, location: String, signer: AWSCredentials,
        _ completion: @escaping @Sendable (Result<StoredObject, StorageError>) -> Void
    ) {
        var upload = FetchRequest(url: url)
        upload.method = .put
        upload.uploadBody = request.body
        S3Addressing.prepare(&upload, signing: signing, credentials: signer)
        upload.headers = S3Addressing.uploadHeaders(
            contentType: request.info.format.mimeType, sha256: request.sha256, jobID: request.jobID,
            sourceURL: request.sourceURL, sessionToken: signer.sessionToken)
        let bucket = settings.bucket
        engine.fetch(upload) { [completions] response in
            let result: Result<StoredObject, StorageError>
            if let failure = response.failure {
                result = .failure(S3Addressing.storageError(for: failure, status: response.httpStatus, bucket: bucket))
            } else {
                result = .success(StoredObject(location: location))
            }
            // The engine's loop must not run the worker's result handling; hop off it.
            completions.async { completion(result) }
        }
    }
}

/// URLs, headers and errors of the S3 REST API, kept apart from the sink so they can be tested
/// without a store.
enum S3Addressing {
    /// What every request to the endpoint gets: libcurl's SigV4 signing with the keys, no address
    /// veto (the endpoint is the operator's, often on a private network), and so no redirect
    /// followed: it would take `x-amz-security-token` to the host it names, unchecked.
    static func prepare(_ request: inout FetchRequest, signing: String, credentials: AWSCredentials) {
        request.awsSigV4 = signing
        request.userPassword = credentials.accessKeyID + ":" + credentials.secretAccessKey
        request.checkAddresses = false
        request.maxRedirects = 0
    }

    /// The SHA-256 of no bytes: the payload digest of a `HEAD`.
    static let emptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

    /// The normalised endpoint (`scheme://host[:port]`, scheme lower-cased, no trailing `/`), or
    /// nil if `text` is not an `http`/`https` URL with a host and nothing after it but `/`.
    static func validateEndpoint(_ text: String) -> String? {
        guard let schemeEnd = text.range(of: "://") else { return nil }
        let scheme = text[..<schemeEnd.lowerBound].lowercased()
        guard scheme == "http" || scheme == "https" else { return nil }
        var authority = Substring(text[schemeEnd.upperBound...])
        while authority.hasSuffix("/") { authority = authority.dropLast() }
        guard !authority.isEmpty, !authority.contains(where: { "/?#@\\ ".contains($0) }),
            !authority.unicodeScalars.contains(where: { $0.properties.generalCategory == .control })
        else { return nil }
        var host = authority
        var port: Substring?
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { return nil }
            host = authority[authority.index(after: authority.startIndex)..<close]
            let rest = authority[authority.index(after: close)...]
            if !rest.isEmpty {
                guard rest.hasPrefix(":") else { return nil }
                port = rest.dropFirst()
            }
            guard NetworkSyntax.isIPv6Address(String(host)) else { return nil }
        } else {
            if let colon = authority.lastIndex(of: ":") {
                host = authority[..<colon]
                port = authority[authority.index(after: colon)...]
            }
            guard NetworkSyntax.isHostName(String(host)) else { return nil }
        }
        if let port {
            // Digits only: Swift's Int takes a sign, libcurl does not.
            guard port.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }), let number = Int(port),
                (1...65535).contains(number)
            else { return nil }
        }
        return scheme + "://" + authority
    }

    /// S3's bucket naming rules: DNS-compatible (3–63 of `a-z 0-9 . -`, alphanumeric at both ends)
    /// for virtual-hosted addressing; with path-style addressing, 1–255 of `A-Z a-z 0-9 . - _`.
    static func isValidBucket(_ name: String, pathStyle: Bool) -> Bool {
        let bytes = Array(name.utf8)
        if pathStyle {
            return (1...255).contains(bytes.count)
                && bytes.allSatisfy {
                    $0.isLowerAlnum || (0x41...0x5A).contains($0) || $0 == 0x2E || $0 == 0x2D || $0 == 0x5F
                }
                && name != "." && name != ".."
        }
        guard (3...63).contains(bytes.count), bytes.first!.isLowerAlnum, bytes.last!.isLowerAlnum else { return false }
        return bytes.allSatisfy { $0.isLowerAlnum || $0 == 0x2E || $0 == 0x2D } && !name.contains("..")
    }

    /// `endpoint/bucket/key` (path style) or `scheme://bucket.host/key`, with the key URI-encoded
    /// as SigV4 wants it: every byte but `A-Z a-z 0-9 - . _ ~` and `/` as `%XX`.
    static func objectURL(endpoint: String, bucket: String, key: String, pathStyle: Bool) -> String {
        let path = "/" + uriEncode(key, keepSlash: true)
        if pathStyle {
            return endpoint + "/" + uriEncode(bucket, keepSlash: false) + path
        }
        guard let schemeEnd = endpoint.range(of: "://") else { return endpoint + path }
        return endpoint[..<schemeEnd.upperBound] + bucket + "." + endpoint[schemeEnd.upperBound...] + path
    }

    /// Percent-encodes all but the unreserved characters (and `/` with `keepSlash`).
    static func uriEncode(_ text: String, keepSlash: Bool) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for byte in text.utf8 {
            if byte.isLowerAlnum || (0x41...0x5A).contains(byte) || byte == 0x2D || byte == 0x2E || byte == 0x5F
                || byte == 0x7E || (keepSlash && byte == 0x2F)
            {
                out.unicodeScalars.append(Unicode.Scalar(byte))
            } else {
                out += "%" + hexByte(byte)
            }
        }
        return out
    }

    /// A value that is safe as an HTTP header value and as S3 user metadata (US-ASCII): bytes
    /// outside printable ASCII (controls, CR, LF, DEL, space and non-ASCII UTF-8) become `%XX`,
    /// so a value can never end the header or start another. Cut to at most `limit` bytes, never
    /// inside an escape, because S3 caps user metadata at 2 KB.
    static func headerSafe(_ text: String, limit: Int) -> String {
        var out = ""
        for byte in text.utf8 {
            let piece = (0x21...0x7E).contains(byte) ? String(Unicode.Scalar(byte)) : "%" + hexByte(byte)
            if out.utf8.count + piece.utf8.count > limit { break }
            out += piece
        }
        return out
    }

    /// The headers of an upload.
    static func uploadHeaders(
        contentType: String, sha256: String, jobID: String, sourceURL: String, sessionToken: String?
    ) -> [String] {
        var headers = [
            "Content-Type: \(headerSafe(contentType, limit: 128))",
            "x-amz-content-sha256: \(sha256)",
            "x-amz-meta-job-id: \(headerSafe(jobID, limit: 256))",
            // Redacted: metadata can be public, and presigned links keep their signatures in the query.
            "x-amz-meta-source-url: \(headerSafe(URLPolicy.redacted(sourceURL).url, limit: 1024))",
        ]
        if let sessionToken { headers.append("x-amz-security-token: \(headerSafe(sessionToken, limit: 8192))") }
        return headers
    }

    /// The ``StorageError`` for a failed upload, from the engine's own failure (the sink
    /// reads the engine's terms, not the job pipeline's). Names the bucket, never the key, the URL
    /// or the credentials.
    static func storageError(for failure: FetchError, status: Int?, bucket: String) -> StorageError {
        // An interim code (a reset after `100 Continue`) is no answer of the store's.
        if let status, status >= 200 {
            switch status {
            case 403:
                return StorageError(
                    "the store refused access to bucket \(bucket) (HTTP 403): check the credentials and the bucket policy",
                    retryable: false)
            case 404:
                return StorageError(
                    "the store answered HTTP 404 for bucket \(bucket): does the bucket exist?",
                    retryable: false)
            default:
                return StorageError(
                    "the store answered HTTP \(status) for bucket \(bucket)", retryable: isRetryable(status: status))
            }
        }
        switch failure {
        case .timeout:
            return StorageError("the upload to bucket \(bucket) timed out", retryable: true)
        case .dnsFailure, .connectFailed, .setupFailed, .transferFailed, .initFailed, .truncated, .aborted:
            return StorageError(
                "the store for bucket \(bucket) could not be reached: \(failure.message)",
                retryable: true)
        case .tls:
            return StorageError("the TLS handshake with the store for bucket \(bucket) failed", retryable: false)
        case .httpStatus(let status):
            // Only without a status of the response's own, which the switch above takes first.
            return StorageError(
                "the upload to bucket \(bucket) failed: \(failure.message)", retryable: isRetryable(status: status))
        case .malformedURL, .unsupportedScheme, .redirectRefused, .invalidHost, .hostNotAllowed, .addressRefused,
            .tooManyRedirects, .tooLarge, .rejected, .optedOut:
            return StorageError("the upload to bucket \(bucket) failed: \(failure.message)", retryable: false)
        }
    }

    /// A store's answer worth another try: timeout, throttling, or its own failure.
    private static func isRetryable(status: Int) -> Bool {
        status == 408 || status == 429 || (500...599).contains(status)
    }

    private static func hexByte(_ byte: UInt8) -> String {
        let digits = Array("0123456789ABCDEF".unicodeScalars)
        return String(digits[Int(byte >> 4)]) + String(digits[Int(byte & 0x0F)])
    }
}

fileprivate extension UInt8 {
    /// `a-z` or `0-9`.
    var isLowerAlnum: Bool { (0x61...0x7A).contains(self) || (0x30...0x39).contains(self) }
}
