import Testing

@testable import ImageFetchWorker

/// Where the pipeline takes a fetch's response: the origin's `Retry-After`, read once, and what the
/// response tells the scheduler.
@Suite struct FetchEdgeTests {
    static let timings = FetchTimings(dnsMs: 0, connectMs: 1, tlsMs: 0, ttfbMs: 3, totalMs: 5)

    @Test func retryAfterIsReadFor429And503Only() {
        for status in [429, 503] {
            var response = FetchResponse(httpStatus: status, failure: .httpStatus(status))
            response.retryAfter = "7"
            #expect(Worker.retryAfterSeconds(response, cap: 300) == 7)
            response.retryAfter = "86400"
            #expect(Worker.retryAfterSeconds(response, cap: 300) == 300)
            response.retryAfter = nil
            #expect(Worker.retryAfterSeconds(response, cap: 300) == nil)
        }
        for status in [200, 500] {
            var response = FetchResponse(httpStatus: status)
            response.retryAfter = "7"
            #expect(Worker.retryAfterSeconds(response, cap: 300) == nil)
        }
    }

    @Test func theSchedulerGetsTheDelayAsParsed() {
        let response = FetchResponse(httpStatus: 429, timings: Self.timings, failure: .httpStatus(429))
        let outcome = Worker.originOutcome(response, error: response.error, retryAfterSeconds: 12)
        #expect(
            outcome
                == .response(
                    status: 429, latencyNanoseconds: 2_000_000, durationNanoseconds: 5_000_000,
                    retryAfterSeconds: 12))
    }

    /// Connect failures and timeouts cut the origin's limit and count in its pace; a failed lookup
    /// counts in its pace only; the rest says nothing about the origin.
    @Test func withoutAResponseOnlyConnectFailuresTimeoutsAndLookupsCount() {
        for failure in [
            FetchError.timeout, .connectFailed(.refused), .setupFailed(reason: "x"), .transferFailed(reason: "x"),
        ] {
            let response = FetchResponse(timings: Self.timings, failure: failure)
            #expect(
                Worker.originOutcome(response, error: response.error, retryAfterSeconds: nil)
                    == .connectFailure(durationNanoseconds: 5_000_000), "\(failure)")
        }
        let lookup = FetchResponse(timings: Self.timings, failure: .dnsFailure)
        #expect(
            Worker.originOutcome(lookup, error: lookup.error, retryAfterSeconds: nil)
                == .nameFailure(durationNanoseconds: 5_000_000))
        for failure in [FetchError.tls, .addressRefused(addressClass: "private"), .aborted] {
            let response = FetchResponse(timings: Self.timings, failure: failure)
            #expect(
                Worker.originOutcome(response, error: response.error, retryAfterSeconds: nil) == .other, "\(failure)")
        }
    }

    /// An answer whose status came and whose body then stalled, broke off or came short is the
    /// origin failing, not a fast success: it counted as a `.response` of status 200 with the
    /// latency of its first byte, so the more an origin stalled its bodies the more slots it got.
    @Test func aStatusFollowedByAFailedBodyIsAFailureOfTheOrigin() {
        for failure in [
            FetchError.timeout, .connectFailed(.receiveFailed), .truncated(received: 10, declared: 100),
            .transferFailed(reason: "x"),
        ] {
            for status in [200, 301, 404] {
                let response = FetchResponse(httpStatus: status, timings: Self.timings, failure: failure)
                #expect(
                    Worker.originOutcome(response, error: response.error, retryAfterSeconds: nil)
                        == .connectFailure(durationNanoseconds: 5_000_000), "\(status) \(failure)")
            }
        }
        // A 503 whose body then broke off is still a 503: its pause must hold.
        var refused = FetchResponse(httpStatus: 503, timings: Self.timings, failure: .timeout)
        refused.retryAfter = "300"
        guard
            case .response(503, _, _, 300) = Worker.originOutcome(refused, error: refused.error, retryAfterSeconds: 300)
        else {
            Issue.record("a 503 that timed out lost its status")
            return
        }
        // A body the worker's own flow control held back until the timeout is not the origin's.
        var held = FetchResponse(httpStatus: 200, timings: Self.timings, failure: .timeout)
        held.heldByWorker = true
        #expect(Worker.originOutcome(held, error: held.error, retryAfterSeconds: nil) == .other)
        // A whole answer the job then refuses still tells the origin's pace and health.
        for failure in [FetchError.httpStatus(404), .tooLarge(limit: 10, declared: true)] {
            let response = FetchResponse(httpStatus: 404, timings: Self.timings, failure: failure)
            guard case .response = Worker.originOutcome(response, error: response.error, retryAfterSeconds: nil) else {
                Issue.record("\(failure) is no response")
                continue
            }
        }
    }
}
