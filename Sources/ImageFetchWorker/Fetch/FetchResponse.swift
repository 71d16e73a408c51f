import CCurl
import CShims

/// Phase timings of one transfer, in milliseconds, as libcurl reports them.
///
/// Each value is measured from the start of the transfer to the end of its phase (libcurl's
/// `*_TIME_T` values), so they grow in order: ``dnsMs`` ≤ ``connectMs`` ≤ ``tlsMs`` (0 without
/// TLS) ≤ ``ttfbMs`` ≤ ``totalMs``. A reused connection reports 0 for DNS and connect.
public struct FetchTimings: Sendable, Equatable {
    /// Name resolution done.
    public var dnsMs: Double
    /// TCP connection established.
    public var connectMs: Double
    /// TLS handshake done (0 for plain HTTP).
    public var tlsMs: Double
    /// First byte of the response received.
    public var ttfbMs: Double
    /// Whole transfer, redirects included.
    public var totalMs: Double

    /// Creates timings from milliseconds.
    public init(dnsMs: Double, connectMs: Double, tlsMs: Double, ttfbMs: Double, totalMs: Double) {
        self.dnsMs = dnsMs
        self.connectMs = connectMs
        self.tlsMs = tlsMs
        self.ttfbMs = ttfbMs
        self.totalMs = totalMs
    }
}

/// The outcome of one ``FetchRequest``.
package struct FetchResponse: Sendable {
    /// The final HTTP status, if a response came.
    package var httpStatus: Int?
    /// The declared Content-Type of the final response.
    package var contentType: String?
    /// The final response's `Retry-After` header as sent, for a 429 or 503 (see `RetryAfter`).
    package var retryAfter: String?
    /// The final response's `ETag` and `Last-Modified`, when they keep to ``CacheValidators``' rule.
    package var etag: String?
    package var lastModified: String?
    /// The URL after redirects.
    package var finalURL: String?
    /// How many redirects were followed.
    package var redirects: Int
    /// Phase timings, if the transfer was started.
    package var timings: FetchTimings?
    /// New connections this transfer opened (`CURLINFO_NUM_CONNECTS`, redirects included); 0
    /// when it reused one, or multiplexed onto one, or never got as far as connecting.
    package var connectionsOpened: Int = 0
    /// The HTTP version of the last response.
    package var httpVersion: HTTPVersion = .none
    /// The worker's flow control still held the transfer ahead of its body when it ended (its
    /// work queue was behind): a timeout then says nothing about the origin.
    package var heldByWorker = false
    /// The body had no framing (an HTTP/1 answer with neither a length nor a transfer coding):
    /// the connection's close ended it, so a close that came early looks like a whole body.
    package var endedByClose = false

    /// The HTTP version of a response, as `CURLINFO_HTTP_VERSION` reports it.
    package enum HTTPVersion: String, Sendable {
        case none
        case http10 = "1.0"
        case http11 = "1.1"
        case http2 = "2"
        case http3 = "3"

        init(curl value: Int) {
            switch value {
            case Int(CURL_HTTP_VERSION_1_0): self = .http10
            case Int(CURL_HTTP_VERSION_1_1): self = .http11
            case Int(CURL_HTTP_VERSION_2_0): self = .http2
            case Int(CURL_HTTP_VERSION_3): self = .http3
            default: self = .none
            }
        }
    }
    /// The body; empty when ``failure`` is set.
    package var body: [UInt8]
    /// nil means a 2xx response with a complete body that the inspector did not reject. The
    /// engine's own reason; callers map it to a `JobError` where they report (`error`).
    package var failure: FetchError?

    /// Creates a response.
    package init(
        httpStatus: Int? = nil, contentType: String? = nil, finalURL: String? = nil, redirects: Int = 0,
        timings: FetchTimings? = nil, body: [UInt8] = [], failure: FetchError? = nil
    ) {
        self.httpStatus = httpStatus
        self.contentType = contentType
        self.finalURL = finalURL
        self.redirects = redirects
        self.timings = timings
        self.body = body
        self.failure = failure
    }
}

/// Identifies a transfer started by ``FetchEngine/fetch(_:completion:)``, for
/// ``FetchEngine/cancel(_:)``.
package struct FetchTicket: Sendable, Hashable {
    let id: UInt64
}
