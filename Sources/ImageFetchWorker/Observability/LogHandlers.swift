import Foundation
import Logging
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Writes one JSON object per line to standard error: `time` (RFC 3339), `level`, `message`,
/// `label`, and the metadata flattened as string fields (`job_id`, `url_host`, `outcome`,
/// `duration_ms`, …). Metadata cannot replace the four fixed fields.
package struct JSONLogHandler: LogHandler {
    /// Metadata added to every line.
    package var metadata: Logger.Metadata = [:]
    /// The lowest level written.
    package var logLevel: Logger.Level = .info
    /// Metadata computed for each line (task-local context).
    package var metadataProvider: Logger.MetadataProvider?
    private let label: String
    private let output: @Sendable ([UInt8]) -> Void
    /// A handler that writes to standard error.
    package init(label: String) {
        self.init(label: label) { line in StandardError.write(line) }
    }

    /// A handler that hands each line, newline included, to `output` (tests, other sinks).
    package init(label: String, output: @escaping @Sendable ([UInt8]) -> Void) {
        self.label = label
        self.output = output
    }

    /// One metadata value.
    package subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    /// Writes one line.
    package func log(event: LogEvent) {
        var json = JSONWriter(capacity: 256)
        json.beginObject()
        json.field("time", RFC3339.now())
        json.field("level", event.level.rawValue)
        json.field("message", "\(event.message)")
        json.field("label", label)
        var merged = metadata
        if let provided = metadataProvider?.get() { merged.merge(provided) { _, new in new } }
        if let extra = event.metadata { merged.merge(extra) { _, new in new } }
        for key in merged.keys.sorted() where !["time", "level", "message", "label"].contains(key) {
            json.field(named: key, "\(merged[key]!)")
        }
        json.endObject()
        var line = json.takeBytes()
        line.append(UInt8(ascii: "\n"))
        output(line)
    }
}

/// Sets up swift-log from `log.*`.
package enum LoggingSetup {
    /// Bootstraps the global logging system once, from the configuration.
    package static func bootstrap(_ configuration: WorkerConfiguration.Log) {
        let level = Logger.Level(rawValue: configuration.level) ?? .info
        switch configuration.format {
        case .json:
            LoggingSystem.bootstrap { label in
                var handler = JSONLogHandler(label: label)
                handler.logLevel = level
                return handler
            }
        case .text:
            LoggingSystem.bootstrap { label in
                var handler = StreamLogHandler.standardError(label: label)
                handler.logLevel = level
                return handler
            }
        }
    }
}

/// Standard error for whole lines, from any thread. Not `FileHandle.write`, which traps on an
/// error: a log reader that went away (EPIPE) or a full disk must cost lines, not the process.
package enum StandardError {
    private static let lock = Mutex(())

    /// Writes `text` and drops what cannot be written.
    package static func write(_ text: String) {
        write(Array(text.utf8))
    }

    /// Writes `bytes` and drops what cannot be written. A line begun is finished if standard
    /// error frees up within a moment (a non-blocking pipe that is full), so that a dropped tail
    /// does not glue the next JSON line to a fragment.
    package static func write(_ bytes: [UInt8]) {
        lock.withLock { _ in
            bytes.withUnsafeBytes { buffer in
                var offset = 0
                var waits = 0
                while offset < buffer.count {
                    #if canImport(Glibc)
                    let written = Glibc.write(2, buffer.baseAddress! + offset, buffer.count - offset)
                    #else
                    let written = Darwin.write(2, buffer.baseAddress! + offset, buffer.count - offset)
                    #endif
                    if written > 0 {
                        offset += written
                        continue
                    }
                    let failure = errno
                    if written < 0, failure == EINTR { continue }
                    guard written < 0, failure == EAGAIN || failure == EWOULDBLOCK, offset > 0, waits < 10 else {
                        return
                    }
                    waits += 1
                    var descriptor = pollfd(fd: 2, events: Int16(POLLOUT), revents: 0)
                    _ = poll(&descriptor, 1, 100)
                }
            }
        }
    }
}
