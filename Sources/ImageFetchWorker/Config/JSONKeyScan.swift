/// Finds a key that a JSON config file (or a job body, ``Job/decodeBody(_:)``) gives twice.
/// `JSONSerialization` keeps one of the values without a word, and the file may spell a key
/// nested or dotted (`{"worker": {"concurrency": 8}}` and `{"worker.concurrency": 8}`), so one key
/// can hide in two places; an operator who edits one of them would see no effect.
///
/// A scan of the bytes, not a parser: it runs after the parser accepted the file. Objects inside
/// lists are checked for repeated names among themselves only, since their keys are no
/// configuration keys. Iterative, so a deeply nested file cannot exhaust the stack.
enum JSONKeyScan {
    private enum Container {
        /// An object whose keys are configuration keys under `prefix` ("" at the top), or an
        /// object in a list (`prefix` nil).
        case object(prefix: String?)
        case list
    }

    /// The first key given twice, dotted (`worker.concurrency`), or nil. With `dotted` false,
    /// every object is checked for repeated names among themselves only (as a job body is), and
    /// the answer is the bare name.
    static func firstDuplicate(in bytes: [UInt8], dotted: Bool = true) -> String? {
        var stack: [Container] = []
        // The names seen in each open container (empty for a list), apart from `stack` so that a
        // name is inserted in place: a set copied per key made a body of many keys quadratic.
        var names: [Set<String>] = []
        var paths = Set<String>()
        // The key whose value comes next, dotted, when it is a configuration key.
        var pendingPath: String?
        var expectingName = false
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "{"):
                let prefix: String? = stack.isEmpty ? (dotted ? "" : nil) : pendingPath
                stack.append(.object(prefix: prefix))
                names.append([])
                pendingPath = nil
                expectingName = true
                index += 1
            case UInt8(ascii: "["):
                if let path = pendingPath, !paths.insert(path).inserted { return path }
                pendingPath = nil
                stack.append(.list)
                names.append([])
                expectingName = false
                index += 1
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                _ = stack.popLast()
                _ = names.popLast()
                expectingName = false
                index += 1
            case UInt8(ascii: ","):
                if case .object = stack.last { expectingName = true }
                index += 1
            case UInt8(ascii: "\""):
                guard let (text, next) = string(in: bytes, from: index) else { return nil }
                index = next
                guard expectingName, case .object(let prefix) = stack.last else {
                    // A string value.
                    if let path = pendingPath, !paths.insert(path).inserted { return path }
                    pendingPath = nil
                    continue
                }
                expectingName = false
                let path = prefix.map { $0.isEmpty ? text : $0 + "." + text }
                guard names[names.count - 1].insert(text).inserted else { return path ?? text }
                pendingPath = path
            case UInt8(ascii: ":"), UInt8(ascii: " "), UInt8(ascii: "\t"), UInt8(ascii: "\n"), UInt8(ascii: "\r"):
                index += 1
            default:
                // A number, true, false or null: a value.
                if let path = pendingPath, !paths.insert(path).inserted { return path }
                pendingPath = nil
                while index < bytes.count, !Self.ends(bytes[index]) { index += 1 }
            }
        }
        return nil
    }

    private static func ends(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: ","), UInt8(ascii: "}"), UInt8(ascii: "]"), UInt8(ascii: " "), UInt8(ascii: "\t"),
            UInt8(ascii: "\n"), UInt8(ascii: "\r"):
            true
        default: false
        }
    }

    /// The string that starts at `start` (its opening quote), decoded, and the index after it.
    private static func string(in bytes: [UInt8], from start: Int) -> (String, Int)? {
        var scalars = String.UnicodeScalarView()
        var utf8: [UInt8] = []
        var index = start + 1
        func flush() {
            scalars.append(contentsOf: String(decoding: utf8, as: UTF8.self).unicodeScalars)
            utf8.removeAll(keepingCapacity: true)
        }
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                flush()
                return (String(scalars), index + 1)
            }
            guard byte == UInt8(ascii: "\\") else {
                utf8.append(byte)
                index += 1
                continue
            }
            guard index + 1 < bytes.count else { return nil }
            let escaped = bytes[index + 1]
            index += 2
            switch escaped {
            case UInt8(ascii: "u"):
                guard var unit = hex4(bytes, at: index) else { return nil }
                index += 4
                // A surrogate pair is two escapes.
                if (0xD800..<0xDC00).contains(unit), index + 6 <= bytes.count, bytes[index] == UInt8(ascii: "\\"),
                    bytes[index + 1] == UInt8(ascii: "u"), let low = hex4(bytes, at: index + 2),
                    (0xDC00..<0xE000).contains(low)
                {
                    unit = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00)
                    index += 6
                }
                flush()
                scalars.append(Unicode.Scalar(unit) ?? "\u{FFFD}")
            case UInt8(ascii: "b"): utf8.append(0x08)
            case UInt8(ascii: "f"): utf8.append(0x0C)
            case UInt8(ascii: "n"): utf8.append(0x0A)
            case UInt8(ascii: "r"): utf8.append(0x0D)
            case UInt8(ascii: "t"): utf8.append(0x09)
            default: utf8.append(escaped)  // \" \\ \/
            }
        }
        return nil
    }

    private static func hex4(_ bytes: [UInt8], at index: Int) -> UInt32? {
        guard index + 4 <= bytes.count else { return nil }
        var value: UInt32 = 0
        for byte in bytes[index..<index + 4] {
            guard let digit = Character(Unicode.Scalar(byte)).hexDigitValue else { return nil }
            value = value << 4 | UInt32(digit)
        }
        return value
    }
}
