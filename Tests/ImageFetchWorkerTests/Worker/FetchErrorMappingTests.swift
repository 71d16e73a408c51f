import CCurl
import Testing

@testable import ImageFetchWorker

#if canImport(Glibc)
import Glibc
#endif

/// One row of the table: a failure and the result it has always produced.
struct FetchErrorMappingRow: Sendable, CustomTestStringConvertible {
    var failure: FetchError
    var code: JobError.Code
    var retryable: Bool
    var message: String
    var testDescription: String { "\(failure)" }
}

let fetchErrorMappingTable: [FetchErrorMappingRow] = [
    FetchErrorMappingRow(failure: .malformedURL, code: .invalidURL, retryable: false, message: "the URL is malformed"),
    FetchErrorMappingRow(
        failure: .unsupportedScheme(atSetup: true), code: .unsupportedScheme, retryable: false,
        message: "the URL used a scheme other than http or https"),
    FetchErrorMappingRow(
        failure: .unsupportedScheme(atSetup: false), code: .unsupportedScheme, retryable: false,
        message: "the URL or a redirect used a scheme other than http or https"),
    FetchErrorMappingRow(
        failure: .setupFailed(reason: "Out of memory"), code: .connectFailed, retryable: true,
        message: "the transfer could not be set up: Out of memory"),
    FetchErrorMappingRow(
        failure: .redirectRefused(.tooLong), code: .invalidURL, retryable: false,
        message: "a redirect target is longer than 8192 bytes"),
    FetchErrorMappingRow(
        failure: .redirectRefused(.userInfo), code: .invalidURL, retryable: false,
        message: "a redirect target contains user info, which is not allowed"),
    FetchErrorMappingRow(
        failure: .invalidHost(problem: "the host name is not valid IDNA", redirect: false), code: .invalidURL,
        retryable: false, message: "the host name is not valid IDNA"),
    FetchErrorMappingRow(
        failure: .invalidHost(problem: "the host name is not valid IDNA", redirect: true), code: .invalidURL,
        retryable: false, message: "a redirect target: the host name is not valid IDNA"),
    FetchErrorMappingRow(
        failure: .hostNotAllowed(.denied, redirect: false), code: .hostNotAllowed, retryable: false,
        message: "the host matches fetch.denied_hosts"),
    FetchErrorMappingRow(
        failure: .hostNotAllowed(.notAllowed, redirect: true), code: .hostNotAllowed, retryable: false,
        message: "a redirect target's host is not in fetch.allowed_hosts"),
    FetchErrorMappingRow(
        failure: .hostNotAllowed(.denied, redirect: true), code: .hostNotAllowed, retryable: false,
        message: "a redirect target's host matches fetch.denied_hosts"),
    FetchErrorMappingRow(
        failure: .hostNotAllowed(.notAllowed, redirect: false), code: .hostNotAllowed, retryable: false,
        message: "the host is not in fetch.allowed_hosts"),
    FetchErrorMappingRow(
        failure: .addressRefused(addressClass: "loopback"), code: .forbiddenAddress, retryable: false,
        message: "refused to connect to a loopback address"),
    FetchErrorMappingRow(
        failure: .dnsFailure, code: .dnsFailure, retryable: true, message: "the host name did not resolve"),
    FetchErrorMappingRow(
        failure: .connectFailed(.noResponse), code: .connectFailed, retryable: true,
        message: "the origin sent no HTTP response"),
    FetchErrorMappingRow(
        failure: .connectFailed(.refused), code: .connectFailed, retryable: true,
        message: "the connection was refused or failed"),
    FetchErrorMappingRow(
        failure: .connectFailed(.sendFailed), code: .connectFailed, retryable: true,
        message: "the connection failed while sending"),
    FetchErrorMappingRow(
        failure: .connectFailed(.receiveFailed), code: .connectFailed, retryable: true,
        message: "the connection failed while receiving"),
    FetchErrorMappingRow(
        failure: .connectFailed(.closedEarly), code: .connectFailed, retryable: true,
        message: "the origin closed the connection without a response"),
    FetchErrorMappingRow(
        failure: .connectFailed(.http2Framing), code: .connectFailed, retryable: true,
        message: "the origin broke the HTTP/2 framing"),
    FetchErrorMappingRow(
        failure: .connectFailed(.notHTTP), code: .connectFailed, retryable: true,
        message: "the origin's answer is not HTTP"),
    FetchErrorMappingRow(
        failure: .connectFailed(.cutInHandshake), code: .connectFailed, retryable: true,
        message: "the connection was cut during the TLS handshake"),
    FetchErrorMappingRow(
        failure: .timeout, code: .timeout, retryable: true,
        message: "the transfer timed out (connect, total or low-speed limit)"),
    FetchErrorMappingRow(
        failure: .tls, code: .tlsFailure, retryable: false,
        message: "the TLS handshake or certificate check failed"),
    FetchErrorMappingRow(
        failure: .tooManyRedirects(limit: 5), code: .tooManyRedirects, retryable: false,
        message: "more than 5 redirects"),
    FetchErrorMappingRow(
        failure: .httpStatus(404), code: .httpError, retryable: false, message: "the origin answered HTTP 404"),
    FetchErrorMappingRow(
        failure: .httpStatus(429), code: .httpError, retryable: true, message: "the origin answered HTTP 429"),
    FetchErrorMappingRow(
        failure: .httpStatus(503), code: .httpError, retryable: true, message: "the origin answered HTTP 503"),
    FetchErrorMappingRow(
        failure: .tooLarge(limit: 1000, declared: false), code: .tooLarge, retryable: false,
        message: "the body is larger than 1000 bytes"),
    FetchErrorMappingRow(
        failure: .tooLarge(limit: 1000, declared: true), code: .tooLarge, retryable: false,
        message: "the declared Content-Length is larger than 1000 bytes"),
    FetchErrorMappingRow(
        failure: .truncated(received: 10, declared: 20), code: .truncated, retryable: true,
        message: "the body ended after 10 of 20 bytes"),
    FetchErrorMappingRow(
        failure: .truncated(received: 10, declared: nil), code: .truncated, retryable: true,
        message: "the connection closed before the body was complete"),
    FetchErrorMappingRow(
        failure: .rejected(.tooManyPixels(width: 9, height: 9)), code: .tooManyPixels, retryable: false,
        message: "the image needs 9 × 9 pixels, over fetch.max_pixels"),
    FetchErrorMappingRow(
        failure: .optedOut(.xRobotsTag(directive: "noai")), code: .optedOut, retryable: false,
        message: "the image's X-Robots-Tag says noai"),
    FetchErrorMappingRow(
        failure: .optedOut(.tdmReservation), code: .optedOut, retryable: false,
        message: "the image's tdm-reservation header reserves text and data mining"),
    FetchErrorMappingRow(
        failure: .initFailed(reason: "Failed initialization"), code: .connectFailed, retryable: true,
        message: "libcurl could not be initialised: Failed initialization"),
    FetchErrorMappingRow(
        failure: .transferFailed(reason: "Weird server reply"), code: .connectFailed, retryable: true,
        message: "the transfer failed: Weird server reply"),
]

/// The one table from the engine's ``FetchError`` to the result contract's ``JobError``: every
/// case keeps the code, retryability and message results carried before the engine had its own
/// error type.
@Suite struct FetchErrorMappingTests {
    @Test(arguments: fetchErrorMappingTable) func eachFailureKeepsItsCode(_ row: FetchErrorMappingRow) throws {
        let error = try #require(JobError(fetchFailure: row.failure))
        #expect(error.code == row.code)
        #expect(error.retryable == row.retryable)
        #expect(error.message == row.message)
    }

    /// The worker aborted the transfer itself: the job is handed back unanswered, so no code.
    @Test func anAbortedTransferIsNoJobsFailure() {
        #expect(JobError(fetchFailure: .aborted) == nil)
        #expect(FetchResponse(failure: .aborted).error == nil)
    }

    /// A new FetchError case fails to compile here; the count then asks for its row.
    @Test func theTableCoversEveryCase() {
        func name(_ failure: FetchError) -> String {
            switch failure {
            case .aborted: "aborted"
            case .malformedURL: "malformedURL"
            case .unsupportedScheme: "unsupportedScheme"
            case .setupFailed: "setupFailed"
            case .redirectRefused: "redirectRefused"
            case .invalidHost: "invalidHost"
            case .hostNotAllowed: "hostNotAllowed"
            case .addressRefused: "addressRefused"
            case .dnsFailure: "dnsFailure"
            case .connectFailed: "connectFailed"
            case .timeout: "timeout"
            case .tls: "tls"
            case .tooManyRedirects: "tooManyRedirects"
            case .httpStatus: "httpStatus"
            case .tooLarge: "tooLarge"
            case .truncated: "truncated"
            case .rejected: "rejected"
            case .optedOut: "optedOut"
            case .transferFailed: "transferFailed"
            case .initFailed: "initFailed"
            }
        }
        #expect(Set(fetchErrorMappingTable.map { name($0.failure) } + [name(.aborted)]).count == 20)
    }

    @Test func theResponseShowsItsFailureAsAJobError() {
        #expect(FetchResponse().error == nil)
        #expect(FetchResponse(httpStatus: 503, failure: .httpStatus(503)).error == .httpStatus(503))
    }

    // MARK: libcurl's codes → FetchError

    static func classify(_ code: CURLcode, status: Int = 0, declared: Int64? = nil, osErrno: Int32 = 0) -> FetchError {
        FetchError(
            curlCode: code, status: status, declaredLength: declared, received: 7, maxRedirects: 5, maxBytes: 1000,
            osErrno: osErrno)
    }

    @Test func libcurlResultsAreClassified() {
        #expect(Self.classify(CURLE_COULDNT_RESOLVE_HOST) == .dnsFailure)
        #expect(Self.classify(CURLE_COULDNT_CONNECT) == .connectFailed(.refused))
        #expect(Self.classify(CURLE_SEND_ERROR) == .connectFailed(.sendFailed))
        #expect(Self.classify(CURLE_RECV_ERROR) == .connectFailed(.receiveFailed))
        #expect(Self.classify(CURLE_GOT_NOTHING) == .connectFailed(.closedEarly))
        #expect(Self.classify(CURLE_HTTP2) == .connectFailed(.http2Framing))
        #expect(Self.classify(CURLE_HTTP2_STREAM) == .connectFailed(.http2Framing))
        #expect(Self.classify(CURLE_OPERATION_TIMEDOUT) == .timeout)
        for code in [
            CURLE_SSL_CONNECT_ERROR, CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CERTPROBLEM, CURLE_USE_SSL_FAILED,
        ] {
            #expect(Self.classify(code) == .tls)
        }
        // A handshake the network cut is worth another attempt; one the peer refused is not.
        for osErrno in [ECONNRESET, ECONNABORTED, EPIPE, ETIMEDOUT] {
            #expect(Self.classify(CURLE_SSL_CONNECT_ERROR, osErrno: osErrno) == .connectFailed(.cutInHandshake))
        }
        #expect(Self.classify(CURLE_SSL_CONNECT_ERROR, osErrno: EACCES) == .tls)
        #expect(Self.classify(CURLE_PEER_FAILED_VERIFICATION, osErrno: ECONNRESET) == .tls)
        #expect(Self.classify(CURLE_TOO_MANY_REDIRECTS) == .tooManyRedirects(limit: 5))
        #expect(Self.classify(CURLE_UNSUPPORTED_PROTOCOL) == .unsupportedScheme(atSetup: false))
        #expect(Self.classify(CURLE_URL_MALFORMAT) == .malformedURL)
        #expect(Self.classify(CURLE_WEIRD_SERVER_REPLY) == .transferFailed(reason: "Weird server reply"))
    }

    @Test func aPartialBodyIsTruncatedUnlessTheStatusFailed() {
        #expect(Self.classify(CURLE_PARTIAL_FILE, status: 200, declared: 20) == .truncated(received: 7, declared: 20))
        #expect(Self.classify(CURLE_PARTIAL_FILE, status: 200) == .truncated(received: 7, declared: nil))
        #expect(Self.classify(CURLE_PARTIAL_FILE, status: 502, declared: 20) == .httpStatus(502))
    }

    @Test func setUpFailuresAreClassified() {
        #expect(FetchError(setup: .easy(CURLE_URL_MALFORMAT)) == .malformedURL)
        #expect(FetchError(setup: .easy(CURLE_UNSUPPORTED_PROTOCOL)) == .unsupportedScheme(atSetup: true))
        #expect(FetchError(setup: .initFailed) == .setupFailed(reason: "libcurl could not allocate a handle"))
    }
}
