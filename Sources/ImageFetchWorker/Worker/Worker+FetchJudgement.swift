import Foundation

/// What a fetch means, as pure functions of its response: for the job, whether its body is an
/// image to keep; for its origin, what the scheduler learns (``OriginScheduler``).
extension JobRunner {
    /// `too_many_pixels` when what a decoder would allocate is over the limit (``ImagePolicy``).
    static func pixelLimitError(_ info: ImageInfo, maxPixels: Int) -> JobError? {
        ImagePolicy.pixelRefusal(info, maxPixels: maxPixels).map(JobError.init)
    }

    /// What a whole body is, or why it fails (``ImagePolicy/check(_:maxPixels:decode:)``):
    /// `not_an_image`, `too_many_pixels`, `truncated` or `corrupt_image`.
    ///
    /// A cut image is final when the transfer proved its body whole (a length, chunks, HTTP/2):
    /// another attempt fetches the same bytes. A body that only the connection's close ended
    /// (`endedByClose`) may have lost its end to that close, so it is tried again.
    static func checkImage(
        _ body: [UInt8], endedByClose: Bool = false, maxPixels: Int,
        verify: WorkerConfiguration.Image.Verify = .structure
    ) -> Result<ImageInfo, JobError> {
        ImagePolicy.check(body, maxPixels: maxPixels, decode: verify == .decode).mapError { refusal in
            var error = JobError(refusal)
            if endedByClose, error.code == .truncated { error.retryable = true }
            return error
        }
    }

    /// The origin's `Retry-After` in seconds, capped, for a 429 or 503; nil for any other answer.
    static func retryAfterSeconds(_ response: FetchResponse, cap: Double) -> Double? {
        guard let status = response.httpStatus, status == 429 || status == 503 else { return nil }
        return RetryAfter.seconds(response.retryAfter, now: Date().timeIntervalSince1970, cap: cap)
    }

    /// What a fetch tells the scheduler about its origin; `error` is the response's failure as a
    /// result code, `retryAfterSeconds` its ``retryAfterSeconds(_:cap:)``.
    static func originOutcome(
        _ response: FetchResponse, error: JobError?, retryAfterSeconds: Double?
    ) -> OriginScheduler<JobContext>.FetchOutcome {
        let duration = UInt64((response.timings?.totalMs ?? 0) * 1e6)
        // Also after a status: a body that stalls or breaks off is the origin failing, not a fast
        // answer (its first byte's latency would have earned it more slots). A 429 or 503 stays
        // its status, so that its pause holds however its body ended.
        if response.httpStatus != 429, response.httpStatus != 503 {
            switch error?.code {
            case .timeout? where response.heldByWorker:
                // The worker's own backlog held the body back; the origin did nothing wrong.
                return .other
            case .connectFailed?, .timeout?, .truncated?:
                return .connectFailure(durationNanoseconds: duration)
            default:
                break
            }
        }
        if let status = response.httpStatus, status > 0 {
            let timings = response.timings
            // The origin's own time: first byte after the connection (and TLS) was set up.
            let latency = timings.map { max($0.ttfbMs - max($0.connectMs, $0.tlsMs), 0) }
            return .response(
                status: status, latencyNanoseconds: latency.map { UInt64($0 * 1e6) },
                durationNanoseconds: duration, retryAfterSeconds: retryAfterSeconds)
        }
        switch error?.code {
        case .dnsFailure?:
            return .nameFailure(durationNanoseconds: duration)
        default:
            return .other
        }
    }
}
