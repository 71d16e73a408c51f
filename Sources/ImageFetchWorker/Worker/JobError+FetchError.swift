/// The one table from the fetch engine's failures to the result contract's codes
/// (docs/message-contract.md, "Error codes"): the pipeline's edge, where a fetch becomes a job's
/// outcome. Codes, retryability and messages are those the results have always carried.
extension JobError {
    package init(_ failure: FetchError) {
        switch failure {
        case .aborted:
            self.init(.aborted, "the transfer was aborted")
        case .malformedURL:
            self.init(.invalidURL, "the URL is malformed")
        case .unsupportedScheme(let atSetup):
            self.init(
                .unsupportedScheme,
                atSetup
                    ? "the URL used a scheme other than http or https"
                    : "the URL or a redirect used a scheme other than http or https")
        case .setupFailed(let reason):
            self.init(.connectFailed, "the transfer could not be set up: \(reason)")
        case .redirectRefused(.tooLong):
            self.init(.invalidURL, "a redirect target is longer than \(URLPolicy.maxLength) bytes")
        case .redirectRefused(.userInfo):
            self.init(.invalidURL, "a redirect target contains user info, which is not allowed")
        case .invalidHost(let problem, let redirect):
            self.init(.invalidURL, redirect ? "a redirect target: \(problem)" : problem)
        case .hostNotAllowed(let refusal, let redirect):
            // Names the list, never the host.
            let what = redirect ? "a redirect target's host" : "the host"
            switch refusal {
            case .denied: self.init(.hostNotAllowed, "\(what) matches fetch.denied_hosts")
            case .notAllowed: self.init(.hostNotAllowed, "\(what) is not in fetch.allowed_hosts")
            }
        case .addressRefused(let addressClass):
            self.init(.forbiddenAddress, "refused to connect to a \(addressClass) address")
        case .dnsFailure:
            self.init(.dnsFailure, "the host name did not resolve")
        case .connectFailed(.noResponse):
            self.init(.connectFailed, "the origin sent no HTTP response")
        case .connectFailed(.refused):
            self.init(.connectFailed, "the connection was refused or failed")
        case .connectFailed(.sendFailed):
            self.init(.connectFailed, "the connection failed while sending")
        case .connectFailed(.receiveFailed):
            self.init(.connectFailed, "the connection failed while receiving")
        case .connectFailed(.closedEarly):
            self.init(.connectFailed, "the origin closed the connection without a response")
        case .connectFailed(.http2Framing):
            self.init(.connectFailed, "the origin broke the HTTP/2 framing")
        case .timeout:
            self.init(.timeout, "the transfer timed out (connect, total or low-speed limit)")
        case .tls:
            self.init(.tlsFailure, "the TLS handshake or certificate check failed")
        case .tooManyRedirects(let limit):
            self.init(.tooManyRedirects, "more than \(limit) redirects")
        case .httpStatus(let status):
            self = .httpStatus(status)
        case .tooLarge(let limit, let declared):
            self.init(
                .tooLarge,
                declared
                    ? "the declared Content-Length is larger than \(limit) bytes"
                    : "the body is larger than \(limit) bytes")
        case .truncated(let received, let declared?):
            self.init(.truncated, "the body ended after \(received) of \(declared) bytes")
        case .truncated(_, nil):
            self.init(.truncated, "the connection closed before the body was complete")
        case .rejected(let reason):
            // The pipeline's only inspector is the pixel check (`Worker.start`).
            self.init(.tooManyPixels, reason)
        case .optedOut(let signal):
            self.init(signal)
        case .transferFailed(let reason):
            self.init(.connectFailed, "the transfer failed: \(reason)")
        case .initFailed(let reason):
            self.init(.connectFailed, "libcurl could not be initialised: \(reason)")
        }
    }
}

extension JobError {
    /// `opted_out`, never retried: the origin's answer does not change by asking again.
    package init(_ signal: OptOutSignal) {
        self.init(.optedOut, signal.explanation, retryable: false)
    }
}

extension FetchResponse {
    /// ``failure`` in the result contract's terms, for the callers that report in them (the job
    /// pipeline, the S3 sink, the management API client).
    package var error: JobError? {
        failure.map(JobError.init)
    }
}
