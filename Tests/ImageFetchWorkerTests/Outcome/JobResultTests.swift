import Foundation
import Testing

@testable import ImageFetchWorker

@Suite struct JobResultTests {
    func decode(_ bytes: [UInt8]) throws -> [String: Any] {
        try #require(JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any])
    }

    @Test func okResultCarriesTheContract() throws {
        let job = Job(id: "j\"1", url: "https://example.com/a.png?q=\n", attempt: 2, redelivered: true)
        var result = JobResult(
            job: job, status: .ok, durationMs: 12.3456, worker: "host-1", finishedAt: 1_700_000_000.25)
        result.httpStatus = 200
        result.contentType = "image/png"
        result.image = ImageInfo(format: .png, width: 640, height: 480)
        result.bytes = 12_000
        result.sha256 = String(repeating: "ab", count: 32)
        result.location = "file:///data/ab/abab.png"
        result.finalURL = "https://cdn.example.com/a.png"
        result.redirects = 1
        result.timings = FetchTimings(dnsMs: 1, connectMs: 2.5, tlsMs: 0, ttfbMs: 10.125, totalMs: 12)
        let json = try decode(result.encoded())
        #expect(json["id"] as? String == "j\"1")
        #expect(json["url"] as? String == "https://example.com/a.png?q=\n")
        #expect(json["status"] as? String == "ok")
        #expect(json["attempt"] as? Int == 2)
        #expect(json["redelivered"] as? Bool == true)
        #expect(json["http_status"] as? Int == 200)
        #expect(json["format"] as? String == "png")
        #expect(json["width"] as? Int == 640)
        #expect(json["height"] as? Int == 480)
        #expect(json["bytes"] as? Int == 12_000)
        #expect(json["location"] as? String == "file:///data/ab/abab.png")
        #expect(json["redirects"] as? Int == 1)
        #expect(json["duration_ms"] as? Double == 12.346)
        #expect(json["worker"] as? String == "host-1")
        #expect(json["finished_at"] as? String == "2023-11-14T22:13:20.250Z")
        #expect(json["error"] == nil)
        let timings = try #require(json["timings"] as? [String: Any])
        #expect(timings["ttfb_ms"] as? Double == 10.125)
        #expect(timings["connect_ms"] as? Double == 2.5)
    }

    @Test func failedResultCarriesTheError() throws {
        var result = JobResult(job: Job(id: "j", url: "u"), status: .failed, durationMs: 1, worker: "w", finishedAt: 0)
        result.error = JobError.httpStatus(503)
        result.httpStatus = 503
        let json = try decode(result.encoded())
        #expect(json["status"] as? String == "failed")
        let error = try #require(json["error"] as? [String: Any])
        #expect(error["code"] as? String == "http_error")
        #expect(error["retryable"] as? Bool == true)
        #expect(json["format"] == nil)
        #expect(json["sha256"] == nil)
    }

    @Test func controlCharactersAreEscaped() throws {
        let result = JobResult(
            job: Job(id: "\u{01}\u{7f}\t", url: "\\"), status: .ok, durationMs: 0, worker: "w", finishedAt: 0)
        let json = try decode(result.encoded())
        #expect(json["id"] as? String == "\u{01}\u{7f}\t")
        #expect(json["url"] as? String == "\\")
    }

    /// The buffer is sized once: a result that outgrew it would be copied into one twice as large,
    /// once per job, and kept that large until the broker confirms it.
    @Test func encodingFitsTheReservedCapacity() throws {
        let url = "http://127.0.0.1:18080/img.png"
        func filled(_ fill: (inout JobResult) -> Void) -> JobResult {
            var result = JobResult(
                job: Job(id: "job-0000012345", url: url, attempt: 12, redelivered: true),
                status: .ok, durationMs: 123_456.789, worker: "image-fetch-worker-7d9f8b6c5-x2k4q",
                finishedAt: 1_700_000_000.25)
            result.httpStatus = 200
            result.contentType = "image/png"
            result.bytes = 12_000_000
            result.sha256 = String(repeating: "ab", count: 32)
            result.location = "file:///tmp/ifw-bench.abcdef/images/\(String(repeating: "ab", count: 32)).png"
            result.finalURL = url
            result.redirects = 5
            result.timings = FetchTimings(
                dnsMs: 1.234, connectMs: 12.345, tlsMs: 123.456, ttfbMs: 1234.567,
                totalMs: 12345.678)
            fill(&result)
            return result
        }
        var everyFact = ImageInfo(format: .webp, width: 12_345, height: 12_345)
        everyFact.frames = 1_000
        everyFact.animated = true
        everyFact.progressive = true
        everyFact.orientation = 8
        everyFact.decoded = DecodedFacts(width: 12_345, height: 12_345, dhash: .max)
        let results = [
            filled { _ in },
            filled { $0.image = everyFact },
            filled {
                $0.status = .failed
                $0.error = JobError(.tooManyPixels, String(repeating: "m", count: 90))
            },
        ]
        for result in results {
            let encoded = result.encoded()
            #expect(encoded.count <= result.encodedCapacity)
            _ = try decode(encoded)
        }
    }

    /// Decode mode's facts are written only when the image was decoded.
    @Test func decodedFactsOnlyWhenDecoded() throws {
        var result = JobResult(job: Job(id: "j", url: "u"), status: .ok, durationMs: 1, worker: "w", finishedAt: 0)
        var info = ImageInfo(format: .jpeg, width: 64, height: 96)
        info.orientation = 6
        result.image = info
        let structure = try decode(result.encoded())
        #expect(structure["dhash"] == nil && structure["decoded_width"] == nil)
        info.decoded = DecodedFacts(width: 96, height: 64, dhash: 0x0123_4567_89AB_CDEF)
        result.image = info
        let decoded = try decode(result.encoded())
        #expect(decoded["decoded_width"] as? Int == 96 && decoded["decoded_height"] as? Int == 64)
        #expect(decoded["dhash"] as? String == "0123456789abcdef")
    }

    @Test func httpStatusRetryability() {
        #expect(JobError.httpStatus(404).retryable == false)
        #expect(JobError.httpStatus(408).retryable)
        #expect(JobError.httpStatus(429).retryable)
        #expect(JobError.httpStatus(500).retryable)
        #expect(JobError.httpStatus(599).retryable)
        #expect(JobError(.timeout, "x").retryable)
        #expect(!JobError(.notAnImage, "x").retryable)
    }
}
