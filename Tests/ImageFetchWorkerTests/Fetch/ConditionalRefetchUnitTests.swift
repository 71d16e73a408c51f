import Foundation
import Testing

@testable import ImageFetchWorker

/// Conditional refetch, the pure parts: the job's validators, the request headers they become,
/// the rule for the origin's values, when a job ends `not_modified`, and how that result reads.
@Suite struct ConditionalRefetchUnitTests {
    private func decode(_ body: String) -> Result<Job, JobError> {
        Job.decode(Delivery(tag: 1, epoch: 1, redelivered: false, body: Array(body.utf8)))
    }

    @Test func aJobCarriesItsValidators() throws {
        let sha = String(repeating: "AB", count: 32)
        // Quotes are escapes in JSON: the full decoder reads this body.
        let quoted = try decode(
            #"{"id":"1","url":"https://a.example/x.png","etag":"W/\"v1\"","#
                + #""last_modified":"Sun, 06 Nov 1994 08:49:37 GMT","sha256":""# + sha + #""}"#
        ).get()
        #expect(quoted.etag == #"W/"v1""#)
        #expect(quoted.lastModified == "Sun, 06 Nov 1994 08:49:37 GMT")
        #expect(quoted.previousSHA256 == sha.lowercased())
        // The scanner's plain path gives the same.
        let plain = try decode(#"{"id":"1","url":"https://a.example/x.png","etag":"v1","sha256":null}"#).get()
        #expect(plain.etag == "v1" && plain.previousSHA256 == nil && plain.lastModified == nil)
        // Empty counts as absent.
        let empty = try decode(#"{"id":"1","url":"u","etag":"","last_modified":"","sha256":""}"#).get()
        #expect(empty.etag == nil && empty.lastModified == nil && empty.previousSHA256 == nil)
    }

    @Test(arguments: [
        #"{"id":"1","url":"u","etag":"two words"}"#,
        #"{"id":"1","url":"u","etag":"tab\there"}"#,
        #"{"id":"1","url":"u","etag":"é"}"#,
        #"{"id":"1","url":"u","etag":""# + String(repeating: "e", count: 257) + #""}"#,
        #"{"id":"1","url":"u","etag":5}"#,
        #"{"id":"1","url":"u","last_modified":"yesterday"}"#,
        #"{"id":"1","url":"u","last_modified":"Sun, 06 Nov 1994 08:49:37 GMT\r\nX: y"}"#,
        #"{"id":"1","url":"u","sha256":"abc"}"#,
        #"{"id":"1","url":"u","sha256":""# + String(repeating: "g", count: 64) + #""}"#,
        #"{"id":"1","url":"u","sha256":true}"#,
    ])
    func aBrokenValidatorMakesAnInvalidJob(body: String) {
        guard case .failure(let error) = decode(body) else {
            Issue.record("accepted: \(body)")
            return
        }
        #expect(error.code == .invalidJob)
        #expect(!error.message.contains("two words") && !error.message.contains("yesterday"))
    }

    @Test func theValidatorsBecomeConditionalHeadersInPlaceOfTheJobsOwn() {
        let own = [HTTPHeaderField(name: "Referer", value: "r"), HTTPHeaderField(name: "if-none-match", value: "x")]
        #expect(CacheValidators.requestHeaders(own, etag: nil, lastModified: nil) == own)
        let headers = CacheValidators.requestHeaders(own, etag: "\"v\"", lastModified: "Sun, 06 Nov 1994 08:49:37 GMT")
        #expect(
            headers == [
                HTTPHeaderField(name: "Referer", value: "r"),
                HTTPHeaderField(name: "If-None-Match", value: "\"v\""),
                HTTPHeaderField(name: "If-Modified-Since", value: "Sun, 06 Nov 1994 08:49:37 GMT"),
            ])
    }

    @Test func anOriginsValidatorIsKeptWholeOrDropped() {
        #expect(CacheValidators.etag(from: Array("\"abc\"".utf8)) == "\"abc\"")
        #expect(CacheValidators.etag(from: Array("W/\"abc\"".utf8)) == "W/\"abc\"")
        #expect(CacheValidators.etag(from: [UInt8](repeating: 0x61, count: 257)) == nil)
        #expect(CacheValidators.etag(from: Array("\"a\u{1}b\"".utf8)) == nil)
        #expect(CacheValidators.etag(from: Array("\"a b\"".utf8)) == nil)
        #expect(CacheValidators.etag(from: Array("\"é\"".utf8)) == nil)
        #expect(CacheValidators.etag(from: [UInt8]()) == nil)
        #expect(CacheValidators.lastModified(from: Array("Sun, 06 Nov 1994 08:49:37 GMT".utf8)) != nil)
        #expect(CacheValidators.lastModified(from: Array("Sunday, 06-Nov-94 08:49:37 GMT".utf8)) != nil)
        #expect(CacheValidators.lastModified(from: Array("0".utf8)) == nil)
        let padded = "Sun, 06 Nov 1994 08:49:37 GMT" + String(repeating: " ", count: 40)
        #expect(CacheValidators.lastModified(from: Array(padded.utf8)) == nil)
    }

    /// The in-place reader of IMF-fixdates must accept nothing the general reader refuses.
    @Test func theFixdateFastPathAcceptsOnlyWhatTheGeneralReaderAccepts() {
        let dates = [
            "Sun, 06 Nov 1994 08:49:37 GMT", "Mon, 31 Dec 9999 23:59:60 GMT", "Thu, 01 Jan 1900 00:00:00 GMT",
            "Wed, 27 Nov 2026 10:04:05 GMT",
        ]
        for date in dates {
            #expect(CacheValidators.isIMFFixdate(Array(date.utf8)), "\(date)")
        }
        var generator = SplitMix64(state: 32)
        let alphabet = Array("0123456789 ,:-ASTadgnouv")
        var accepted = 0
        for _ in 0..<20_000 {
            var characters = Array(dates.randomElement(using: &generator) ?? "")
            for _ in 0..<Int.random(in: 1...2, using: &generator) {
                let position = Int.random(in: 0..<characters.count, using: &generator)
                characters[position] = alphabet.randomElement(using: &generator) ?? "0"
            }
            let text = String(characters)
            guard CacheValidators.isIMFFixdate(Array(text.utf8)) else { continue }
            accepted += 1
            #expect(RetryAfter.httpDate(text) != nil, "\(text)")
        }
        #expect(accepted > 1_000)
        #expect(!CacheValidators.isIMFFixdate(Array("Sun, 00 Nov 1994 08:49:37 GMT".utf8)))
        #expect(!CacheValidators.isIMFFixdate(Array("Sun, 06 nov 1994 08:49:37 GMT".utf8)))
        #expect(!CacheValidators.isIMFFixdate(Array("Sun, 06 Nov 1994 24:49:37 GMT".utf8)))
    }

    @Test func notModifiedIsA304ToAConditionalRequestOrTheSameDigest() {
        let sha = String(repeating: "a", count: 64)
        let plain = Job(id: "1", url: "u")
        let withETag = Job(id: "1", url: "u", etag: "\"v\"")
        let withDate = Job(id: "1", url: "u", lastModified: "Sun, 06 Nov 1994 08:49:37 GMT")
        let withDigest = Job(id: "1", url: "u", previousSHA256: sha)
        #expect(OutcomePolicy.isNotModified(withETag, httpStatus: 304, digest: nil))
        #expect(OutcomePolicy.isNotModified(withDate, httpStatus: 304, digest: nil))
        // A 304 nobody asked for is no answer.
        #expect(!OutcomePolicy.isNotModified(plain, httpStatus: 304, digest: nil))
        #expect(!OutcomePolicy.isNotModified(withDigest, httpStatus: 304, digest: nil))
        #expect(OutcomePolicy.isNotModified(withDigest, httpStatus: 200, digest: sha))
        #expect(!OutcomePolicy.isNotModified(withDigest, httpStatus: 200, digest: String(repeating: "b", count: 64)))
        #expect(!OutcomePolicy.isNotModified(withETag, httpStatus: 200, digest: sha))
    }

    @Test func aNotModifiedResultIsPublishedOnceAndNeverRetried() throws {
        let job = Job(id: "j1", url: "https://a.example/x.png", attempt: 3, etag: "\"v\"")
        var result = JobResult(job: job, status: .notModified, durationMs: 1, worker: "w", finishedAt: 0)
        result.httpStatus = 304
        result.etag = "\"v\""
        result.lastModified = "Sun, 06 Nov 1994 08:49:37 GMT"
        let delivery = Delivery(tag: 1, epoch: 1, redelivered: false, body: Array(#"{"id":"j1","url":"u"}"#.utf8))
        let decision = OutcomePolicy(WorkerConfiguration()).finished(delivery, job: job, result: result)
        #expect(decision.outcome == .notModified)
        #expect(decision.outcome.name == "not_modified")
        #expect(decision.messages.map(\.routingKey) == ["image-fetch.results"])
        let body = Data(decision.messages[0].body)
        let object = try #require(try JSONSerialization.jsonObject(with: body) as? [String: Any])
        #expect(object["status"] as? String == "not_modified")
        #expect(object["etag"] as? String == "\"v\"")
        #expect(object["last_modified"] as? String == "Sun, 06 Nov 1994 08:49:37 GMT")
        #expect(object["http_status"] as? Int == 304)
        #expect(result.encoded().count <= result.encodedCapacity)
    }
}
