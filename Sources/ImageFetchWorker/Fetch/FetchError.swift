import CCurl
import CShims

#if canImport(Glibc)
import Glibc
#endif

/// Why the fetch engine failed a transfer (or could not start), in the engine's own terms: what
/// happened on the wire or in its checks, not what it means for a job. The job pipeline maps it
/// to a `JobError` code at its edge (`JobError.init(_: FetchError)`), so the engine neither mints
/// result codes nor decides what is retried.
///
/// The payloads carry only what a message needs: never a URL, a host name or a credential.
package enum FetchError: Error, Sendable, Equatable {
    /// Cancelled alone or with every other transfer, or the engine shut down.
    case aborted
    /// libcurl's URL parser refused the request's URL.
    case malformedURL
    /// A scheme other than http or https; `atSetup`: in the request's own URL, else in the URL or
    /// a redirect (libcurl does not say which).
    case unsupportedScheme(atSetup: Bool)
    /// The easy handle could not be set up for the request (libcurl's reason).
    case setupFailed(reason: String)
    /// A redirect target refused before it was followed.
    case redirectRefused(RedirectRefusal)
    /// A host, of the request (`redirect` false) or of a redirect target, that is not a valid
    /// internationalised name; `problem` says why without naming it.
    case invalidHost(problem: String, redirect: Bool)
    /// A host refused by `fetch.allowed_hosts` or `fetch.denied_hosts`.
    case hostNotAllowed(HostPolicy.Refusal, redirect: Bool)
    /// The connect-time address policy refused the address; `addressClass` is its class
    /// ("loopback", "private", …) as the policy named it.
    case addressRefused(addressClass: String)
    /// The host name did not resolve.
    case dnsFailure
    /// No connection, or it broke before a complete response.
    case connectFailed(ConnectFailure)
    /// Connect, total or low-speed timeout.
    case timeout
    /// The TLS handshake or the certificate check failed.
    case tls
    /// More redirects than `limit` (`fetch.max_redirects`).
    case tooManyRedirects(limit: Int)
    /// A final status outside 2xx (or a non-2xx body too long to drain for keep-alive).
    case httpStatus(Int)
    /// The body ran past `limit` bytes (`fetch.max_bytes`); `declared`: its Content-Length said so.
    case tooLarge(limit: Int, declared: Bool)
    /// The body ended after `received` bytes, short of its Content-Length when `declared` is known.
    case truncated(received: Int, declared: Int64?)
    /// The request's inspector rejected the body (``BodyVerdict/reject(_:)``), for this reason.
    case rejected(BodyRejection)
    /// The final response's headers carried an opt-out signal (``FetchRequest/optOut``); the
    /// transfer stopped before its body.
    case optedOut(OptOutSignal)
    /// Any other libcurl failure (libcurl's reason, which names no URL).
    case transferFailed(reason: String)
    /// The engine itself could not start: libcurl's reason. Only ``FetchEngine``'s `init` throws it.
    case initFailed(reason: String)

    /// Why a redirect target is refused.
    package enum RedirectRefusal: Sendable, Equatable {
        /// Longer than ``URLPolicy/maxLength``.
        case tooLong
        /// User info in its authority.
        case userInfo
        /// Not a URL the host checks can read.
        case unparsable
    }

    /// How a connection failed.
    package enum ConnectFailure: Sendable, Equatable {
        /// libcurl ended the transfer without any HTTP response.
        case noResponse
        /// Refused, or failed while connecting.
        case refused
        /// Failed while sending.
        case sendFailed
        /// Failed while receiving.
        case receiveFailed
        /// Closed by the origin without a response.
        case closedEarly
        /// The origin broke the HTTP/2 framing (of the connection or of the stream).
        case http2Framing
        /// The origin's answer is not HTTP (no status line, an unknown version or status).
        case notHTTP
        /// Reset, aborted or timed out by the network during the TLS handshake: unlike a handshake
        /// the peer refused, the next attempt may well complete.
        case cutInHandshake
    }
}

extension FetchError {
    /// What happened, for people: names no URL, host or credential. The job pipeline's results
    /// carry it as their message (`JobError.init(_: FetchError)`); the sinks and clients that use
    /// the engine for themselves put it in their own errors.
    package var message: String {
        switch self {
        case .aborted: "the transfer was aborted"
        case .malformedURL: "the URL is malformed"
        case .unsupportedScheme(let atSetup):
            atSetup
                ? "the URL used a scheme other than http or https"
                : "the URL or a redirect used a scheme other than http or https"
        case .setupFailed(let reason): "the transfer could not be set up: \(reason)"
        case .redirectRefused(.tooLong): "a redirect target is longer than \(URLPolicy.maxLength) bytes"
        case .redirectRefused(.userInfo): "a redirect target contains user info, which is not allowed"
        case .redirectRefused(.unparsable): "a redirect target is not a URL the host checks can read"
        case .invalidHost(let problem, let redirect): redirect ? "a redirect target: \(problem)" : problem
        // Names the list, never the host.
        case .hostNotAllowed(.denied, let redirect):
            "\(redirect ? "a redirect target's host" : "the host") matches fetch.denied_hosts"
        case .hostNotAllowed(.notAllowed, let redirect):
            "\(redirect ? "a redirect target's host" : "the host") is not in fetch.allowed_hosts"
        case .addressRefused(let addressClass): "refused to connect to a \(addressClass) address"
        case .dnsFailure: "the host name did not resolve"
        case .connectFailed(.noResponse): "the origin sent no HTTP response"
        case .connectFailed(.refused): "the connection was refused or failed"
        case .connectFailed(.sendFailed): "the connection failed while sending"
        case .connectFailed(.receiveFailed): "the connection failed while receiving"
        case .connectFailed(.closedEarly): "the origin closed the connection without a response"
        case .connectFailed(.http2Framing): "the origin broke the HTTP/2 framing"
        case .connectFailed(.notHTTP): "the origin's answer is not HTTP"
        case .connectFailed(.cutInHandshake): "the connection was cut during the TLS handshake"
        case .timeout: "the transfer timed out (connect, total or low-speed limit)"
        case .tls: "the TLS handshake or certificate check failed"
        case .tooManyRedirects(let limit): "more than \(limit) redirects"
        case .httpStatus(let status): "the origin answered HTTP \(status)"
        case .tooLarge(let limit, let declared):
            declared
                ? "the declared Content-Length is larger than \(limit) bytes"
                : "the body is larger than \(limit) bytes"
        case .truncated(let received, let declared?): "the body ended after \(received) of \(declared) bytes"
        case .truncated(_, nil): "the connection closed before the body was complete"
        case .rejected(.tooManyPixels(let width, let height)):
            "the inspector rejected the body: the image needs \(width) × \(height) pixels"
        case .optedOut(let signal): signal.explanation
        case .transferFailed(let reason): "the transfer failed: \(reason)"
        case .initFailed(let reason): "libcurl could not be initialised: \(reason)"
        }
    }
}

extension FetchError {
    /// A failed easy-handle set-up (``CurlTransferOptions``, the handle pool).
    init(setup error: CurlError) {
        switch error {
        case .easy(CURLE_URL_MALFORMAT): self = .malformedURL
        case .easy(CURLE_UNSUPPORTED_PROTOCOL): self = .unsupportedScheme(atSetup: true)
        default: self = .setupFailed(reason: error.reason)
        }
    }

    /// libcurl's result for a transfer that did not end with `CURLE_OK`, when neither a callback
    /// (the abort reason) nor the address veto explains it. `status` is the last response's,
    /// `declaredLength` its Content-Length, `received` the bytes kept of its body, `osErrno`
    /// libcurl's last socket error (`CURLINFO_OS_ERRNO`).
    init(
        curlCode result: CURLcode, status: Int, declaredLength: Int64?, received: Int,
        maxRedirects: Int, maxBytes: Int, osErrno: Int32 = 0
    ) {
        switch result {
        case CURLE_COULDNT_RESOLVE_HOST: self = .dnsFailure
        case CURLE_COULDNT_CONNECT: self = .connectFailed(.refused)
        case CURLE_SEND_ERROR: self = .connectFailed(.sendFailed)
        case CURLE_RECV_ERROR: self = .connectFailed(.receiveFailed)
        case CURLE_GOT_NOTHING: self = .connectFailed(.closedEarly)
        case CURLE_HTTP2, CURLE_HTTP2_STREAM: self = .connectFailed(.http2Framing)
        case CURLE_OPERATION_TIMEDOUT: self = .timeout
        // libcurl says SSL_CONNECT_ERROR for a handshake the network cut as for one the peer
        // refused; only the socket's errno tells them apart.
        case CURLE_SSL_CONNECT_ERROR where [ECONNRESET, ECONNABORTED, EPIPE, ETIMEDOUT].contains(osErrno):
            self = .connectFailed(.cutInHandshake)
        case CURLE_SSL_CONNECT_ERROR, CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CERTPROBLEM,
            CURLE_SSL_CIPHER, CURLE_SSL_CACERT_BADFILE, CURLE_SSL_ENGINE_NOTFOUND,
            CURLE_SSL_ENGINE_SETFAILED, CURLE_SSL_ENGINE_INITFAILED, CURLE_SSL_SHUTDOWN_FAILED,
            CURLE_SSL_CRL_BADFILE, CURLE_SSL_ISSUER_ERROR, CURLE_SSL_PINNEDPUBKEYNOTMATCH,
            CURLE_SSL_INVALIDCERTSTATUS, CURLE_SSL_CLIENTCERT, CURLE_USE_SSL_FAILED:
            self = .tls
        case CURLE_TOO_MANY_REDIRECTS: self = .tooManyRedirects(limit: maxRedirects)
        case CURLE_UNSUPPORTED_PROTOCOL: self = .unsupportedScheme(atSetup: false)
        case CURLE_PARTIAL_FILE:
            self = status >= 400 ? .httpStatus(status) : .truncated(received: received, declared: declaredLength)
        case CURLE_URL_MALFORMAT: self = .malformedURL
        default: self = .transferFailed(reason: String(cString: curl_easy_strerror(result)))
        }
    }
}
