import Foundation
import Testing

@testable import ImageFetchWorker

/// The pure parts of `publish --jsonl`: the line reader, the check of a line, the confirmed prefix
/// and the progress file's format.
@Suite struct JSONLPublishingTests {
    /// A reader over `text`, handed out `chunk` bytes at a time.
    private func lines(_ text: String, maxBytes: Int = 16, chunk: Int = 3) -> [LineReader.Line] {
        let bytes = Array(text.utf8)
        var offset = 0
        var reader = LineReader(maxBytes: maxBytes, chunkBytes: 16) { buffer in
            let count = min(chunk, buffer.count, bytes.count - offset)
            for index in 0..<count { buffer[index] = bytes[offset + index] }
            offset += count
            return count
        }
        var result: [LineReader.Line] = []
        while let line = reader.next() { result.append(line) }
        return result
    }

    @Test func readsLinesAcrossChunksWithCRLFAndNoFinalNewline() {
        for chunk in [1, 2, 3, 7, 64] {
            let got = lines("ab\r\n\ncd\nlast", chunk: chunk)
            #expect(
                got == [
                    .text(number: 1, bytes: Array("ab".utf8)), .text(number: 2, bytes: []),
                    .text(number: 3, bytes: Array("cd".utf8)), .text(number: 4, bytes: Array("last".utf8)),
                ],
                "chunk \(chunk)")
        }
    }

    @Test func anOversizedLineIsSkippedWithItsNumberAndTheNextOnesStillRead() {
        let long = String(repeating: "x", count: 100)
        for chunk in [1, 5, 64] {
            let got = lines("ok\n\(long)\nafter\n\(long)", maxBytes: 16, chunk: chunk)
            #expect(
                got == [
                    .text(number: 1, bytes: Array("ok".utf8)), .oversized(number: 2, length: 100),
                    .text(number: 3, bytes: Array("after".utf8)), .oversized(number: 4, length: 100),
                ],
                "chunk \(chunk)")
        }
        // Exactly at the limit is fine, one byte over is not.
        #expect(
            lines(String(repeating: "y", count: 16) + "\r\n", maxBytes: 16)
                == [.text(number: 1, bytes: Array(String(repeating: "y", count: 16).utf8))])
        #expect(lines(String(repeating: "y", count: 17), maxBytes: 16) == [.oversized(number: 1, length: 17)])
    }

    /// Failed before the fix: the bytes read before a failed read came out as a last line, so a
    /// job cut by an I/O error was reported invalid, counted done, and skipped by `--resume`.
    @Test func aReadErrorEndsTheStreamWithoutThePartialLine() {
        var chunks = [Array("one\ntw".utf8)]
        var reader = LineReader(maxBytes: 64, chunkBytes: 16) { buffer in
            guard let chunk = chunks.popLast() else {
                errno = EIO
                return -1
            }
            for (index, byte) in chunk.enumerated() { buffer[index] = byte }
            return chunk.count
        }
        #expect(reader.next() == .text(number: 1, bytes: Array("one".utf8)))
        #expect(reader.next() == nil)
        #expect(reader.readError == EIO)
        #expect(reader.linesRead == 1)
    }

    @Test func aLineIsCheckedAsTheWorkerChecksJobs() {
        func check(_ line: String, allowed: Set<String> = []) -> JobLineCheck.Verdict {
            JobLineCheck.check(Array(line.utf8), allowedHeaders: allowed, freshID: "fresh")
        }
        #expect(check(#"{"id":"a","url":"https://example.com/a.png"}"#) == .job(messageID: nil))
        #expect(check(#"{"url":"https://example.com/a.png","key":"k"}"#) == .job(messageID: "fresh"))
        #expect(check(" \t") == .blank)
        #expect(check("") == .blank)
        func code(_ verdict: JobLineCheck.Verdict) -> String? {
            if case .invalid(let error) = verdict { return error.code.rawValue }
            return nil
        }
        #expect(code(check("{not json")) == "invalid_job")
        #expect(code(check(#"{"id":"a"}"#)) == "invalid_job")
        #expect(code(check(#"{"id":"a","url":"ftp://example.com/a"}"#)) == "unsupported_scheme")
        #expect(code(check(#"{"id":"a","url":"http://us:pw@example.com/a"}"#)) == "invalid_url")
        // fetch.job_headers decides, as in the worker.
        let withHeader = #"{"url":"https://example.com/a","headers":{"Referer":"https://example.com/"}}"#
        #expect(code(check(withHeader)) == "invalid_job")
        #expect(check(withHeader, allowed: ["referer"]) == .job(messageID: "fresh"))
    }

    @Test func thePrefixMovesOnlyOverConfirmedOrPassedLines() {
        var prefix = ConfirmedPrefix()
        prefix.sent(1)
        prefix.passed(2)
        prefix.sent(3)
        prefix.sent(4)
        #expect(prefix.through == 0)
        prefix.settled(3, confirmed: true)
        #expect(prefix.through == 0)
        prefix.settled(1, confirmed: true)
        #expect(prefix.through == 3)
        prefix.passed(5)
        prefix.settled(4, confirmed: true)
        #expect(prefix.through == 5)
        prefix.passed(6)
        #expect(prefix.through == 6)
        #expect(prefix.pendingCount == 0)
    }

    @Test func anUnconfirmedLineFreezesThePrefixBelowIt() {
        var prefix = ConfirmedPrefix(after: 10)
        prefix.sent(11)
        prefix.sent(12)
        prefix.sent(13)
        prefix.settled(11, confirmed: true)
        prefix.settled(12, confirmed: false)
        prefix.settled(13, confirmed: true)
        prefix.passed(14)
        #expect(prefix.through == 11)
        #expect(prefix.isStalled)
    }

    @Test func manyOutOfOrderConfirmsEndAtTheLastLine() {
        var prefix = ConfirmedPrefix()
        let count = 20_000
        for line in 1...count { line % 7 == 0 ? prefix.passed(line) : prefix.sent(line) }
        for line in (1...count).reversed() where line % 7 != 0 { prefix.settled(line, confirmed: true) }
        #expect(prefix.through == count)
        #expect(prefix.pendingCount == 0)
    }

    @Test func theProgressFileRoundTripsAndRefusesOtherText() throws {
        #expect(PublishProgress.decode(PublishProgress.encode(confirmedThrough: 1234)) == 1234)
        #expect(PublishProgress.decode("{\"confirmed_through_line\":-1}") == nil)
        #expect(PublishProgress.decode("{\"confirmed_through_line\":1.5}") == nil)
        #expect(PublishProgress.decode("12") == nil)
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("progress-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        #expect(throws: PublishProgress.Problem.missing(path: path)) { try PublishProgress.read(path) }
        try PublishProgress.write(7, to: path)
        try PublishProgress.write(9, to: path)
        #expect(try PublishProgress.read(path) == 9)
        #expect(!FileManager.default.fileExists(atPath: path + ".tmp"))
    }
}
