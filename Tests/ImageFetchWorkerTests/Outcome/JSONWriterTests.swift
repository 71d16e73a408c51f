import Foundation
import Testing

@testable import ImageFetchWorker

@Suite struct JSONWriterTests {
    private func text(_ build: (inout JSONWriter) -> Void) -> String {
        var json = JSONWriter()
        build(&json)
        return String(decoding: json.bytes, as: UTF8.self)
    }

    @Test func stringsAreCopiedAndEscaped() throws {
        #expect(text { $0.string("") } == #""""#)
        #expect(text { $0.string("plain ascii") } == #""plain ascii""#)
        #expect(text { $0.string("a\"b\\c") } == #""a\"b\\c""#)
        #expect(text { $0.string("\n\r\t") } == #""\n\r\t""#)
        #expect(text { $0.string("\u{00}\u{01}\u{1f}\u{7f}") } == #""\u0000\u0001\u001f\u007f""#)
        #expect(text { $0.string("\"start and end\"") } == #""\"start and end\"""#)
        #expect(text { $0.string("größe ✓ 🎉") } == "\"größe ✓ 🎉\"")
        // Every byte value, read back by a real JSON parser.
        let every = String(decoding: (1...127).map { UInt8($0) }, as: UTF8.self) + "é"
        var json = JSONWriter()
        json.beginArray()
        json.string(every)
        json.endArray()
        let parsed = try #require(JSONSerialization.jsonObject(with: Data(json.bytes)) as? [String])
        #expect(parsed == [every])
    }

    @Test func integers() {
        #expect(text { $0.field("n", 0) } == #""n":0"#)
        #expect(text { $0.field("n", 7) } == #""n":7"#)
        #expect(text { $0.field("n", 1_234_567_890) } == #""n":1234567890"#)
        #expect(text { $0.field("n", -42) } == #""n":-42"#)
        #expect(text { $0.field("n", Int.max) } == "\"n\":\(Int.max)")
        #expect(text { $0.field("n", Int.min) } == "\"n\":\(Int.min)")
    }

    @Test func thousandthsWithoutTrailingZeros() {
        let cases: [(Double, String)] = [
            (0, "0"), (3, "3"), (2.5, "2.5"), (12.3456, "12.346"), (10.125, "10.125"),
            (0.001, "0.001"), (0.01, "0.01"), (0.1049, "0.105"), (1.0004, "1"), (1.9996, "2"),
            (-1.5, "-1.5"), (-0.5, "-0.5"), (-0.0001, "0"), (123_456.7, "123456.7"),
            (.nan, "0"), (.infinity, "0"), (1e300, "0"),
        ]
        for (value, expected) in cases {
            #expect(text { $0.field("x", milliseconds: value) } == "\"x\":\(expected)", "\(value)")
        }
    }

    @Test func literalsAndSeparators() {
        let written = text {
            $0.beginObject()
            $0.field("a", true)
            $0.field("b", false)
            $0.null("c")
            $0.field("d", nil as String?)
            $0.field("e", nil as Int?)
            $0.key("f")
            $0.beginArray()
            $0.string("x")
            $0.string("y")
            $0.endArray()
            $0.field(named: "k\"ey", "v")
            $0.endObject()
        }
        #expect(written == #"{"a":true,"b":false,"c":null,"f":["x","y"],"k\"ey":"v"}"#)
    }

    @Test func timestamps() {
        #expect(text { $0.field("t", timestamp: 1_700_000_000.25) } == #""t":"2023-11-14T22:13:20.250Z""#)
        #expect(RFC3339.format(0) == "1970-01-01T00:00:00.000Z")
        #expect(RFC3339.format(0.0019) == "1970-01-01T00:00:00.001Z")
        #expect(RFC3339.format(951_782_400.999) == "2000-02-29T00:00:00.999Z")
        #expect(RFC3339.format(253_402_300_799) == "9999-12-31T23:59:59.000Z")
        #expect(RFC3339.format(-1.5) == "1969-12-31T23:59:58.500Z")
        #expect(RFC3339.format(.nan) == "1970-01-01T00:00:00.000Z")
        // The same as the C library's own formatting for a run of times.
        var seconds = 1_000_000_007
        for _ in 0..<50 {
            var t = time_t(seconds)
            var parts = tm()
            gmtime_r(&t, &parts)
            let expected = String(
                format: "%04d-%02d-%02dT%02d:%02d:%02d.123Z", parts.tm_year + 1900, parts.tm_mon + 1, parts.tm_mday,
                parts.tm_hour, parts.tm_min, parts.tm_sec)
            #expect(RFC3339.format(Double(seconds) + 0.1234) == expected)
            seconds += 86_400 * 37 + 3_611
        }
    }
}
