/// What an ``FetchRequest/inspector`` decides after looking at the body received so far.
package enum BodyVerdict: Sendable {
    /// Keep receiving and call the inspector again once the body has doubled.
    case needMore
    /// The body is acceptable; stop inspecting and receive the rest.
    case accept
    /// Abort the transfer; the response fails with ``FetchError/rejected(_:)`` and this reason.
    case reject(BodyRejection)
}

/// Why an ``FetchRequest/inspector`` stopped a body. Typed, so that whoever maps the failure to a
/// result code maps each reason to its own, instead of assuming which inspector ran.
package enum BodyRejection: Sendable, Equatable {
    /// The image's header proves it needs `width` × `height` pixels, over the caller's limit.
    case tooManyPixels(width: Int, height: Int)
}

/// One HTTP transfer for ``FetchEngine``.
///
/// The engine applies the limits of `WorkerConfiguration.Fetch` (timeouts, body size, redirects,
/// user agent) to every request; a request only says what to fetch and how.
package struct FetchRequest: Sendable {
    /// The HTTP method.
    package enum Method: String, Sendable {
        case get = "GET"
        case put = "PUT"
        case post = "POST"
        case head = "HEAD"
    }

    /// The absolute `http` or `https` URL. Never logged, never put into error messages.
    package var url: String
    /// The method; redirects are followed for GET and HEAD only.
    package var method: Method = .get
    /// Extra request headers, each `"Name: value"`.
    package var headers: [String] = []
    /// The request body for PUT and POST. It is copied into libcurl, which also lets
    /// ``awsSigV4`` sign the payload.
    package var uploadBody: [UInt8]? = nil
    /// `CURLOPT_AWS_SIGV4`, for example `"aws:amz:REGION:s3"`.
    package var awsSigV4: String? = nil
    /// `CURLOPT_USERPWD`, for SigV4 `"key:secret"`. Never logged.
    package var userPassword: String? = nil
    /// Called on the fetch queue with the whole body received so far, after the first chunk and
    /// then each time the body has doubled since it last answered ``BodyVerdict/needMore`` (so
    /// its work stays linear in the body), until it returns something else.
    /// ``BodyVerdict/reject(_:)`` aborts the transfer with that reason. Used for the early
    /// `too_many_pixels` check.
    ///
    /// It runs on the engine's only thread, so it must be quick and must not block.
    package var inspector: (@Sendable (UnsafeRawBufferPointer) -> BodyVerdict)? = nil
    /// Apply the connect-time address veto, and the host lists and redirect host checks of
    /// ``HostGuard`` (false for a configured S3 endpoint).
    ///
    /// A transfer that skips the veto never shares its connections with transfers that apply it,
    /// so such transfers do not reuse connections. Give an S3 sink its own ``FetchEngine`` with no
    /// address policy if it needs keep-alive.
    package var checkAddresses: Bool = true
    /// Checked once the final response's headers are in, before any byte of its body is kept:
    /// a signal stops the transfer with ``FetchError/optedOut(_:)``, so an opted-out image costs
    /// no body bandwidth. nil: not checked.
    package var optOut: OptOutPolicy? = nil
    /// Keep at most this many body bytes and end the transfer there, as a success with the body
    /// cut (robots.txt: RFC 9309 §2.5); the declared length is then not enforced.
    /// nil: a body over `fetch.max_bytes` fails with ``FetchError/tooLarge(limit:declared:)``.
    package var truncateBodyAt: Int? = nil
    /// Redirects followed for this request instead of `fetch.max_redirects`.
    package var maxRedirects: Int? = nil

    /// A GET of `url`.
    package init(url: String) {
        self.url = url
    }
}
