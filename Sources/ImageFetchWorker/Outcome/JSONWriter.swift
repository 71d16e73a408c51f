/// Writes compact JSON into a byte buffer by hand: the result encoder runs once per job, and
/// Foundation's encoder costs several times more for the same bytes.
///
/// Strings are copied in runs between the bytes that need escaping, and numbers are written as
/// digits straight into the buffer, without an intermediate `String`.
struct JSONWriter {
    private(set) var bytes: [UInt8] = []
    private var needsComma = false

    init(capacity: Int = 512) {
        bytes.reserveCapacity(capacity)
    }

    mutating func beginObject() {
        separate()
        bytes.append(UInt8(ascii: "{"))
        needsComma = false
    }

    mutating func endObject() {
        bytes.append(UInt8(ascii: "}"))
        needsComma = true
    }

    mutating func beginArray() {
        separate()
        bytes.append(UInt8(ascii: "["))
        needsComma = false
    }

    mutating func endArray() {
        bytes.append(UInt8(ascii: "]"))
        needsComma = true
    }

    mutating func key(_ name: StaticString) {
        separate()
        bytes.append(UInt8(ascii: "\""))
        append(name)
        bytes.append(UInt8(ascii: "\""))
        bytes.append(UInt8(ascii: ":"))
        needsComma = false
    }

    mutating func field(_ name: StaticString, _ value: String) {
        key(name)
        string(value)
    }

    /// A string field whose name is only known at run time (log metadata).
    mutating func field(named name: String, _ value: String) {
        string(name)
        bytes.append(UInt8(ascii: ":"))
        needsComma = false
        string(value)
    }

    mutating func field(_ name: StaticString, _ value: String?) {
        guard let value else { return }
        field(name, value)
    }

    mutating func field(_ name: StaticString, _ value: Int) {
        key(name)
        appendInteger(value)
        needsComma = true
    }

    mutating func field(_ name: StaticString, _ value: Int?) {
        guard let value else { return }
        field(name, value)
    }

    /// `"name":null`.
    mutating func null(_ name: StaticString) {
        key(name)
        append("null")
        needsComma = true
    }

    mutating func field(_ name: StaticString, _ value: Bool) {
        key(name)
        append(value ? "true" : "false")
        needsComma = true
    }

    /// Nothing when the value is nil.
    mutating func field(_ name: StaticString, _ value: Bool?) {
        guard let value else { return }
        field(name, value)
    }

    /// A number with up to three decimals (milliseconds).
    mutating func field(_ name: StaticString, milliseconds value: Double) {
        key(name)
        appendThousandths(value)
        needsComma = true
    }

    /// A number with up to three decimals (rates).
    mutating func field(_ name: StaticString, decimal value: Double) {
        field(name, milliseconds: value)
    }

    /// An RFC 3339 timestamp in UTC with milliseconds, `"2023-11-14T22:13:20.250Z"`.
    mutating func field(_ name: StaticString, timestamp secondsSince1970: Double) {
        key(name)
        bytes.append(UInt8(ascii: "\""))
        RFC3339.write(secondsSince1970, into: &bytes)
        bytes.append(UInt8(ascii: "\""))
        needsComma = true
    }

    mutating func string(_ value: String) {
        separate()
        bytes.append(UInt8(ascii: "\""))
        var value = value
        value.withUTF8 { appendEscaped($0) }
        bytes.append(UInt8(ascii: "\""))
        needsComma = true
    }

    // MARK: - Bytes

    private mutating func separate() {
        if needsComma { bytes.append(UInt8(ascii: ",")) }
        needsComma = false
    }

    private mutating func append(_ text: StaticString) {
        text.withUTF8Buffer { bytes.append(contentsOf: $0) }
    }

    /// Copies `utf8`, escaping `"`, `\`, the control characters and DEL; everything else (UTF-8
    /// beyond ASCII included) goes through as it is.
    private mutating func appendEscaped(_ utf8: UnsafeBufferPointer<UInt8>) {
        var runStart = 0
        for index in utf8.indices {
            let byte = utf8[index]
            guard byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") || byte == 0x7F else {
                continue
            }
            if runStart < index {
                bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart..<index]))
            }
            appendEscape(byte)
            runStart = index + 1
        }
        if runStart < utf8.count {
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart...]))
        }
    }

    private mutating func appendEscape(_ byte: UInt8) {
        bytes.append(UInt8(ascii: "\\"))
        switch byte {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"): bytes.append(byte)
        case 0x0A: bytes.append(UInt8(ascii: "n"))
        case 0x0D: bytes.append(UInt8(ascii: "r"))
        case 0x09: bytes.append(UInt8(ascii: "t"))
        default:
            append("u00")
            bytes.append(Self.hexDigit(byte >> 4))
            bytes.append(Self.hexDigit(byte & 0x0F))
        }
    }

    private static func hexDigit(_ nibble: UInt8) -> UInt8 {
        nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") + nibble - 10
    }

    private mutating func appendInteger(_ value: Int) {
        if value < 0 { bytes.append(UInt8(ascii: "-")) }
        Self.appendDigits(UInt64(value.magnitude), minimumWidth: 1, to: &bytes)
    }

    /// `value` rounded to thousandths, without trailing zeros in the fraction (`12.3456` →
    /// `12.346`, `2.5` → `2.5`, `3` → `3`). A value that is not finite, or too large to count in
    /// thousandths, is written as 0: JSON has no NaN, and no duration here comes near either.
    private mutating func appendThousandths(_ value: Double) {
        let scaled = (value * 1000).rounded()
        guard scaled.isFinite, abs(scaled) < 9.0e18 else {
            bytes.append(UInt8(ascii: "0"))
            return
        }
        let thousandths = Int(scaled)
        if thousandths < 0 { bytes.append(UInt8(ascii: "-")) }
        let magnitude = UInt64(thousandths.magnitude)
        Self.appendDigits(magnitude / 1000, minimumWidth: 1, to: &bytes)
        var fraction = magnitude % 1000
        guard fraction != 0 else { return }
        bytes.append(UInt8(ascii: "."))
        var divisor: UInt64 = 100
        while fraction != 0 {
            bytes.append(UInt8(ascii: "0") + UInt8(fraction / divisor))
            fraction %= divisor
            divisor /= 10
        }
    }

    /// The decimal digits of `value`, with leading zeros up to `minimumWidth` (at most 20).
    static func appendDigits(_ value: UInt64, minimumWidth: Int, to bytes: inout [UInt8]) {
        // 20 digits hold UInt64.max.
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { digits in
            var rest = value
            var start = digits.count
            repeat {
                start -= 1
                digits[start] = UInt8(ascii: "0") + UInt8(truncatingIfNeeded: rest % 10)
                rest /= 10
            } while rest != 0 || digits.count - start < min(minimumWidth, digits.count)
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: digits[start...]))
        }
    }
}
