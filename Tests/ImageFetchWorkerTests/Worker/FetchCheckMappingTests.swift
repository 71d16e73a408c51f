import Testing

@testable import ImageFetchWorker

/// One refusal of a job's URL or headers, and the result it has always produced.
struct FetchCheckRow: Sendable, CustomTestStringConvertible {
    var input: String
    var code: JobError.Code
    var message: String
    var testDescription: String { input.count > 60 ? String(input.prefix(60)) + "…" : input }
}

/// Every failure path of ``URLPolicy``, as the worker reports it for a job's `url`.
let urlCheckTable: [FetchCheckRow] = [
    FetchCheckRow(
        input: "http://" + String(repeating: "a", count: 8186), code: .invalidURL,
        message: "the URL is longer than 8192 bytes"),
    FetchCheckRow(input: "", code: .invalidURL, message: "the URL is empty"),
    FetchCheckRow(input: "http://a b/", code: .invalidURL, message: "the URL contains a space or a control character"),
    FetchCheckRow(
        input: "http://a/\u{85}", code: .invalidURL, message: "the URL contains a space or a control character"),
    FetchCheckRow(input: "/relative/a.png", code: .invalidURL, message: "the URL is not absolute (it has no scheme)"),
    FetchCheckRow(input: "1http://a/", code: .invalidURL, message: "the URL is not absolute (it has no scheme)"),
    FetchCheckRow(
        input: "FTP://a/", code: .unsupportedScheme,
        message: "the URL scheme \"ftp\" is not supported; only http and https are"),
    FetchCheckRow(
        input: "abcdefghijklmnopqrstuvwxyz://a/", code: .unsupportedScheme,
        message: "the URL scheme \"abcdefghijklmnopqrst…\" is not supported; only http and https are"),
    FetchCheckRow(input: "http:a/b", code: .invalidURL, message: "the URL has no host (no // after the scheme)"),
    FetchCheckRow(
        input: "http://user:pw@a/", code: .invalidURL, message: "the URL contains user info, which is not allowed"),
    FetchCheckRow(
        input: "http://[::1/", code: .invalidURL, message: "the host is an IPv6 literal without a closing bracket"),
    FetchCheckRow(input: "http://[::g]/", code: .invalidURL, message: "the host is not a valid IPv6 address"),
    FetchCheckRow(
        input: "http://[::1]x/", code: .invalidURL, message: "the host is followed by something other than a port"),
    FetchCheckRow(input: "http://a:8x/", code: .invalidURL, message: "the port is not a number between 1 and 65535"),
    FetchCheckRow(input: "http://a:0/", code: .invalidURL, message: "the port is not a number between 1 and 65535"),
    FetchCheckRow(
        input: "http://a:123456/", code: .invalidURL, message: "the port is not a number between 1 and 65535"),
    FetchCheckRow(input: "http:///a.png", code: .invalidURL, message: "the URL has no host"),
    FetchCheckRow(input: "http://:80/", code: .invalidURL, message: "the URL has no host"),
    FetchCheckRow(
        input: "http://xn--bcher-kvb.example/", code: .invalidURL,
        message: "the internationalised host name is not valid under IDNA 2008"),
    FetchCheckRow(
        input: "http://\u{0430}pple.com/", code: .invalidURL,
        message: "a label of the host name mixes Latin, Greek or Cyrillic letters"),
    FetchCheckRow(
        input: "http://a!b/", code: .invalidURL, message: "the host name contains a character that is not allowed"),
    FetchCheckRow(input: "http://a..b/", code: .invalidURL, message: "the host name has an empty label"),
    FetchCheckRow(
        input: "http://1.2.3.999/", code: .invalidURL,
        message: "the host looks like an IPv4 address but is not a valid one"),
    FetchCheckRow(
        input: "http://0x/", code: .invalidURL, message: "the host looks like an IPv4 address but is not a valid one"),
]

/// Every failure path of the job-header check, as ``Job/decode(_:allowedHeaders:)`` reports it.
/// `input` is the body's `headers` object.
let jobHeaderCheckTable: [FetchCheckRow] = [
    FetchCheckRow(
        input: "{" + (0...16).map { "\"X-\($0)\":\"v\"" }.joined(separator: ",") + "}", code: .invalidJob,
        message: "the job has more than 16 headers"),
    FetchCheckRow(
        input: #"{"Bad Name":"x"}"#, code: .invalidJob,
        message: "a name in the job's headers is not a valid HTTP header name"),
    FetchCheckRow(
        input: #"{"Cookie":"a=b"}"#, code: .invalidJob,
        message: "the job's header Cookie is not allowed by fetch.job_headers"),
    FetchCheckRow(
        input: #"{"Host":"x"}"#, code: .invalidJob, message: "the job's header Host is not allowed by fetch.job_headers"
    ),
    FetchCheckRow(
        input: #"{"REFERER":"a","Referer":"b"}"#, code: .invalidJob, message: "the job's header Referer is given twice"),
    FetchCheckRow(
        input: #"{"Referer":"a\r\nX-Injected: 1"}"#, code: .invalidJob,
        message: "the value of the job's header Referer contains a CR or LF"),
    FetchCheckRow(
        input: #"{"Referer":"a\u0000b"}"#, code: .invalidJob,
        message: "the value of the job's header Referer contains a control character"),
    FetchCheckRow(
        input: "{\"Referer\":\"" + String(repeating: "a", count: 4097) + "\"}", code: .invalidJob,
        message: "the value of the job's header Referer is longer than 4096 bytes"),
]

/// The refusals of the checks a job passes before it is fetched (URL, headers), pinned through the
/// paths the worker takes: codes, retryability and messages stay what results have carried.
@Suite struct FetchCheckMappingTests {
    /// What the worker reports for a job's URL that ``URLPolicy`` refuses.
    static func urlError(_ url: String) -> JobError? {
        guard case .failure(let refusal) = URLPolicy.validate(url) else { return nil }
        return JobError(refusal)
    }

    @Test(arguments: urlCheckTable) func eachURLRefusalKeepsItsResult(_ row: FetchCheckRow) throws {
        let error = try #require(Self.urlError(row.input))
        #expect(error.code == row.code)
        #expect(!error.retryable)
        #expect(error.message == row.message)
    }

    @Test(arguments: jobHeaderCheckTable) func eachHeaderRefusalKeepsItsResult(_ row: FetchCheckRow) throws {
        let body = #"{"id":"j1","url":"http://a/x.png","headers":"# + row.input + "}"
        let delivery = Delivery(
            tag: 1, epoch: 1, redelivered: false, properties: AMQPProperties(), body: Array(body.utf8))
        guard case .failure(let error) = Job.decode(delivery, allowedHeaders: ["referer", "host", "authorization"])
        else {
            Issue.record("the headers were accepted")
            return
        }
        #expect(error.code == row.code)
        #expect(!error.retryable)
        #expect(error.message == row.message)
    }

    /// A new refusal fails to compile here; the count then asks for its row.
    @Test func theTablesCoverEveryRefusal() {
        func name(_ refusal: URLPolicy.Refusal) -> String {
            switch refusal {
            case .tooLong: "tooLong"
            case .empty: "empty"
            case .spaceOrControl: "spaceOrControl"
            case .notAbsolute: "notAbsolute"
            case .unsupportedScheme: "unsupportedScheme"
            case .noAuthority: "noAuthority"
            case .userInfo: "userInfo"
            case .unclosedIPv6Literal: "unclosedIPv6Literal"
            case .invalidIPv6: "invalidIPv6"
            case .junkAfterHost: "junkAfterHost"
            case .invalidPort: "invalidPort"
            case .noHost: "noHost"
            case .invalidHostName: "invalidHostName"
            case .hostCharacter: "hostCharacter"
            case .emptyLabel: "emptyLabel"
            case .invalidIPv4: "invalidIPv4"
            }
        }
        let urlCases = urlCheckTable.compactMap { row -> String? in
            guard case .failure(let refusal) = URLPolicy.validate(row.input) else { return nil }
            return name(refusal)
        }
        #expect(Set(urlCases).count == 16)

        func name(_ refusal: RequestHeaders.JobHeaderRefusal) -> String {
            switch refusal {
            case .tooMany: "tooMany"
            case .invalidName: "invalidName"
            case .notAllowed: "notAllowed"
            case .repeated: "repeated"
            case .invalidValue: "invalidValue"
            }
        }
        let headerCases = [
            RequestHeaders.checkJobHeaders((0...16).map { HTTPHeaderField(name: "X-\($0)", value: "v") }, allowed: []),
            RequestHeaders.checkJobHeaders([HTTPHeaderField(name: "a b", value: "")], allowed: []),
            RequestHeaders.checkJobHeaders([HTTPHeaderField(name: "Cookie", value: "")], allowed: []),
            RequestHeaders.checkJobHeaders(
                [HTTPHeaderField(name: "A", value: ""), HTTPHeaderField(name: "a", value: "")], allowed: ["a"]),
            RequestHeaders.checkJobHeaders([HTTPHeaderField(name: "A", value: "\n")], allowed: ["a"]),
        ].compactMap { $0.map(name) }
        #expect(Set(headerCases).count == 5)
    }

    @Test func acceptedHeadersAndURLsPass() {
        #expect(Self.urlError("HTTPS://Bücher.example:8443/a%20b?c#d") == nil)
        let body = #"{"id":"j1","url":"http://a/x.png","headers":{"Referer":"https://shop/","authorization":"a\tb"}}"#
        let delivery = Delivery(
            tag: 1, epoch: 1, redelivered: false, properties: AMQPProperties(), body: Array(body.utf8))
        #expect((try? Job.decode(delivery, allowedHeaders: ["referer", "authorization"]).get()) != nil)
    }

    /// The worker's inspector stops a download whose header proves too many pixels; the result is
    /// the same error the complete-body check gives.
    @Test func thePixelRejectionKeepsItsResult() throws {
        let info = ImageInfo(format: .png, width: 10_000, height: 10_000)
        let error = try #require(Worker.pixelLimitError(info, maxPixels: 50_000_000))
        #expect(error == JobError(.tooManyPixels, "the image needs 10000 × 10000 pixels, over fetch.max_pixels"))
        #expect(JobError(fetchFailure: .rejected(.tooManyPixels(width: 10_000, height: 10_000))) == error)
    }
}
