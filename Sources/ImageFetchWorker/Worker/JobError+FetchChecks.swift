/// The checks a job passes before it is fetched (its URL, its headers), in the result contract's
/// terms: the same edge as `JobError+FetchError.swift`, for the refusals the fetch code gives
/// before any transfer, and for the structure walk of a whole body. Codes and messages are those
/// results have always carried.
extension JobError {
    /// `invalid_url`, or `unsupported_scheme`; never retried.
    package init(_ refusal: URLPolicy.Refusal) {
        let message: String
        switch refusal {
        case .unsupportedScheme(let shown):
            self.init(.unsupportedScheme, "the URL scheme \"\(shown)\" is not supported; only http and https are")
            return
        case .tooLong: message = "the URL is longer than \(URLPolicy.maxLength) bytes"
        case .empty: message = "the URL is empty"
        case .spaceOrControl: message = "the URL contains a space or a control character"
        case .notAbsolute: message = "the URL is not absolute (it has no scheme)"
        case .noAuthority: message = "the URL has no host (no // after the scheme)"
        case .userInfo: message = "the URL contains user info, which is not allowed"
        case .unclosedIPv6Literal: message = "the host is an IPv6 literal without a closing bracket"
        case .invalidIPv6: message = "the host is not a valid IPv6 address"
        case .junkAfterHost: message = "the host is followed by something other than a port"
        case .invalidPort: message = "the port is not a number between 1 and 65535"
        case .noHost: message = "the URL has no host"
        case .invalidHostName(let problem): message = problem.message
        case .hostCharacter: message = "the host name contains a character that is not allowed"
        case .emptyLabel: message = "the host name has an empty label"
        case .invalidIPv4: message = "the host looks like an IPv4 address but is not a valid one"
        }
        self.init(.invalidURL, message)
    }

    /// `invalid_job`: the job is dead-lettered.
    package init(_ refusal: RequestHeaders.JobHeaderRefusal) {
        switch refusal {
        case .tooMany:
            self.init(.invalidJob, "the job has more than \(RequestHeaders.maxJobHeaders) headers")
        case .invalidName:
            self.init(.invalidJob, "a name in the job's headers is not a valid HTTP header name")
        case .notAllowed(let name):
            self.init(.invalidJob, "the job's header \(name) is not allowed by fetch.job_headers")
        case .repeated(let name):
            self.init(.invalidJob, "the job's header \(name) is given twice")
        case .invalidValue(let name, let problem):
            self.init(.invalidJob, "the value of the job's header \(name) \(problem)")
        }
    }

    /// `truncated` or `corrupt_image`, for a whole body whose structure walk failed. Not retried:
    /// the transfer was complete, so another attempt fetches the same bytes.
    package init(_ problem: StructureProblem) {
        switch problem {
        case .truncated(let reason):
            self.init(.truncated, "the image is cut short (\(reason))", retryable: false)
        case .corrupt(let reason):
            self.init(.corruptImage, "the image is damaged (\(reason))")
        }
    }

    /// `too_many_pixels` or `corrupt_image`, for a body libvips would not decode. Not retried.
    package init(_ failure: ImageDecoder.Failure) {
        switch failure {
        case .tooManyPixels(let width, let height):
            self.init(.tooManyPixels, "the image needs \(width) × \(height) pixels, over fetch.max_pixels")
        case .undecodable(let reason):
            self.init(.corruptImage, "the image does not decode (\(reason))")
        case .unavailable:
            // Not reached in a worker: it does not start in decode mode without libvips.
            self.init(.corruptImage, "the image could not be decoded: libvips did not start")
        }
    }
}
