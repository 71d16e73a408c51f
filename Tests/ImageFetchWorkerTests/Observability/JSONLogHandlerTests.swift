import Foundation
import ImageFetchWorker
import Logging
import Synchronization
import Testing

/// `log.format=json`: one valid JSON object a line, with the stable fields.
struct JSONLogHandlerTests {
    /// Collects the lines a handler writes.
    final class Lines: Sendable {
        private let lines = Mutex<[[UInt8]]>([])
        func append(_ line: [UInt8]) { lines.withLock { $0.append(line) } }
        var all: [[UInt8]] { lines.withLock { $0 } }
    }

    static func logger(_ lines: Lines, level: Logger.Level = .info) -> Logger {
        var logger = Logger(label: "image-fetch-worker") { label in
            JSONLogHandler(label: label) { lines.append($0) }
        }
        logger.logLevel = level
        return logger
    }

    @Test func aJobLineIsOneJSONObjectWithTheStableFields() throws {
        let lines = Lines()
        let logger = Self.logger(lines)
        logger.info(
            "job finished",
            metadata: [
                "job_id": "a\"b\\c\nd", "url_host": "img.example", "outcome": "failed", "duration_ms": "12",
                "attempt": "1", "error": "http_error",
            ])
        let line = try #require(lines.all.first)
        #expect(lines.all.count == 1)
        #expect(line.last == UInt8(ascii: "\n"))
        #expect(line.dropLast().allSatisfy { $0 != UInt8(ascii: "\n") }, "exactly one line")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(line)) as? [String: Any])
        #expect(object["level"] as? String == "info")
        #expect(object["message"] as? String == "job finished")
        #expect(object["label"] as? String == "image-fetch-worker")
        #expect(object["job_id"] as? String == "a\"b\\c\nd")
        #expect(object["url_host"] as? String == "img.example")
        #expect(object["outcome"] as? String == "failed")
        #expect(object["duration_ms"] as? String == "12")
        let time = try #require(object["time"] as? String)
        #expect(
            time.range(
                of: #"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$"#,
                options: .regularExpression) != nil, "RFC 3339: \(time)")
    }

    @Test func controlCharactersAndUnicodeStayValidAndMetadataCannotReplaceFixedFields() throws {
        let lines = Lines()
        let logger = Self.logger(lines, level: .debug)
        logger.debug(
            "tab\there \u{01} bell \u{7F} é ✓ \r end",
            metadata: [
                "message": "spoof", "level": "critical",
                "list": ["a", "b"], "nested": ["k": "v"],
            ])
        let line = try #require(lines.all.first)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(line)) as? [String: Any])
        #expect(object["message"] as? String == "tab\there \u{01} bell \u{7F} é ✓ \r end")
        #expect(object["level"] as? String == "debug")
        #expect(object["list"] is String)
        #expect(object["nested"] is String)
    }

    @Test func linesBelowTheLevelAreNotWritten() {
        let lines = Lines()
        let logger = Self.logger(lines, level: .warning)
        logger.info("quiet")
        logger.warning("loud")
        #expect(lines.all.count == 1)
    }
}
