/// The validators of a conditional refetch (RFC 9110 §8.8, §13.1): the `ETag` and `Last-Modified`
/// an origin sent with an image, which an `ok` result carries and a later job sends back as
/// `If-None-Match` and `If-Modified-Since`.
///
/// One rule for both directions, so that what a result carries a job may send: an entity tag is
/// 1 to ``maxETagBytes`` visible ASCII characters; a last-modified time is an HTTP date of at most
/// ``maxLastModifiedBytes``. A hostile or broken header that breaks the rule is dropped, never cut
/// or repeated: it could only make the next fetch unconditional.
///
/// Pure functions, no I/O.
package enum CacheValidators {
    /// Longer than any entity tag an origin has reason to send (nginx's are about 20 bytes, S3's
    /// under 40).
    package static let maxETagBytes = 256
    /// An IMF-fixdate is 29 bytes; the obsolete forms a little more.
    package static let maxLastModifiedBytes = 64

    /// What is wrong with an entity tag, or nil.
    package static func etagProblem<Bytes: Collection<UInt8>>(_ bytes: Bytes) -> String? {
        guard !bytes.isEmpty else { return "is empty" }
        guard bytes.count <= maxETagBytes else { return "is longer than \(maxETagBytes) bytes" }
        // RFC 9110's etagc, without obs-text: visible ASCII, no space.
        guard bytes.allSatisfy({ $0 >= 0x21 && $0 <= 0x7E }) else {
            return "contains a character other than visible ASCII"
        }
        return nil
    }

    /// What is wrong with a last-modified time, or nil.
    package static func lastModifiedProblem<Bytes: Collection<UInt8>>(_ bytes: Bytes) -> String? {
        guard bytes.count <= maxLastModifiedBytes else { return "is longer than \(maxLastModifiedBytes) bytes" }
        if isIMFFixdate(bytes) { return nil }
        guard bytes.allSatisfy({ $0 >= 0x20 && $0 <= 0x7E }),
            RetryAfter.httpDate(String(decoding: bytes, as: UTF8.self)) != nil
        else { return "is not an HTTP date" }
        return nil
    }

    /// Whether `bytes` is an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), the form current
    /// servers send, read in place. Every `ok` result's `Last-Modified` is checked, and the general
    /// reader (``RetryAfter``) splits the text into strings: about 25,000 instructions a response
    /// (callgrind, png32). What this accepts, the general reader accepts too; anything else goes
    /// to it.
    static func isIMFFixdate<Bytes: Collection<UInt8>>(_ bytes: Bytes) -> Bool {
        guard bytes.count == 29 else { return false }
        return bytes.withContiguousStorageIfAvailable(isIMFFixdate(buffer:))
            ?? Array(bytes).withUnsafeBufferPointer(isIMFFixdate(buffer:))
    }

    /// By fixed offsets, with nothing captured that changes: a cursor shared by nested functions
    /// would be boxed and checked for exclusive access on every byte.
    private static func isIMFFixdate(buffer bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        func number(at offset: Int, digits: Int) -> Int? {
            var value = 0
            for byte in bytes[offset..<offset + digits] {
                guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
                value = value * 10 + Int(byte - UInt8(ascii: "0"))
            }
            return value
        }
        func matches(at offset: Int, _ text: StaticString) -> Bool {
            text.withUTF8Buffer { $0.elementsEqual(bytes[offset..<offset + $0.count]) }
        }
        func oneOf(at offset: Int, _ words: [StaticString]) -> Bool {
            words.contains { matches(at: offset, $0) }
        }
        guard oneOf(at: 0, weekdays), matches(at: 3, ", "), let day = number(at: 5, digits: 2), (1...31).contains(day),
            matches(at: 7, " "), oneOf(at: 8, months), matches(at: 11, " "), let year = number(at: 12, digits: 4),
            year >= 1900, matches(at: 16, " "), let hour = number(at: 17, digits: 2), hour < 24, matches(at: 19, ":"),
            let minute = number(at: 20, digits: 2), minute < 60, matches(at: 22, ":"),
            let second = number(at: 23, digits: 2), second <= 60, matches(at: 25, " GMT")
        else { return false }
        return true
    }

    private static let weekdays: [StaticString] = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
    private static let months: [StaticString] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ]

    /// An origin's `ETag` value, if it keeps to the rule.
    package static func etag<Bytes: Collection<UInt8>>(from bytes: Bytes) -> String? {
        etagProblem(bytes) == nil ? String(decoding: bytes, as: UTF8.self) : nil
    }

    /// An origin's `Last-Modified` value, if it keeps to the rule.
    package static func lastModified<Bytes: Collection<UInt8>>(from bytes: Bytes) -> String? {
        lastModifiedProblem(bytes) == nil ? String(decoding: bytes, as: UTF8.self) : nil
    }

    /// The request headers of a refetch: the job's own `headers`, with `If-None-Match` for its
    /// `etag` and `If-Modified-Since` for its `last_modified` in place of any the job set itself.
    package static func requestHeaders(
        _ fields: [HTTPHeaderField], etag: String?, lastModified: String?
    ) -> [HTTPHeaderField] {
        guard etag != nil || lastModified != nil else { return fields }
        var result = fields.filter {
            let name = $0.name.lowercased()
            return !(etag != nil && name == "if-none-match") && !(lastModified != nil && name == "if-modified-since")
        }
        if let etag { result.append(HTTPHeaderField(name: "If-None-Match", value: etag)) }
        if let lastModified { result.append(HTTPHeaderField(name: "If-Modified-Since", value: lastModified)) }
        return result
    }
}
