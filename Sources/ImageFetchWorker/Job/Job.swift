import Foundation

/// One image-fetch job, decoded from a delivery.
public struct Job: Sendable, Equatable {
    /// The job's identity, echoed in the result: the body's `id`, else the AMQP `message_id`.
    public var id: String
    /// The URL to fetch, as given (validated later, before any network use).
    public var url: String
    /// The storage key hint, unsanitised.
    public var key: String?
    /// AMQP `reply_to`: where the result goes instead of `queue.results`.
    public var replyTo: String?
    /// AMQP `correlation_id`, copied into the result.
    public var correlationID: String?
    /// 1 on the first delivery, counting retries (header `x-attempt`).
    public var attempt: Int
    /// When the job was first seen (header `x-first-seen`, RFC 3339), if it was retried.
    public var firstSeen: String?
    /// The broker's redelivered flag.
    public var redelivered: Bool
    /// The body's `headers`: extra request headers, already checked against `fetch.job_headers`.
    public var headers: [HTTPHeaderField]
    /// The body's `etag`, `last_modified` and `sha256`: what an earlier fetch of the URL gave, for
    /// a conditional refetch (``CacheValidators``). Checked; the digest in lower case.
    public var etag: String?
    public var lastModified: String?
    public var previousSHA256: String?
    /// The tenant the job belongs to (the body's `tenant`, else the `scheduler.tenant_header`
    /// header), checked by ``Tenant/problem(_:)``; nil for the default tenant.
    public var tenant: String?

    public init(
        id: String, url: String, key: String? = nil, replyTo: String? = nil, correlationID: String? = nil,
        attempt: Int = 1, firstSeen: String? = nil, redelivered: Bool = false, headers: [HTTPHeaderField] = [],
        etag: String? = nil, lastModified: String? = nil, previousSHA256: String? = nil, tenant: String? = nil
    ) {
        self.id = id
        self.url = url
        self.key = key
        self.replyTo = replyTo
        self.correlationID = correlationID
        self.attempt = attempt
        self.firstSeen = firstSeen
        self.redelivered = redelivered
        self.headers = headers
        self.etag = etag
        self.lastModified = lastModified
        self.previousSHA256 = previousSHA256
        self.tenant = tenant
    }

    private struct Body: Decodable {
        var id: Identifier?
        var url: String?
        var key: String?
        var headers: [String: String]?
        var etag: String?
        var lastModified: String?
        var sha256: String?
        var tenant: String?

        enum CodingKeys: String, CodingKey {
            case id, url, key, headers, etag, sha256, tenant
            case lastModified = "last_modified"
        }
    }

    /// Accepts a string id, or a number (written as it was).
    private struct Identifier: Decodable {
        var text: String
        init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            if let text = try? container.decode(String.self) {
                self.text = text
            } else if let number = try? container.decode(Int64.self) {
                self.text = String(number)
            } else {
                // The decoder's path (["id"]), so that this is not taken for a body that is no object.
                throw DecodingError.typeMismatch(
                    String.self, .init(codingPath: decoder.codingPath, debugDescription: "id"))
            }
        }
    }

    /// Decodes a delivery, or explains why it is not a job (`invalid_job`).
    ///
    /// - Parameter allowedHeaders: `fetch.job_headers`, lower case: the header names the body's
    ///   `headers` object may use. Any other name, a CR, LF or control character in a value, or a
    ///   value over ``RequestHeaders/maxValueBytes`` makes the job invalid.
    /// - Parameter tenantHeader: `scheduler.tenant_header`: the AMQP header that names the tenant
    ///   when the body has no `tenant`; nil to read the body only.
    public static func decode(
        _ delivery: Delivery, allowedHeaders: Set<String> = [], tenantHeader: String? = nil
    ) -> Result<Job, JobError> {
        let body: JobBodyScanner.Fields
        switch JobBodyScanner.scan(delivery.body).map(Result.success) ?? decodeBody(delivery.body) {
        case .success(let fields): body = fields
        case .failure(let error): return .failure(error)
        }
        let properties = delivery.properties
        guard let id = body.id ?? properties.messageID, !id.isEmpty else {
            return .failure(JobError(.invalidJob, "the job has no id (and no message_id property)"))
        }
        guard let url = body.url, !url.isEmpty else {
            return .failure(JobError(.invalidJob, "the job has no url"))
        }
        var headers: [HTTPHeaderField] = []
        if let fields = body.headers, !fields.isEmpty {
            headers = fields.map { HTTPHeaderField(name: $0.key, value: $0.value) }.sorted { $0.name < $1.name }
            if let refusal = RequestHeaders.checkJobHeaders(headers, allowed: allowedHeaders) {
                return .failure(JobError(refusal))
            }
        }
        // An empty validator is no validator: a producer may copy a field an older result lacked.
        let etag = body.etag.flatMap { $0.isEmpty ? nil : $0 }
        let lastModified = body.lastModified.flatMap { $0.isEmpty ? nil : $0 }
        let previousSHA256 = body.sha256.flatMap { $0.isEmpty ? nil : $0.lowercased() }
        if let etag, let problem = CacheValidators.etagProblem(etag.utf8) {
            return .failure(JobError(.invalidJob, "the job's etag \(problem)"))
        }
        if let lastModified, let problem = CacheValidators.lastModifiedProblem(lastModified.utf8) {
            return .failure(JobError(.invalidJob, "the job's last_modified \(problem)"))
        }
        if let previousSHA256, previousSHA256.utf8.count != 64 || !StorageKey.isDigest(previousSHA256) {
            return .failure(JobError(.invalidJob, "the job's sha256 is not 64 hexadecimal digits"))
        }
        let tenant: String?
        switch Tenant.read(body: body.tenant, header: tenantHeader.flatMap { properties.headers[$0] }) {
        case .success(let name): tenant = name
        case .failure(let error): return .failure(error)
        }
        let attempt = JobHeaders.count(properties.headers[JobHeaders.attempt]) ?? 1
        return .success(
            Job(
                id: id, url: url, key: body.key, replyTo: properties.replyTo.flatMap { $0.isEmpty ? nil : $0 },
                correlationID: properties.correlationID, attempt: max(attempt, 1),
                firstSeen: JobHeaders.firstSeen(properties.headers[JobHeaders.firstSeen]),
                redelivered: delivery.redelivered,
                headers: headers, etag: etag, lastModified: lastModified, previousSHA256: previousSHA256,
                tenant: tenant))
    }

    /// The full decoder, for every body the scanner leaves alone; also the reference it is
    /// tested against.
    static func decodeBody(_ bytes: [UInt8]) -> Result<JobBodyScanner.Fields, JobError> {
        let body: Body
        do {
            body = try JSONDecoder().decode(Body.self, from: Data(bytes))
        } catch DecodingError.dataCorrupted {
            return .failure(JobError(.invalidJob, "the body is not a JSON object"))
        } catch DecodingError.typeMismatch(_, let context) where context.codingPath.isEmpty {
            return .failure(JobError(.invalidJob, "the body is not a JSON object"))
        } catch {
            return .failure(
                JobError(
                    .invalidJob,
                    "the body does not match the job schema (id: string, url: string, key: string, "
                        + "headers: object of strings, etag, last_modified, sha256, tenant: strings)"))
        }
        // JSONDecoder keeps one value of a repeated key without a word, and the producer's parser
        // may have read the other. (The scanner leaves such bodies here.)
        if let name = JSONKeyScan.firstDuplicate(in: bytes, dotted: false) {
            // Named only when it is an HTTP token (the schema's fields and header names are): the
            // key is the producer's bytes, and a message carries no control characters.
            let named = RequestHeaders.isValidName(name) ? "\"\(name)\"" : "a key"
            return .failure(JobError(.invalidJob, "the body gives \(named) twice"))
        }
        return .success(
            JobBodyScanner.Fields(
                id: body.id?.text, url: body.url, key: body.key, headers: body.headers, etag: body.etag,
                lastModified: body.lastModified, sha256: body.sha256, tenant: body.tenant))
    }
}
