/// Small text helpers for parsing configuration values.
enum ConfigText {
    /// The string without leading and trailing spaces, tabs and line breaks.
    static func trimmed<Text: StringProtocol>(_ text: Text) -> String {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" || $0.isNewline }
        guard let first = text.firstIndex(where: { !isSpace($0) }),
            let last = text.lastIndex(where: { !isSpace($0) })
        else { return "" }
        return String(text[first...last])
    }

    /// The text with each of `characters` replaced by `replacement`. (Foundation's
    /// `replacingOccurrences` would bring CoreFoundation's string search into start-up.)
    static func replacing(_ characters: Set<Character>, with replacement: Character, in text: String) -> String {
        String(text.map { characters.contains($0) ? replacement : $0 })
    }

    /// Where the first `://` is, as Foundation's `range(of:)` would say without CoreFoundation.
    static func schemeSeparator<Text: StringProtocol>(in text: Text) -> Range<Text.Index>? {
        var start = text.startIndex
        while let colon = text[start...].firstIndex(of: ":") {
            if text[colon...].hasPrefix("://") { return colon..<text.index(colon, offsetBy: 3) }
            start = text.index(after: colon)
        }
        return nil
    }

    /// True for the ASCII digits 0–9 only, not other Unicode digits.
    static func isDigit(_ character: Character) -> Bool {
        guard let ascii = character.asciiValue else { return false }
        return ascii >= UInt8(ascii: "0") && ascii <= UInt8(ascii: "9")
    }

    /// `text` with every byte outside ASCII percent-encoded. A parser that looks for `:` or `@`
    /// by `Character` misses one that a combining mark joins to the next character; in ASCII every
    /// such delimiter is a `Character` of its own. ``percentDecoded(_:)`` gives the bytes back.
    static func percentEncodingNonASCII(_ text: String) -> String {
        guard !text.utf8.allSatisfy({ $0 < 0x80 }) else { return text }
        var out = ""
        for byte in text.utf8 {
            if byte < 0x80 {
                out.unicodeScalars.append(Unicode.Scalar(byte))
            } else {
                out += "%" + String(byte, radix: 16, uppercase: true)
            }
        }
        return out
    }

    /// The string with `%XX` escapes decoded, or nil if an escape is malformed or the bytes are
    /// not UTF-8.
    static func percentDecoded(_ text: String) -> String? {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count)
        var iterator = text.utf8.makeIterator()
        while let byte = iterator.next() {
            guard byte == UInt8(ascii: "%") else {
                bytes.append(byte)
                continue
            }
            guard let high = iterator.next().flatMap(\.hexDigitValue),
                let low = iterator.next().flatMap(\.hexDigitValue)
            else {
                return nil
            }
            bytes.append(high << 4 | low)
        }
        return String(validating: bytes, as: UTF8.self)
    }

    /// Parses a duration such as `30`, `2.5`, `500ms`, `30s`, `2m`, `1h` or `1d` into seconds.
    ///
    /// A bare number is seconds. Returns nil for anything else, including negative numbers,
    /// exponents, `inf` and `nan`.
    static func seconds(_ text: String) -> Double? {
        let text = trimmed(text).lowercased()
        let units: [(suffix: String, seconds: Double)] = [
            ("ms", 0.001), ("s", 1), ("m", 60), ("h", 3600), ("d", 86_400),
        ]
        var number = Substring(text)
        var scale = 1.0
        for unit in units where text.hasSuffix(unit.suffix) {
            number = text.dropLast(unit.suffix.count)
            scale = unit.seconds
            break
        }
        guard !number.isEmpty, number != ".", number.allSatisfy({ isDigit($0) || $0 == "." }),
            number.count(where: { $0 == "." }) <= 1,
            let value = Double(number)
        else { return nil }
        return value * scale
    }

    /// A string quoted and escaped for an error message, and shortened if long.
    static func quoted(_ value: String, limit: Int = 80) -> String {
        let shortened = value.count > limit ? String(value.prefix(limit)) + "…" : value
        return String(reflecting: shortened)
    }
}
