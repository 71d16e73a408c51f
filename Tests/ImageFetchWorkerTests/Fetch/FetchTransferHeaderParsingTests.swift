import Testing

@testable import ImageFetchWorker

/// The header-line readers of ``FetchTransfer`` on raw bytes, as libcurl hands them over.
@Suite struct FetchTransferHeaderParsingTests {
    static func value(_ line: String, _ name: [UInt8]) -> String? {
        Array(line.utf8).withUnsafeBytes { bytes in
            FetchTransfer.value(of: name, in: bytes).map { String(decoding: $0, as: UTF8.self) }
        }
    }

    @Test func aTransferEncodingOfAnyValueIsFound() {
        for line in ["Transfer-Encoding: chunked\r\n", "transfer-encoding:gzip\r\n", "Transfer-Encoding:\r\n"] {
            #expect(Self.value(line, FetchTransfer.transferEncodingPrefix) != nil, "\(line)")
        }
        #expect(Self.value("Transfer-Encodings: chunked\r\n", FetchTransfer.transferEncodingPrefix) == nil)
    }

    @Test func contentLengthsAreDecimalAndBounded() {
        #expect(Self.value("Content-Length: 12\r\n", FetchTransfer.contentLengthPrefix) == "12")
        for (text, expected) in [("12", Int64(12)), ("0", 0), ("999999999999999999", 999_999_999_999_999_999)] {
            let parsed = Array(text.utf8).withUnsafeBytes { FetchTransfer.parseLength($0[...]) }
            #expect(parsed == expected)
        }
        for text in ["", "-1", "1e3", "12 ", "1000000000000000000"] {
            #expect(Array(text.utf8).withUnsafeBytes { FetchTransfer.parseLength($0[...]) } == nil, "\(text)")
        }
    }
}
