import Foundation
import Testing

@testable import ImageFetchWorker

@Suite struct JSONWriterTests {
    private func text(_ build: (inout JSONWriter) -> Void) -> String {
        var json = JSONWriter()
        build(&json)
        return String(decoding: json.takeBytes(), as: UTF8.self)
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
        let parsed = try #require(JSONSerialization.jsonObject(with: Data(json.takeBytes())) as? [String])
        #expect(parsed == [every])
    }

    /// The word-at-a-time scan against the plain rule, byte by byte: over strings of every length
    /// up to 40 with one byte to escape (or none) at each position, and over random strings.
    @Test func theWordScanFindsEveryByteToEscape() {
        func expected(_ text: String) -> String {
            var out = Array("\"".utf8)
            for byte in text.utf8 {
                switch byte {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"): out += [UInt8(ascii: "\\"), byte]
                case 0x0A: out += Array("\\n".utf8)
                case 0x0D: out += Array("\\r".utf8)
                case 0x09: out += Array("\\t".utf8)
                case 0..<0x20, 0x7F: out += Array(("\\u00" + String(byte, radix: 16).leftPadded(to: 2)).utf8)
                default: out.append(byte)
                }
            }
            return String(decoding: out + Array("\"".utf8), as: UTF8.self)
        }
        let special: [UInt8] = [0x00, 0x01, 0x09, 0x0A, 0x1F, 0x22, 0x5C, 0x7F]
        for length in 0...40 {
            let plain = String(repeating: "a", count: length)
            #expect(text { $0.string(plain) } == expected(plain))
            for position in 0..<length {
                for byte in special {
                    var bytes = Array(plain.utf8)
                    bytes[position] = byte
                    let value = String(decoding: bytes, as: UTF8.self)
                    #expect(text { $0.string(value) } == expected(value), "\(length) \(position) \(byte)")
                }
            }
        }
        // Bytes either side of the special ones, UTF-8 beyond ASCII, a small buffer that must grow.
        var generator = SystemRandomNumberGenerator()
        let alphabet: [Unicode.Scalar] = [
            "\u{0}", "\u{1f}", " ", "!", "\"", "#", "[", "\\", "]", "~", "\u{7f}", "\u{80}", "é", "✓", "🎉",
        ]
        for _ in 0..<2_000 {
            let length = Int.random(in: 0...70, using: &generator)
            var value = ""
            for _ in 0..<length { value.unicodeScalars.append(alphabet.randomElement(using: &generator)!) }
            var json = JSONWriter(capacity: 1)
            json.string(value)
            #expect(String(decoding: json.takeBytes(), as: UTF8.self) == expected(value))
        }
    }

    @Test func aBufferGrowsAsItFills() throws {
        var json = JSONWriter(capacity: 1)
        json.beginArray()
        for index in 0..<1_000 {
            json.beginObject()
            json.field("index", index)
            json.field("name", String(repeating: "x", count: index % 97))
            json.field("ms", milliseconds: Double(index) / 7)
            json.endObject()
        }
        json.endArray()
        let parsed = try #require(JSONSerialization.jsonObject(with: Data(json.takeBytes())) as? [[String: Any]])
        #expect(parsed.count == 1_000)
        #expect(parsed.last?["index"] as? Int == 999)
        #expect((parsed.last?["name"] as? String)?.count == 999 % 97)
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
        // The calendar arithmetic against the C library's, far either side of 1970, leap days and
        // century years included.
        var generator = SystemRandomNumberGenerator()
        let days =
            [-719_162, -141_428, -1, 0, 59, 10_956, 11_016, 47_541, 2_932_896]
            + (0..<2_000).map { _ in
                Int.random(in: -719_162...2_932_896, using: &generator)
            }
        for day in days {
            var t = time_t(day * 86_400 + 86_399)
            var parts = tm()
            gmtime_r(&t, &parts)
            let date = RFC3339.civilDate(daysSince1970: Int64(day))
            #expect(
                [date.year, date.month, date.day]
                    == [Int64(parts.tm_year) + 1900, Int64(parts.tm_mon) + 1, Int64(parts.tm_mday)], "\(day)")
        }
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        String(repeating: "0", count: max(0, width - count)) + self
    }
}
