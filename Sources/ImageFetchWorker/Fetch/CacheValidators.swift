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
        guard bytes.allSatisfy({ $0 >= 0x20 && $0 <= 0x7E }),
            RetryAfter.httpDate(String(decoding: bytes, as: UTF8.self)) != nil
        else { return "is not an HTTP date" }
        return nil
    }

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
