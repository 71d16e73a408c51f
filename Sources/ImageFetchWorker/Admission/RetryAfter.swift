#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Reads a `Retry-After` header: delay-seconds or an HTTP date (RFC 9110 §10.2.3).
package enum RetryAfter {
    /// The delay in seconds, capped at `cap`; nil for a missing, negative or unreadable value, so
    /// that the caller falls back to its normal backoff. A date in the past is 0.
    ///
    /// - Parameter now: seconds since the Unix epoch, for a date.
    package static func seconds(_ value: String?, now: Double, cap: Double) -> Double? {
        guard let value else { return nil }
        let bytes = Array(value.utf8)
        guard !bytes.isEmpty, bytes.count <= 64 else { return nil }
        let trimmed = bytes.drop(while: { $0 == 0x20 || $0 == 0x09 }).reversed().drop(while: {
            $0 == 0x20 || $0 == 0x09
        }).reversed()
        guard !trimmed.isEmpty else { return nil }
        if trimmed.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) {
            // An enormous number is still a number: cap it rather than refuse it.
            var seconds = 0.0
            for digit in trimmed { seconds = min(seconds * 10 + Double(digit - UInt8(ascii: "0")), cap) }
            return min(seconds, cap)
        }
        guard let date = httpDate(String(decoding: trimmed, as: UTF8.self)) else { return nil }
        return min(max(date - now, 0), cap)
    }

    /// Seconds since the epoch of an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), or of the
    /// obsolete RFC 850 (`Sunday, 06-Nov-94 08:49:37 GMT`) and asctime (`Sun Nov  6 08:49:37 1994`)
    /// forms that RFC 9110 tells recipients to accept.
    static func httpDate(_ text: String) -> Double? {
        let tokens = text.split(whereSeparator: { $0 == " " || $0 == "," || $0 == "-" }).map(String.init)
        var day: Int?, month: Int?, year: Int?, clock: (Int, Int, Int)?
        for token in tokens.dropFirst() {  // the weekday
            if let index = months.firstIndex(of: token) {
                month = index
            } else if token.utf8.contains(UInt8(ascii: ":")) {
                let parts = token.split(separator: ":").compactMap { Int($0) }
                guard parts.count == 3, parts[0] < 24, parts[1] < 60, parts[2] <= 60 else { return nil }
                clock = (parts[0], parts[1], parts[2])
            } else if token == "GMT" {
                continue
            } else if let number = Int(token), number >= 0 {
                if day == nil, token.count <= 2 {
                    day = number
                } else if year == nil {
                    // RFC 850's two-digit year: RFC 9110 reads one more than 50 years ahead as past.
                    year = token.count == 2 ? (number < 70 ? 2000 + number : 1900 + number) : number
                } else {
                    return nil
                }
            } else {
                return nil
            }
        }
        guard let day, let month, let year, let clock, (1...31).contains(day), (1900...9999).contains(year) else {
            return nil
        }
        var parts = tm()
        parts.tm_year = Int32(year - 1900)
        parts.tm_mon = Int32(month)
        parts.tm_mday = Int32(day)
        parts.tm_hour = Int32(clock.0)
        parts.tm_min = Int32(clock.1)
        parts.tm_sec = Int32(clock.2)
        return Double(timegm(&parts))
    }

    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
}
