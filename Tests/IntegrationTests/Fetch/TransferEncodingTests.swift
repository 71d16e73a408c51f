import Foundation
import ImageFetchWorker
import Testing

/// Transfer codings other than `chunked`, which no browser asks for and few servers send.
/// libcurl 7.88 decodes them unasked and then ignores the `Content-Length` (RFC 9112, 6.3): the
/// engine took the length anyway, so a whole body was `truncated`; and libcurl's decoders write
/// into its pause buffer (up to 64 MiB) past `fetch.max_bytes` while a transfer waits for the body
/// backlog.
@Suite("FetchEngine: transfer codings other than chunked")
struct TransferEncodingTests {
    /// A body in any latin-1 string the raw origin sends as it is.
    static func latin1(_ bytes: [UInt8]) -> String { String(bytes.map { Character(Unicode.Scalar($0)) }) }

    /// "hello", gzip-wrapped in one stored deflate block.
    static let gzipHello: [UInt8] =
        [0x1F, 0x8B, 0x08, 0x00, 0, 0, 0, 0, 0x00, 0xFF]  // header
        + [0x01, 0x05, 0x00, 0xFA, 0xFF] + Array("hello".utf8)  // a final stored block
        + [0x86, 0xA6, 0x10, 0x36, 0x05, 0x00, 0x00, 0x00]  // CRC-32, length

    @Test func aLengthBesideAnotherCodingIsNotTrusted() async throws {
        let body = [UInt8](repeating: UInt8(ascii: "x"), count: 3000)
        let origin = try RawOrigin(responses: [
            "/identity": "HTTP/1.1 200 OK\r\nTransfer-Encoding: identity\r\nContent-Length: 1000000\r\n"
                + "Connection: close\r\n\r\n" + Self.latin1(body)
        ])
        defer { origin.stop() }
        let engine = try FetchEngine(configuration: FetchEngineTests.configuration(), addressPolicy: nil)
        defer { engine.shutdown() }
        let response = await FetchEngineTests.fetch(engine, origin.url("/identity"))
        #expect(response.failure == nil, "\(String(describing: response.failure))")
        let whole = response.body == body
        #expect(whole, "\(response.body.count) bytes")
    }

    @Test func aCodedBodyComesAsSentNotDecoded() async throws {
        let origin = try RawOrigin(responses: [
            "/gzip": "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nConnection: close\r\n\r\n"
                + Self.latin1(Self.gzipHello)
        ])
        defer { origin.stop() }
        let engine = try FetchEngine(configuration: FetchEngineTests.configuration(), addressPolicy: nil)
        defer { engine.shutdown() }
        let response = await FetchEngineTests.fetch(engine, origin.url("/gzip"))
        #expect(response.failure == nil, "\(String(describing: response.failure))")
        #expect(response.body == Self.gzipHello, "\(response.body.count) bytes: decoded")
    }
}
