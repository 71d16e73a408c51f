import Foundation

/// RFC 3339 timestamps in UTC with milliseconds (`2023-11-14T22:13:20.250Z`): a result carries
/// one, and so does each JSON log line.
///
/// Foundation's ISO 8601 format style writes them. A hand-written formatter (gmtime_r and digits)
/// saved about 170 ns per call, which callgrind could not tell from noise end to end
/// (docs/benchmarks.md, "Fast paths"), so it went.
package enum RFC3339 {
    private static let style = Date.ISO8601FormatStyle(includingFractionalSeconds: true)

    /// `secondsSince1970` as a timestamp; the milliseconds are truncated, not rounded. A time that
    /// is not finite, or further than about three million years from 1970, is written as the
    /// epoch: no clock gives one.
    package static func format(_ secondsSince1970: Double) -> String {
        let scaled = (secondsSince1970 * 1000).rounded(.down)
        let millis = scaled.isFinite && abs(scaled) < 1e17 ? scaled : 0
        // Half a millisecond more: Date keeps its time from 2001 in a Double, and the style
        // truncates, so a whole millisecond could come out one lower.
        return Date(timeIntervalSince1970: (millis + 0.5) / 1000).formatted(style)
    }

    /// The current time.
    package static func now() -> String {
        format(Date().timeIntervalSince1970)
    }

    /// Appends the timestamp's bytes (no quotes).
    static func write(_ secondsSince1970: Double, into bytes: inout [UInt8]) {
        bytes.append(contentsOf: format(secondsSince1970).utf8)
    }
}
