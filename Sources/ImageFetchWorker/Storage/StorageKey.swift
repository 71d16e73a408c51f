/// Turns job key hints and digests into relative storage keys that are safe to use as paths.
package enum StorageKey {
    /// The longest key accepted, in UTF-8 bytes.
    package static let maxKeyLength = 1024
    /// The longest segment accepted, in UTF-8 bytes (`NAME_MAX` on Linux).
    package static let maxSegmentLength = 255

    /// Sanitises a job's key hint: strips leading '/', rejects '..' segments, empty segments, NUL
    /// and control chars, backslashes; nil when unusable.
    ///
    /// Also rejects `.` segments, a trailing `/`, segments longer than ``maxSegmentLength`` bytes
    /// and keys longer than ``maxKeyLength`` bytes. A usable key is returned unchanged otherwise:
    /// it is never rewritten into a different key.
    ///
    /// Segments are split on the byte `/`, as the file system and S3 split them, not on
    /// Characters: a `/` followed by a combining mark or a joiner is one Character with it, and a
    /// split on Characters would not see the `..` before it.
    package static func sanitize(_ hint: String) -> String? {
        let slash = UInt8(ascii: "/")
        let dot = UInt8(ascii: ".")
        let utf8 = hint.utf8
        guard utf8.count <= maxKeyLength + 64 else { return nil }  // cheap early out, slashes included
        // Leading slashes are single bytes, so what follows them starts on a scalar boundary.
        let trimmed = Substring(utf8.drop { $0 == slash })
        guard !trimmed.isEmpty, trimmed.utf8.count <= maxKeyLength else { return nil }
        for scalar in trimmed.unicodeScalars {
            if scalar == "\\" || scalar.properties.generalCategory == .control {
                return nil
            }
        }
        for segment in trimmed.utf8.split(separator: slash, omittingEmptySubsequences: false) {
            let isDotOrDotDot = segment.count <= 2 && segment.allSatisfy { $0 == dot }
            guard !segment.isEmpty, !isDotOrDotDot, segment.count <= maxSegmentLength else { return nil }
        }
        return String(trimmed)
    }

    /// Whether `sha256` can stand in a content address: not empty, and lowercase hex only. Sinks
    /// check it before a digest becomes part of a path or an object key.
    package static func isDigest(_ sha256: String) -> Bool {
        var text = sha256
        return text.withUTF8 { utf8 in
            !utf8.isEmpty
                // Wrapping subtraction: one comparison for each range.
                && utf8.allSatisfy { c in c &- UInt8(ascii: "0") < 10 || c &- UInt8(ascii: "a") < 6 }
        }
    }

    /// Whether `key` lies in the content-address namespace: its first segment is two hex digits
    /// and its second starts with 64 (a digest), then ends or goes on with `.`. Such keys name the
    /// bytes whose digest they carry, so a job's key may use one only when it is the job's own
    /// content address; otherwise a keyed job could put other bytes where another image's result
    /// points (and the file sink skips writing a content address that exists). A key that is
    /// just two hex digits is a content address's folder: a file there would make every image
    /// whose digest starts so fail to store. Hex digits of either case count, for file systems
    /// that ignore case (SMB, casefold ext4).
    package static func isInContentAddressSpace(_ key: String) -> Bool {
        let utf8 = Array(key.utf8)
        func isHex(_ c: UInt8) -> Bool { c.hexDigitValue != nil }
        guard utf8.count >= 2, isHex(utf8[0]), isHex(utf8[1]) else { return false }
        if utf8.count == 2 { return true }
        guard utf8.count >= 3 + 64, utf8[2] == UInt8(ascii: "/") else { return false }
        let digest = utf8[3..<(3 + 64)]
        guard digest.allSatisfy(isHex) else { return false }
        return utf8.count == 3 + 64 || utf8[3 + 64] == UInt8(ascii: ".") || utf8[3 + 64] == UInt8(ascii: "/")
    }

    /// "<sha256[0..2]>/<sha256>.<ext>"
    package static func contentAddressed(sha256: String, format: ImageFormat) -> String {
        let fileExtension = format.fileExtension
        var key = ""
        key.reserveCapacity(sha256.utf8.count + fileExtension.utf8.count + 4)
        key += sha256.prefix(2)
        key += "/"
        key += sha256
        key += "."
        key += fileExtension
        return key
    }
}
