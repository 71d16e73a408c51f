/// Writes compact JSON into a byte buffer by hand: the result encoder runs once per job, and
/// Foundation's encoder costs several times more for the same bytes.
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

    /// A number with up to three decimals (rates).
    mutating func field(_ name: StaticString, decimal value: Double) {
        field(name, milliseconds: value)
    }

    mutating func key(_ name: StaticString) {
        separate()
        bytes.append(UInt8(ascii: "\""))
        name.withUTF8Buffer { bytes.append(contentsOf: $0) }
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
        separate()
        bytes.append(contentsOf: String(value).utf8)
        needsComma = true
    }

    mutating func field(_ name: StaticString, _ value: Int?) {
        guard let value else { return }
        field(name, value)
    }

    /// `"name":null`.
    mutating func null(_ name: StaticString) {
        key(name)
        bytes.append(contentsOf: Array("null".utf8))
        needsComma = true
    }

    mutating func field(_ name: StaticString, _ value: Bool) {
        key(name)
        bytes.append(contentsOf: value ? Array("true".utf8) : Array("false".utf8))
        needsComma = true
    }

    /// A number with up to three decimals (milliseconds).
    mutating func field(_ name: StaticString, milliseconds value: Double) {
        key(name)
        let thousandths = Int((value * 1000).rounded())
        let whole = thousandths / 1000
        let fraction = abs(thousandths % 1000)
        var text = String(whole)
        if fraction != 0 {
            var digits = String(fraction)
            while digits.count < 3 { digits = "0" + digits }
            while digits.hasSuffix("0") { digits.removeLast() }
            text += "." + digits
        }
        bytes.append(contentsOf: text.utf8)
        needsComma = true
    }

    mutating func string(_ value: String) {
        separate()
        bytes.append(UInt8(ascii: "\""))
        for byte in value.utf8 {
            switch byte {
            case UInt8(ascii: "\""): bytes.append(UInt8(ascii: "\\")); bytes.append(byte)
            case UInt8(ascii: "\\"): bytes.append(UInt8(ascii: "\\")); bytes.append(byte)
            case 0x0A: bytes.append(UInt8(ascii: "\\")); bytes.append(UInt8(ascii: "n"))
            case 0x0D: bytes.append(UInt8(ascii: "\\")); bytes.append(UInt8(ascii: "r"))
            case 0x09: bytes.append(UInt8(ascii: "\\")); bytes.append(UInt8(ascii: "t"))
            case 0x00..<0x20, 0x7F:
                let hex: [UInt8] = Array("0123456789abcdef".utf8)
                bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"),
                                          hex[Int(byte >> 4)], hex[Int(byte & 0xF)]])
            default: bytes.append(byte)
            }
        }
        bytes.append(UInt8(ascii: "\""))
        needsComma = true
    }

    private mutating func separate() {
        if needsComma { bytes.append(UInt8(ascii: ",")) }
        needsComma = false
    }
}
