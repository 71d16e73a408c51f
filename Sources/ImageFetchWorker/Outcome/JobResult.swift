/// The result message of one job, as specified in docs/message-contract.md.
public struct JobResult: Sendable, Equatable {
    /// `"ok"`, `"not_modified"` (a refetch whose image has not changed: nothing stored) or
    /// `"failed"`.
    public enum Status: String, Sendable {
        case ok
        case notModified = "not_modified"
        case failed
    }

    public var id: String
    public var url: String
    public var status: Status
    public var attempt: Int
    public var redelivered: Bool
    public var httpStatus: Int?
    public var contentType: String?
    public var image: ImageInfo?
    public var bytes: Int?
    public var sha256: String?
    public var location: String?
    /// Whether this job wrote the object at ``location`` (false: the same bytes were already there).
    public var stored: Bool?
    public var finalURL: String?
    public var redirects: Int?
    /// The origin's `ETag` and `Last-Modified` (``CacheValidators``), for the next job's refetch.
    public var etag: String?
    public var lastModified: String?
    public var error: JobError?
    public var durationMs: Double
    public var timings: FetchTimings?
    public var worker: String
    /// Seconds since 1970.
    public var finishedAt: Double

    public init(job: Job, status: Status, durationMs: Double, worker: String, finishedAt: Double) {
        self.id = job.id
        self.url = job.url
        self.status = status
        self.attempt = job.attempt
        self.redelivered = job.redelivered
        self.durationMs = durationMs
        self.worker = worker
        self.finishedAt = finishedAt
    }

    /// What ``encoded()`` writes at most, escapes aside, so that its buffer is allocated once: keys,
    /// numbers and punctuation take under 440 bytes, an image's facts 250 more, an error's keys 80.
    var encodedCapacity: Int {
        var capacity = 440 + id.utf8.count + url.utf8.count + worker.utf8.count
        capacity += (contentType?.utf8.count ?? 0) + (sha256?.utf8.count ?? 0) + (location?.utf8.count ?? 0)
        capacity += (finalURL?.utf8.count ?? 0) + (etag?.utf8.count ?? 0) + (lastModified?.utf8.count ?? 0)
        if image != nil { capacity += 250 }
        if let error { capacity += 80 + error.message.utf8.count }
        return capacity
    }

    /// The compact JSON body.
    public func encoded() -> [UInt8] {
        var json = JSONWriter(capacity: encodedCapacity)
        json.beginObject()
        json.field("id", id)
        json.field("url", url)
        json.field("status", status.rawValue)
        json.field("attempt", attempt)
        json.field("redelivered", redelivered)
        json.field("http_status", httpStatus)
        json.field("content_type", contentType)
        if let image {
            json.field("format", image.format.rawValue)
            json.field("width", image.width)
            json.field("height", image.height)
            // The optional facts of docs/message-contract.md, each only when the headers tell it.
            json.field("frames", image.frames)
            json.field("animated", image.animated)
            json.field("progressive", image.progressive)
            if let orientation = image.orientation {
                json.field("orientation", orientation)
                json.field("display_width", image.displayWidth)
                json.field("display_height", image.displayHeight)
            }
            if let decoded = image.decoded {
                json.field("decoded_width", decoded.width)
                json.field("decoded_height", decoded.height)
                json.field("dhash", decoded.dhashHex)
            }
        }
        json.field("bytes", bytes)
        json.field("sha256", sha256)
        json.field("location", location)
        json.field("stored", stored)
        json.field("final_url", finalURL)
        json.field("redirects", redirects)
        json.field("etag", etag)
        json.field("last_modified", lastModified)
        if let error {
            json.key("error")
            json.beginObject()
            json.field("code", error.code.rawValue)
            json.field("message", error.message)
            json.field("retryable", error.retryable)
            json.endObject()
        }
        json.field("duration_ms", milliseconds: durationMs)
        if let timings {
            json.key("timings")
            json.beginObject()
            json.field("dns_ms", milliseconds: timings.dnsMs)
            json.field("connect_ms", milliseconds: timings.connectMs)
            json.field("tls_ms", milliseconds: timings.tlsMs)
            json.field("ttfb_ms", milliseconds: timings.ttfbMs)
            json.field("total_ms", milliseconds: timings.totalMs)
            json.endObject()
        }
        json.field("worker", worker)
        json.field("finished_at", timestamp: finishedAt)
        json.endObject()
        return json.takeBytes()
    }
}
