/// The one table from the fetch engine's failures to the result contract's codes
/// (docs/message-contract.md, "Error codes"): the pipeline's edge, where a fetch becomes a job's
/// outcome. Codes, retryability and messages are those the results have always carried; the
/// messages are the engine's own (``FetchError/message``).
extension JobError {
    /// A fetch's failure as a job's result; nil for ``FetchError/aborted``, which is no job's
    /// failure: the worker stopped the transfer itself (the drain's deadline), and the job goes
    /// back to the broker unanswered (`JobRunner.conclude`), so it has no result code.
    package init?(fetchFailure failure: FetchError) {
        let code: Code
        switch failure {
        case .aborted:
            return nil
        case .malformedURL, .redirectRefused, .invalidHost:
            code = .invalidURL
        case .unsupportedScheme:
            code = .unsupportedScheme
        case .setupFailed, .connectFailed, .transferFailed, .initFailed:
            code = .connectFailed
        case .hostNotAllowed:
            code = .hostNotAllowed
        case .addressRefused:
            code = .forbiddenAddress
        case .dnsFailure:
            code = .dnsFailure
        case .timeout:
            code = .timeout
        case .tls:
            code = .tlsFailure
        case .tooManyRedirects:
            code = .tooManyRedirects
        case .httpStatus(let status):
            self = .httpStatus(status)
            return
        case .tooLarge:
            code = .tooLarge
        case .truncated:
            code = .truncated
        case .rejected(.tooManyPixels(let width, let height)):
            // The same result as the whole body's pixel check (`JobError+ImageRefusal.swift`).
            self.init(ImagePolicy.Refusal.tooManyPixels(width: width, height: height))
            return
        case .optedOut(let signal):
            self.init(signal)
            return
        }
        self.init(code, failure.message)
    }
}

extension JobError {
    /// `opted_out`, never retried: the origin's answer does not change by asking again.
    package init(_ signal: OptOutSignal) {
        self.init(.optedOut, signal.explanation, retryable: false)
    }
}

extension FetchResponse {
    /// ``failure`` in the result contract's terms (``JobError/init(fetchFailure:)``): nil for a
    /// success, and for an aborted transfer, which has no result code.
    package var error: JobError? {
        failure.flatMap(JobError.init(fetchFailure:))
    }
}
