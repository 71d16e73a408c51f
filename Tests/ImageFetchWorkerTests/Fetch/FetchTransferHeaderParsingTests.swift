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

    /// Only a `chunked` coding frames the body; libcurl reads any other to the close.
    @Test(arguments: [
        ("chunked", true), ("gzip, chunked", true), ("Chunked", true), (" gzip ,CHUNKED ", true),
        ("chunked;x=1", false), ("gzip, chunked\u{0B}", true), ("x, \rchunked", false),
        ("gzip", false), ("identity", false), ("", false), ("xchunked", false), ("chunked-ish", false),
    ])
    func chunkedIsAmongTheCodings(value: String, chunked: Bool) {
        let line = "Transfer-Encoding: \(value)\r\n"
        let found = Array(line.utf8).withUnsafeBytes { bytes in
            FetchTransfer.value(of: FetchTransfer.transferEncodingPrefix, in: bytes).map(FetchTransfer.namesChunked)
        }
        #expect(found == chunked)
    }

    /// As libcurl reads it (`" HTTP/%1d.%1d%c%3d%c"`): one space after the version, then the
    /// number after any whitespace.
    @Test func aStatusIsReadAsLibcurlReadsIt() {
        func status(_ line: String) -> Int { Array(line.utf8).withUnsafeBytes { FetchTransfer.parseStatus($0) } }
        #expect(status("HTTP/1.1 200 OK\r\n") == 200)
        #expect(status("HTTP/2 503 \r\n") == 503)
        #expect(status("HTTP/1.1 204\r\n") == 204)
        #expect(status("HTTP/1.1  200 OK\r\n") == 200)
        #expect(status("HTTP/1.1 \t429 Too Many\r\n") == 429)
        // HTTP/2 and /3 lines are read by `%d`: any width, a sign.
        #expect(status("HTTP/2 0200\r\n") == 200)
        #expect(status("HTTP/2 +200\r\n") == 200)
        #expect(status("HTTP/3  404 \r\n") == 404)
        #expect(status("HTTP/2 -200\r\n") == 0)
        for line in ["HTTP/1.1 20\r\n", "HTTP/1.1 2000 OK\r\n", "HTTP/1.1 +20 OK\r\n", "HTTP/1.1\r\n", "HTTP/1.1 \r\n"]
        {
            #expect(status(line) == 0, "\(line)")
        }
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
