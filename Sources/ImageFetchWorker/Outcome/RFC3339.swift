#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// RFC 3339 timestamps in UTC with milliseconds (`2023-11-14T22:13:20.250Z`): a result carries
/// one, and so does each JSON log line.
///
/// Written by hand for memory, not speed: Foundation's `Date.ISO8601FormatStyle` builds a
/// Gregorian calendar in the current time zone, which loads ICU's time-zone data and code, about
/// 0.5–0.8 MB more resident at concurrency 1,024 (docs/benchmarks.md, "Fast paths").
package enum RFC3339 {
    /// `secondsSince1970` as a timestamp; the milliseconds are truncated, not rounded.
    package static func format(_ secondsSince1970: Double) -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(24)
        write(secondsSince1970, into: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The current time.
    package static func now() -> String {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return format(Double(spec.tv_sec) + Double(spec.tv_nsec) / 1e9)
    }

    /// Appends the timestamp's bytes (no quotes). A time that is not finite, or further than
    /// about three million years from 1970, is written as the epoch: no clock gives one.
    static func write(_ secondsSince1970: Double, into bytes: inout [UInt8]) {
        let scaled = (secondsSince1970 * 1000).rounded(.down)
        let totalMillis = scaled.isFinite && abs(scaled) < 1e17 ? Int64(scaled) : 0
        // Floor division, so that times before 1970 get a millisecond part in 0...999 too.
        let wholeSeconds = (totalMillis - (totalMillis < 0 ? 999 : 0)) / 1000
        var seconds = time_t(wholeSeconds)
        let millis = Int(totalMillis - wholeSeconds * 1000)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func digits(_ number: Int32, _ width: Int) {
            JSONWriter.appendDigits(UInt64(max(0, number)), minimumWidth: width, to: &bytes)
        }
        digits(parts.tm_year + 1900, 4)
        bytes.append(UInt8(ascii: "-"))
        digits(parts.tm_mon + 1, 2)
        bytes.append(UInt8(ascii: "-"))
        digits(parts.tm_mday, 2)
        bytes.append(UInt8(ascii: "T"))
        digits(parts.tm_hour, 2)
        bytes.append(UInt8(ascii: ":"))
        digits(parts.tm_min, 2)
        bytes.append(UInt8(ascii: ":"))
        digits(parts.tm_sec, 2)
        bytes.append(UInt8(ascii: "."))
        digits(Int32(millis), 3)
        bytes.append(UInt8(ascii: "Z"))
    }
}
