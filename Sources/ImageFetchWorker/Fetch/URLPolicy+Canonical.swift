/// The fast path of ``URLPolicy/validate(_:)``: a URL that is already in the form the full parse
/// gives back is recognised in one pass, and kept as the very string it came as.
///
/// Nearly every job's URL is such: lower-case `http` or `https`, a lower-case host name or a
/// dotted quad, a port without leading zeros, a path, printable ASCII only, no fragment. The full
/// parse builds the same URL again piece by piece, about 15,000 instructions a job (callgrind),
/// a tenth of the worker's own work per message at slow1024.
///
/// Whatever this pass is not sure of gives nil, and the full parse decides: upper case, IPv6
/// literals, IPv4 in any other form, `xn--` labels, user info, empty or odd labels, a trailing
/// dot, an empty or zero-padded port, no path, a fragment, any byte outside `!`…`~`. So it can
/// only ever accept what the full parse accepts unchanged; `URLPolicyCanonicalTests` checks the two
/// agree on every URL of the policy's tests and on random mutations of them.
extension URLPolicy {
    static func canonical(_ string: String) -> ValidatedURL? {
        string.utf8.withContiguousStorageIfAvailable { canonical(bytes: $0, of: string) } ?? nil
    }

    private static func canonical(bytes: UnsafeBufferPointer<UInt8>, of string: String) -> ValidatedURL? {
        let count = bytes.count
        guard count <= maxLength else { return nil }
        for byte in bytes where byte < 0x21 || byte > 0x7E { return nil }

        let isHTTPS: Bool
        var index: Int
        if hasPrefix(bytes, "https://") {
            (isHTTPS, index) = (true, 8)
        } else if hasPrefix(bytes, "http://") {
            (isHTTPS, index) = (false, 7)
        } else {
            return nil
        }

        // The host: lower-case letters, digits, `-`, `_`, dots between non-empty labels.
        let hostStart = index
        var labelStart = index
        while index < count {
            let byte = bytes[index]
            if byte == UInt8(ascii: ":") || byte == UInt8(ascii: "/") { break }
            if byte == UInt8(ascii: ".") {
                guard index > labelStart else { return nil }
                labelStart = index + 1
            } else if !isHostByte(byte) {
                return nil  // `?`, `#`, `@`, `[`, `%`, upper case and the rest: the full parse decides
            } else if index == labelStart, startsWithPunycodePrefix(bytes, at: index) {
                return nil
            }
            index += 1
        }
        let hostEnd = index
        guard hostEnd > labelStart else { return nil }  // empty host, empty or trailing label
        // A last label that starts with a digit may end in a number: only a dotted quad reads as
        // itself.
        if IPAddress.isDigit(bytes[labelStart]), !isDottedQuad(bytes, hostStart..<hostEnd) { return nil }

        var port: Int?
        if index < count, bytes[index] == UInt8(ascii: ":") {
            index += 1
            let digitsStart = index
            var value = 0
            while index < count, IPAddress.isDigit(bytes[index]), index - digitsStart < 5 {
                value = value * 10 + Int(bytes[index] &- UInt8(ascii: "0"))
                index += 1
            }
            guard index > digitsStart, bytes[digitsStart] != UInt8(ascii: "0"), value <= 65535 else { return nil }
            port = value
        }

        // The path and query, as given; a fragment would be dropped, so it is not canonical.
        guard index < count, bytes[index] == UInt8(ascii: "/") else { return nil }
        for byte in bytes[index...] where byte == UInt8(ascii: "#") { return nil }

        return ValidatedURL(
            url: string, scheme: isHTTPS ? "https" : "http",
            host: String(decoding: UnsafeBufferPointer(rebasing: bytes[hostStart..<hostEnd]), as: UTF8.self),
            port: port, isHTTPS: isHTTPS)
    }

    private static func hasPrefix(_ bytes: UnsafeBufferPointer<UInt8>, _ prefix: StaticString) -> Bool {
        let length = prefix.utf8CodeUnitCount
        guard bytes.count >= length else { return false }
        return prefix.withUTF8Buffer { $0.elementsEqual(bytes[0..<length]) }
    }

    private static func isHostByte(_ byte: UInt8) -> Bool {
        (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z")) || IPAddress.isDigit(byte)
            || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_")
    }

    /// `xn--` (lower case; upper case never reaches here) at a label's start: IDNA's to check.
    private static func startsWithPunycodePrefix(_ bytes: UnsafeBufferPointer<UInt8>, at index: Int) -> Bool {
        index + 4 <= bytes.count && bytes[index] == UInt8(ascii: "x") && bytes[index + 1] == UInt8(ascii: "n")
            && bytes[index + 2] == UInt8(ascii: "-") && bytes[index + 3] == UInt8(ascii: "-")
    }

    /// Four decimal parts of 0…255 without leading zeros: the text the full parse gives back.
    private static func isDottedQuad(_ bytes: UnsafeBufferPointer<UInt8>, _ range: Range<Int>) -> Bool {
        var parts = 0
        var digits = 0
        var value = 0
        for index in range {
            let byte = bytes[index]
            if byte == UInt8(ascii: ".") {
                guard digits > 0 else { return false }
                parts += 1
                (digits, value) = (0, 0)
                continue
            }
            guard IPAddress.isDigit(byte), !(digits == 1 && value == 0) else { return false }
            value = value * 10 + Int(byte - UInt8(ascii: "0"))
            digits += 1
            guard value <= 255 else { return false }
        }
        return parts == 3 && digits > 0
    }
}
