/// Writes compact JSON into a byte buffer by hand: the result encoder runs once per job, and
/// Foundation's encoder costs several times more for the same bytes.
///
/// The buffer is allocated at the expected size and written through a pointer, one bounds check
/// per piece: appending to an array byte by byte checked uniqueness and capacity at every byte,
/// which made a result's 700 bytes cost 16,000 instructions. Strings are scanned eight bytes at a
/// time for the bytes that need escaping and copied whole when there are none, the usual case.
struct JSONWriter {
    /// `storage[0..<count]` is written; the rest is room, zero-filled.
    private var storage: [UInt8]
    private var count = 0
    private var needsComma = false

    init(capacity: Int = 512) {
        storage = [UInt8](repeating: 0, count: max(capacity, 64))
    }

    /// The JSON written, without the spare room.
    consuming func takeBytes() -> [UInt8] {
        storage.removeLast(storage.count - count)
        return storage
    }

    mutating func beginObject() {
        punctuate(UInt8(ascii: "{"))
    }

    mutating func endObject() {
        close(UInt8(ascii: "}"))
    }

    mutating func beginArray() {
        punctuate(UInt8(ascii: "["))
    }

    mutating func endArray() {
        close(UInt8(ascii: "]"))
    }

    mutating func key(_ name: StaticString) {
        name.withUTF8Buffer { writeKey($0) }
    }

    mutating func field(_ name: StaticString, _ value: String) {
        key(name)
        string(value)
    }

    /// A string field whose name is only known at run time (log metadata).
    mutating func field(named name: String, _ value: String) {
        string(name)
        writeExactly(1) { $0[0] = UInt8(ascii: ":") }
        needsComma = false
        string(value)
    }

    mutating func field(_ name: StaticString, _ value: String?) {
        guard let value else { return }
        field(name, value)
    }

    mutating func field(_ name: StaticString, _ value: Int) {
        key(name)
        write(20) { Self.writeInteger(value, to: $0) }
        needsComma = true
    }

    mutating func field(_ name: StaticString, _ value: Int?) {
        guard let value else { return }
        field(name, value)
    }

    /// `"name":null`.
    mutating func null(_ name: StaticString) {
        key(name)
        literal("null")
    }

    mutating func field(_ name: StaticString, _ value: Bool) {
        key(name)
        literal(value ? "true" : "false")
    }

    /// Nothing when the value is nil.
    mutating func field(_ name: StaticString, _ value: Bool?) {
        guard let value else { return }
        field(name, value)
    }

    /// A number with up to three decimals (milliseconds).
    mutating func field(_ name: StaticString, milliseconds value: Double) {
        key(name)
        write(24) { Self.writeThousandths(value, to: $0) }
        needsComma = true
    }

    /// A number with up to three decimals (rates).
    mutating func field(_ name: StaticString, decimal value: Double) {
        field(name, milliseconds: value)
    }

    /// An RFC 3339 timestamp in UTC with milliseconds, `"2023-11-14T22:13:20.250Z"`.
    mutating func field(_ name: StaticString, timestamp secondsSince1970: Double) {
        key(name)
        write(RFC3339.maximumLength + 2) { start in
            start[0] = UInt8(ascii: "\"")
            let written = RFC3339.write(secondsSince1970, to: start + 1)
            start[written + 1] = UInt8(ascii: "\"")
            return written + 2
        }
        needsComma = true
    }

    mutating func string(_ value: String) {
        var value = value
        value.withUTF8 { writeString($0) }
        needsComma = true
    }

    // MARK: - Bytes

    /// Runs `body` on room for at least `maximum` bytes at the end; it returns how many it wrote.
    @inline(__always)
    private mutating func write(_ maximum: Int, _ body: (UnsafeMutablePointer<UInt8>) -> Int) {
        if storage.count - count < maximum { grow(toHold: maximum) }
        let start = count
        count += storage.withUnsafeMutableBufferPointer { body($0.baseAddress! + start) }
    }

    @inline(__always)
    private mutating func writeExactly(_ exactly: Int, _ body: (UnsafeMutablePointer<UInt8>) -> Void) {
        write(exactly) { (start: UnsafeMutablePointer<UInt8>) -> Int in
            body(start)
            return exactly
        }
    }

    @inline(never)
    private mutating func grow(toHold more: Int) {
        storage.append(contentsOf: repeatElement(0, count: max(storage.count, more)))
    }

    /// A comma if one is due, then `byte`, which opens something.
    private mutating func punctuate(_ byte: UInt8) {
        let comma = needsComma
        write(2) { start -> Int in Self.open(byte, after: comma, at: start) - start }
        needsComma = false
    }

    /// Writes a comma when `comma`, then `byte`; returns where the next byte goes.
    @inline(__always)
    private static func open(
        _ byte: UInt8, after comma: Bool, at start: UnsafeMutablePointer<UInt8>
    ) -> UnsafeMutablePointer<UInt8> {
        var at = start
        if comma {
            at.pointee = UInt8(ascii: ",")
            at += 1
        }
        at.pointee = byte
        return at + 1
    }

    private mutating func close(_ byte: UInt8) {
        writeExactly(1) { $0[0] = byte }
        needsComma = true
    }

    private mutating func literal(_ text: StaticString) {
        text.withUTF8Buffer { literal in
            writeExactly(literal.count) { $0.update(from: literal.baseAddress!, count: literal.count) }
        }
        needsComma = true
    }

    private mutating func writeKey(_ name: UnsafeBufferPointer<UInt8>) {
        let comma = needsComma
        write(name.count + 4) { start -> Int in
            var at = Self.open(UInt8(ascii: "\""), after: comma, at: start)
            if let base = name.baseAddress { at.update(from: base, count: name.count) }
            at += name.count
            at[0] = UInt8(ascii: "\"")
            at[1] = UInt8(ascii: ":")
            return at + 2 - start
        }
        needsComma = false
    }

    /// `utf8` in quotes, after a comma if one is due, escaping `"`, `\`, the control characters and
    /// DEL; everything else (UTF-8 beyond ASCII included) goes through as it is.
    private mutating func writeString(_ utf8: UnsafeBufferPointer<UInt8>) {
        let comma = needsComma
        let clean = Self.cleanPrefix(utf8)
        // Each byte from the first one that needs escaping on may take six (`\u001f`).
        write(3 + clean + (utf8.count - clean) * 6) { start -> Int in
            var at = Self.open(UInt8(ascii: "\""), after: comma, at: start)
            if let base = utf8.baseAddress { at.update(from: base, count: clean) }
            at += clean
            for byte in utf8[clean...] {
                at = Self.writeEscaped(byte, to: at)
            }
            at.pointee = UInt8(ascii: "\"")
            return at + 1 - start
        }
    }

    /// How many bytes at the start of `utf8` go through as they are: a whole word of eight at a
    /// time while none of them is below 0x20, `"`, `\` or DEL (the exact SWAR tests, so a word
    /// passes only when each of its bytes would), then byte by byte up to the first that does not.
    static func cleanPrefix(_ utf8: UnsafeBufferPointer<UInt8>) -> Int {
        guard let base = UnsafeRawPointer(utf8.baseAddress) else { return 0 }
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highs: UInt64 = 0x8080_8080_8080_8080
        var index = 0
        while index + 8 <= utf8.count {
            let word = base.loadUnaligned(fromByteOffset: index, as: UInt64.self)
            // A byte below 0x20 (bytes of 0x80 and up, UTF-8, never count: `~word` clears their
            // high bit).
            let control = (word &- ones &* 0x20) & ~word & highs
            func hasByte(_ byte: UInt64) -> UInt64 {
                let matched = word ^ (ones &* byte)
                return (matched &- ones) & ~matched & highs
            }
            guard control | hasByte(0x22) | hasByte(0x5C) | hasByte(0x7F) == 0 else { break }
            index += 8
        }
        while index < utf8.count, !needsEscape(utf8[index]) {
            index += 1
        }
        return index
    }

    @inline(__always)
    private static func needsEscape(_ byte: UInt8) -> Bool {
        byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") || byte == 0x7F
    }

    /// `byte` as it goes into a JSON string, escaped if it must be.
    private static func writeEscaped(_ byte: UInt8, to at: UnsafeMutablePointer<UInt8>) -> UnsafeMutablePointer<UInt8> {
        guard needsEscape(byte) else {
            at.pointee = byte
            return at + 1
        }
        at[0] = UInt8(ascii: "\\")
        switch byte {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"): at[1] = byte
        case 0x0A: at[1] = UInt8(ascii: "n")
        case 0x0D: at[1] = UInt8(ascii: "r")
        case 0x09: at[1] = UInt8(ascii: "t")
        default:
            at[1] = UInt8(ascii: "u")
            at[2] = UInt8(ascii: "0")
            at[3] = UInt8(ascii: "0")
            at[4] = hexDigit(byte >> 4)
            at[5] = hexDigit(byte & 0x0F)
            return at + 6
        }
        return at + 2
    }

    private static func hexDigit(_ nibble: UInt8) -> UInt8 {
        nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") + nibble - 10
    }

    /// At most 20 bytes.
    private static func writeInteger(_ value: Int, to start: UnsafeMutablePointer<UInt8>) -> Int {
        var at = start
        if value < 0 {
            at.pointee = UInt8(ascii: "-")
            at += 1
        }
        return at - start + writeDigits(UInt64(value.magnitude), minimumWidth: 1, to: at)
    }

    /// `value` rounded to thousandths, without trailing zeros in the fraction (`12.3456` →
    /// `12.346`, `2.5` → `2.5`, `3` → `3`); at most 24 bytes. A value that is not finite, or too
    /// large to count in thousandths, is written as 0: JSON has no NaN, and no duration here comes
    /// near either.
    private static func writeThousandths(_ value: Double, to start: UnsafeMutablePointer<UInt8>) -> Int {
        let scaled = (value * 1000).rounded()
        guard scaled.isFinite, abs(scaled) < 9.0e18 else {
            start.pointee = UInt8(ascii: "0")
            return 1
        }
        let thousandths = Int(scaled)
        var at = start
        if thousandths < 0 {
            at.pointee = UInt8(ascii: "-")
            at += 1
        }
        let magnitude = UInt64(thousandths.magnitude)
        at += writeDigits(magnitude / 1000, minimumWidth: 1, to: at)
        var fraction = magnitude % 1000
        guard fraction != 0 else { return at - start }
        at.pointee = UInt8(ascii: ".")
        at += 1
        var divisor: UInt64 = 100
        while fraction != 0 {
            at.pointee = UInt8(ascii: "0") + UInt8(fraction / divisor)
            at += 1
            fraction %= divisor
            divisor /= 10
        }
        return at - start
    }

    /// The decimal digits of `value`, with leading zeros up to `minimumWidth` (at most 20), written
    /// at `start`; returns how many.
    static func writeDigits(_ value: UInt64, minimumWidth: Int, to start: UnsafeMutablePointer<UInt8>) -> Int {
        var width = 1
        var rest = value / 10
        while rest != 0 {
            width += 1
            rest /= 10
        }
        width = max(width, min(minimumWidth, 20))
        rest = value
        for index in stride(from: width - 1, through: 0, by: -1) {
            start[index] = UInt8(ascii: "0") + UInt8(truncatingIfNeeded: rest % 10)
            rest /= 10
        }
        return width
    }
}
