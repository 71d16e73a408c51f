/// A fast reader for the common shape of a job body: one flat JSON object whose values are plain
/// strings (no escapes), integers, `true`, `false` or `null`, each key once, such as
/// `{"id":"42","url":"https://example.com/a.png"}`.
///
/// It answers only when the body has that shape, its `id`, `url`, `key`, `etag`, `last_modified`,
/// `sha256` and `tenant` have the types of the job schema, and it has no `headers` (other than `null`); for
/// anything else (escapes, nested values, fractions, duplicate keys, invalid UTF-8, a schema
/// mismatch, malformed JSON) it returns nil and ``Job/decode(_:allowedHeaders:)`` falls back to
/// Foundation's `JSONDecoder`, which gives
/// the same fields or the error. So where it answers, it agrees with the decoder by construction
/// (and `JobBodyScannerTests` checks that on random bodies);
/// it only saves the decoder's allocations on the hot path.
///
/// Pure function of the bytes, no I/O.
enum JobBodyScanner {
    /// The schema's fields as the decoder would give them: nil when absent or `null`.
    struct Fields: Equatable {
        var id: String?
        var url: String?
        var key: String?
        /// The `headers` object; the scanner leaves bodies that have one to the decoder.
        var headers: [String: String]? = nil
        /// The validators of a conditional refetch, unchecked.
        var etag: String? = nil
        var lastModified: String? = nil
        var sha256: String? = nil
        /// The tenant, unchecked.
        var tenant: String? = nil
    }

    /// The fields of a body of the common shape, or nil to fall back to the full decoder.
    static func scan(_ bytes: [UInt8]) -> Fields? {
        bytes.withUnsafeBufferPointer { buffer in
            var scanner = Cursor(buffer)
            return scanner.object()
        }
    }

    private enum Value {
        case string(String)
        /// In the decoder's spelling (`-0` is `0`).
        case integer(String)
        case literal
        case null
    }

    private struct Cursor {
        /// More keys than this and the body goes to the decoder.
        static let maxKeys = 32

        let bytes: UnsafeBufferPointer<UInt8>
        var index = 0

        init(_ bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

        mutating func object() -> Fields? {
            skipSpace()
            guard take(UInt8(ascii: "{")) else { return nil }
            var fields = Fields()
            var seen: [String] = []
            skipSpace()
            if take(UInt8(ascii: "}")) { return end() ? fields : nil }
            while true {
                skipSpace()
                guard let name = string() else { return nil }
                // A repeated key: leave it to the decoder's rules. Many keys: the decoder too, so
                // that this linear search never becomes quadratic work on a hostile body.
                guard !seen.contains(name), seen.count < Self.maxKeys else { return nil }
                seen.append(name)
                skipSpace()
                guard take(UInt8(ascii: ":")) else { return nil }
                skipSpace()
                guard let value = value() else { return nil }
                switch name {
                case "id":
                    switch value {
                    case .string(let text): fields.id = text
                    case .integer(let text): fields.id = text
                    case .null: fields.id = nil
                    case .literal: return nil
                    }
                case "url", "key", "etag", "last_modified", "sha256", "tenant":
                    let text: String?
                    switch value {
                    case .string(let string): text = string
                    case .null: text = nil
                    case .integer, .literal: return nil
                    }
                    switch name {
                    case "url": fields.url = text
                    case "key": fields.key = text
                    case "etag": fields.etag = text
                    case "last_modified": fields.lastModified = text
                    case "tenant": fields.tenant = text
                    default: fields.sha256 = text
                    }
                case "headers":
                    // An object (or a wrong type) is the decoder's to read or refuse.
                    guard case .null = value else { return nil }
                default:
                    break
                }
                skipSpace()
                if take(UInt8(ascii: ",")) { continue }
                guard take(UInt8(ascii: "}")) else { return nil }
                return end() ? fields : nil
            }
        }

        /// Only white space may follow the object.
        mutating func end() -> Bool {
            skipSpace()
            return index == bytes.count
        }

        mutating func value() -> Value? {
            guard index < bytes.count else { return nil }
            switch bytes[index] {
            case UInt8(ascii: "\""):
                return string().map(Value.string)
            case UInt8(ascii: "t"):
                return word("true") ? .literal : nil
            case UInt8(ascii: "f"):
                return word("false") ? .literal : nil
            case UInt8(ascii: "n"):
                return word("null") ? .null : nil
            default:
                return integer()
            }
        }

        /// A string without escapes or control characters, valid UTF-8.
        mutating func string() -> String? {
            guard take(UInt8(ascii: "\"")) else { return nil }
            let start = index
            var isASCII = true
            while index < bytes.count {
                let byte = bytes[index]
                if byte == UInt8(ascii: "\"") {
                    let utf8 = UnsafeBufferPointer(rebasing: bytes[start..<index])
                    // ASCII is valid UTF-8 as it is: the common case skips the (unspecialised,
                    // about 1,000 instructions) validating initialiser.
                    let text = isASCII ? String(decoding: utf8, as: UTF8.self) : String(validating: utf8, as: UTF8.self)
                    index += 1
                    return text
                }
                if byte == UInt8(ascii: "\\") || byte < 0x20 { return nil }
                isASCII = isASCII && byte < 0x80
                index += 1
            }
            return nil
        }

        /// `-?(0|[1-9][0-9]*)` that fits Int64 and is not followed by a fraction or an exponent.
        mutating func integer() -> Value? {
            let start = index
            if index < bytes.count, bytes[index] == UInt8(ascii: "-") { index += 1 }
            let digits = index
            while index < bytes.count, bytes[index] >= UInt8(ascii: "0"), bytes[index] <= UInt8(ascii: "9") {
                index += 1
            }
            let count = index - digits
            guard count > 0, count <= 19, !(count > 1 && bytes[digits] == UInt8(ascii: "0")) else { return nil }
            if index < bytes.count, [UInt8(ascii: "."), UInt8(ascii: "e"), UInt8(ascii: "E")].contains(bytes[index]) {
                return nil
            }
            let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
            guard let number = Int64(text) else { return nil }
            return .integer(String(number))
        }

        mutating func word(_ literal: StaticString) -> Bool {
            let count = literal.utf8CodeUnitCount
            guard bytes.count - index >= count else { return false }
            for offset in 0..<count where bytes[index + offset] != literal.utf8Start[offset] { return false }
            index += count
            return true
        }

        mutating func take(_ byte: UInt8) -> Bool {
            guard index < bytes.count, bytes[index] == byte else { return false }
            index += 1
            return true
        }

        mutating func skipSpace() {
            while index < bytes.count {
                switch bytes[index] {
                case UInt8(ascii: " "), UInt8(ascii: "\t"), UInt8(ascii: "\n"), UInt8(ascii: "\r"): index += 1
                default: return
                }
            }
        }
    }
}
