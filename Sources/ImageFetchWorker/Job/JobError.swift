/// Why a job failed, in the vocabulary of the result contract.
///
/// The ``code`` is stable and documented (docs/message-contract.md, "Error codes"); the ``message`` is for
/// people and never contains a URL, a password or a credential. ``retryable`` says whether the job
/// goes through the retry queues or produces its final failure result at once.
public struct JobError: Error, Sendable, Hashable, CustomStringConvertible {
    /// A stable, machine-readable error code: a closed set. Callers compare codes; only this type
    /// mints them, so every code that can appear is one of the static members below, documented.
    package struct Code: Sendable, Hashable, CustomStringConvertible {
        package let rawValue: String
        private init(rawValue: String) { self.rawValue = rawValue }
        package var description: String { rawValue }

        /// The body is not JSON, `id`/`url` is missing, or its `headers` are not allowed. The job
        /// is dead-lettered.
        package static let invalidJob = Code(rawValue: "invalid_job")
        /// Not an absolute URL, too long, has user info, has no host, or an internationalised host
        /// name that is invalid or confusable.
        package static let invalidURL = Code(rawValue: "invalid_url")
        /// Anything but http and https, also on a redirect.
        package static let unsupportedScheme = Code(rawValue: "unsupported_scheme")
        /// The connection would go to a non-public address that is not allowed.
        package static let forbiddenAddress = Code(rawValue: "forbidden_address")
        /// The host, or a redirect target's host, is not allowed by `fetch.allowed_hosts` or
        /// `fetch.denied_hosts`.
        package static let hostNotAllowed = Code(rawValue: "host_not_allowed")
        /// The host name did not resolve.
        package static let dnsFailure = Code(rawValue: "dns_failure")
        /// The connection was refused or reset.
        package static let connectFailed = Code(rawValue: "connect_failed")
        /// Connect, total or low-speed timeout.
        package static let timeout = Code(rawValue: "timeout")
        /// The TLS handshake or the certificate check failed.
        package static let tlsFailure = Code(rawValue: "tls_failure")
        /// Redirects ran past `fetch.max_redirects`.
        package static let tooManyRedirects = Code(rawValue: "too_many_redirects")
        /// The final status was outside 2xx.
        package static let httpError = Code(rawValue: "http_error")
        /// The body, or its Content-Length, is over `fetch.max_bytes`.
        package static let tooLarge = Code(rawValue: "too_large")
        /// The body is shorter than its Content-Length, or the connection closed mid-body.
        package static let truncated = Code(rawValue: "truncated")
        /// The bytes are not a supported image format.
        package static let notAnImage = Code(rawValue: "not_an_image")
        /// The body starts as a supported image but its structure is broken: a bad PNG chunk CRC,
        /// a marker or chunk where none may be, a chunk that overruns its container.
        package static let corruptImage = Code(rawValue: "corrupt_image")
        /// Width × height is over `fetch.max_pixels`.
        package static let tooManyPixels = Code(rawValue: "too_many_pixels")
        /// The sink could not store the body.
        package static let storageFailed = Code(rawValue: "storage_failed")
        /// The job's origin stayed paused or busy past `scheduler.defer_budget` of deferral.
        /// Dead-lettered with its result, so that it can be redriven.
        package static let originBusy = Code(rawValue: "origin_busy")
        /// A job redelivered more than `queue.delivery_limit` times; only in dead-letter headers.
        package static let deliveryLimit = Code(rawValue: "delivery_limit")
        /// The job's body is over `queue.max_job_bytes`: rejected unread to the jobs queue's
        /// dead-letter exchange, no result (the job's id is in the body that was not read).
        package static let jobTooLarge = Code(rawValue: "job_too_large")
        /// The job's properties leave no room in a frame (`frame_max`) for the worker's headers on
        /// its retry, deferral or dead-letter copy. The original is rejected to the jobs queue's
        /// dead-letter exchange as it came, and this result says why.
        package static let propertiesTooLarge = Code(rawValue: "properties_too_large")
        /// The origin opted out of this use of the image: its `X-Robots-Tag` carries one of
        /// `fetch.opt_out.directives`, it sends `tdm-reservation: 1`, or (`fetch.robots = respect`)
        /// its robots.txt disallows the URL or is unreachable. Not retried; nothing is stored.
        package static let optedOut = Code(rawValue: "opted_out")

        /// Whether a failure with this code is worth retrying, when nothing more is known.
        /// `http_error` depends on the status; see ``JobError/httpStatus(_:)``.
        package var isRetryableByDefault: Bool {
            switch self {
            case .dnsFailure, .connectFailed, .timeout, .truncated, .storageFailed: return true
            default: return false
            }
        }
    }

    /// The stable code.
    package var code: Code
    /// A human-readable explanation that names no URL and no credential.
    package var message: String
    /// Whether the job should be retried.
    package var retryable: Bool

    /// Creates an error; `retryable` defaults to what the code implies.
    package init(_ code: Code, _ message: String, retryable: Bool? = nil) {
        self.code = code
        self.message = message
        self.retryable = retryable ?? code.isRetryableByDefault
    }

    /// The error for a final HTTP status outside 2xx: retryable for 408, 429 and 5xx.
    package static func httpStatus(_ status: Int) -> JobError {
        let retryable = status == 408 || status == 429 || (500...599).contains(status)
        return JobError(.httpError, "the origin answered HTTP \(status)", retryable: retryable)
    }

    public var description: String { "\(code.rawValue): \(message)" }
}
