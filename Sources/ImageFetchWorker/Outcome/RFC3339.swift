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
        String(unsafeUninitializedCapacity: maximumLength) { buffer in
            write(secondsSince1970, to: buffer.baseAddress!)
        }
    }

    /// The current time.
    package static func now() -> String {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return format(Double(spec.tv_sec) + Double(spec.tv_nsec) / 1e9)
    }

    /// What ``write(_:to:)`` writes at most: a year of up to 20 digits and 20 bytes more.
    static let maximumLength = 40

    /// Writes the timestamp's bytes (no quotes) at `start` and returns how many. A time that is not
    /// finite, or further than about three million years from 1970, is written as the epoch: no
    /// clock gives one. A year before 1 is written as 0000.
    static func write(_ secondsSince1970: Double, to start: UnsafeMutablePointer<UInt8>) -> Int {
        let scaled = (secondsSince1970 * 1000).rounded(.down)
        let totalMillis = scaled.isFinite && abs(scaled) < 1e17 ? Int64(scaled) : 0
        // Floor divisions, so that times before 1970 get parts in range too.
        let (days, millisOfDay) = floorDivision(totalMillis, 86_400_000)
        let date = civilDate(daysSince1970: days)
        var at = start
        func digits(_ number: Int64, _ width: Int, then separator: UInt8) {
            at += JSONWriter.writeDigits(UInt64(max(0, number)), minimumWidth: width, to: at)
            at.pointee = separator
            at += 1
        }
        digits(date.year, 4, then: UInt8(ascii: "-"))
        digits(date.month, 2, then: UInt8(ascii: "-"))
        digits(date.day, 2, then: UInt8(ascii: "T"))
        digits(millisOfDay / 3_600_000, 2, then: UInt8(ascii: ":"))
        digits(millisOfDay / 60_000 % 60, 2, then: UInt8(ascii: ":"))
        digits(millisOfDay / 1_000 % 60, 2, then: UInt8(ascii: "."))
        digits(millisOfDay % 1_000, 3, then: UInt8(ascii: "Z"))
        return at - start
    }

    private static func floorDivision(_ value: Int64, _ divisor: Int64) -> (quotient: Int64, remainder: Int64) {
        let quotient = (value - (value < 0 ? divisor - 1 : 0)) / divisor
        return (quotient, value - quotient * divisor)
    }

    /// The proleptic Gregorian date of a day counted from 1970-01-01, by arithmetic on 400-year
    /// eras (146,097 days each, counted from 0000-03-01 so that a leap day ends its year) instead
    /// of `gmtime_r`, which cost ten times as much.
    static func civilDate(daysSince1970 days: Int64) -> (year: Int64, month: Int64, day: Int64) {
        let (era, dayOfEra) = floorDivision(days + 719_468, 146_097)
        let yearOfEra = (dayOfEra - dayOfEra / 1_460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let shiftedMonth = (5 * dayOfYear + 2) / 153  // 0 is March
        let day = dayOfYear - (153 * shiftedMonth + 2) / 5 + 1
        let month = shiftedMonth < 10 ? shiftedMonth + 3 : shiftedMonth - 9
        return (400 * era + yearOfEra + (month <= 2 ? 1 : 0), month, day)
    }
}
