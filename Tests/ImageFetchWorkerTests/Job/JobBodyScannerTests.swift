import Testing

@testable import ImageFetchWorker

@Suite struct JobBodyScannerTests {
    private func scan(_ text: String) -> JobBodyScanner.Fields? {
        JobBodyScanner.scan(Array(text.utf8))
    }

    @Test func readsTheCommonShapes() {
        #expect(
            scan(#"{"id":"42","url":"https://example.com/a.png"}"#)
                == .init(id: "42", url: "https://example.com/a.png", key: nil))
        #expect(
            scan(#" { "id" : 7 , "url" : "http://h/x" , "key" : "a/b.png" , "extra" : true } "#)
                == .init(id: "7", url: "http://h/x", key: "a/b.png"))
        #expect(
            scan(#"{"id":-12,"url":"u","key":null,"n":0,"f":false,"z":null}"#)
                == .init(id: "-12", url: "u", key: nil))
        #expect(scan(#"{"url":"http://h/é"}"#) == .init(id: nil, url: "http://h/é", key: nil))
        #expect(scan("{}") == .init())
    }

    @Test func leavesEverythingElseToTheDecoder() {
        for body in [
            #"{"id":"a\/b","url":"u"}"#,  // an escape
            #"{"id":"1","url":"u","meta":{}}"#,  // a nested value
            #"{"id":"1","url":"u","list":[]}"#,
            #"{"id":1.5,"url":"u"}"#,  // a fraction
            #"{"id":1e3,"url":"u"}"#,
            #"{"id":01,"url":"u"}"#,  // a leading zero
            #"{"id":99999999999999999999,"url":"u"}"#,
            #"{"id":"1","id":"2","url":"u"}"#,  // a repeated key
            #"{"id":true,"url":"u"}"#,  // schema mismatches
            #"{"id":"1","url":5}"#,
            #"{"id":"1","key":false}"#,
            #"["id"]"#, "", "   ", "{", #"{"id":"1""#, #"{"id":"1",}"#, #"{"id":"1"} x"#, #"{"id":tru}"#,
            "{\"id\":\"a\u{1}b\"}",  // a control character
        ] {
            #expect(scan(body) == nil, "\(body)")
        }
        #expect(
            JobBodyScanner.scan([0x7B, 0x22, 0x69, 0x64, 0x22, 0x3A, 0x22, 0xFF, 0x22, 0x7D]) == nil, "invalid UTF-8")
        #expect(
            JobBodyScanner.scan([0x7B, 0x22, 0x69, 0x64, 0x22, 0x3A, 0x22, 0x61, 0xC3, 0x22, 0x7D]) == nil, "cut UTF-8")
        // Many keys go to the decoder, which reads them in linear time.
        let many = "{" + (0..<100_000).map { "\"k\($0)\":0" }.joined(separator: ",") + ",\"url\":\"u\"}"
        #expect(scan(many) == nil)
        #expect(Job.decodeBody(Array(many.utf8)) == .success(.init(id: nil, url: "u", key: nil)))
    }

    /// Random bodies built from JSON pieces, good and bad: wherever the scanner answers, the full
    /// decoder must give the same fields; and it must answer for the plain ones.
    @Test func agreesWithTheDecoderOnRandomBodies() {
        var random = SplitMix64(state: 0x5CA9)
        let keys = ["id", "url", "key", "x", "meta", "id", "etag", "last_modified", "sha256"]
        let values = [
            #""42""#, #""https://example.com/a.png""#, #""a/b c""#, #""é✓""#, #""""#, #""a\"b""#, #""a\/b""#,
            #""\u00e9""#, "7", "-3", "0", "007", "1.5", "2e3", "true", "false", "null", "{}", #"{"a":1}"#, "[1,2]",
            "9223372036854775807", "9223372036854775808", "-9223372036854775808", "-0", "tru", #""unterminated"#,
        ]
        let spaces = ["", " ", "\n", "\t "]
        var answered = 0
        for _ in 0..<5_000 {
            var text = spaces.randomElement(using: &random)! + "{"
            let count = Int.random(in: 0...4, using: &random)
            for index in 0..<count {
                if index > 0 { text += "," + spaces.randomElement(using: &random)! }
                text +=
                    "\"\(keys.randomElement(using: &random)!)\"" + spaces.randomElement(using: &random)! + ":"
                    + spaces.randomElement(using: &random)! + values.randomElement(using: &random)!
            }
            text += spaces.randomElement(using: &random)! + "}"
            // Sometimes damage it.
            var bytes = Array(text.utf8)
            switch Int.random(in: 0..<10, using: &random) {
            case 0 where !bytes.isEmpty: bytes.removeLast(Int.random(in: 1...bytes.count, using: &random))
            case 1:
                bytes.insert(
                    UInt8.random(in: 0...255, using: &random), at: Int.random(in: 0...bytes.count, using: &random))
            default: break
            }
            guard let scanned = JobBodyScanner.scan(bytes) else { continue }
            answered += 1
            switch Job.decodeBody(bytes) {
            case .success(let decoded):
                #expect(scanned == decoded, "\(String(decoding: bytes, as: UTF8.self))")
            case .failure(let error):
                Issue.record(
                    "the scanner answered \(scanned) where the decoder failed (\(error.message)): \(String(decoding: bytes, as: UTF8.self))"
                )
            }
        }
        #expect(answered > 500, "the scanner should answer for the plain bodies")
    }
}
