/// What the header callback reads from the lines libcurl hands it, and the checks of a redirect
/// target: pure functions on the raw bytes, without Foundation or allocation.
extension FetchTransfer {
    /// Whether libcurl follows a `Location` sent with `status` (`CURLOPT_FOLLOWLOCATION`): libcurl
    /// 7.88 follows it on every 3xx, not only on 301, 302, 303, 307 and 308.
    static func isFollowed(_ status: Int) -> Bool {
        (300...399).contains(status)
    }

    /// Why a redirect target (a `Location` value) is refused: longer than ``URLPolicy/maxLength``,
    /// or user info in its authority. Relative targets keep the checked host. The scheme is left to
    /// libcurl, which refuses anything but http and https (`unsupported_scheme`).
    static func redirectProblem(_ location: UnsafeRawBufferPointer.SubSequence) -> FetchError? {
        if location.count > URLPolicy.maxLength {
            return .redirectRefused(.tooLong)
        }
        let slash = UInt8(ascii: "/")
        var index = location.startIndex
        if let scheme = scheme(of: location) { index = scheme.endIndex + 1 }
        // Only a target with an authority ("//…") can carry user info.
        guard location.endIndex - index >= 2, location[index] == slash, location[index + 1] == slash else { return nil }
        let authority = location[(index + 2)...].prefix { byte in
            byte != slash && byte != UInt8(ascii: "?") && byte != UInt8(ascii: "#")
        }
        if authority.contains(UInt8(ascii: "@")) {
            return .redirectRefused(.userInfo)
        }
        return nil
    }

    /// The scheme a target starts with (a letter, then letters, digits, "+", "-" or ".", then
    /// ":"), without the colon; nil for a relative target.
    static func scheme(of location: UnsafeRawBufferPointer.SubSequence) -> UnsafeRawBufferPointer.SubSequence? {
        let start = location.startIndex
        guard let colon = location.firstIndex(of: UInt8(ascii: ":")), colon > start,
            (location[start] | 0x20) >= UInt8(ascii: "a"), (location[start] | 0x20) <= UInt8(ascii: "z"),
            location[start..<colon].allSatisfy({ byte in
                let lower = byte | 0x20
                return (lower >= UInt8(ascii: "a") && lower <= UInt8(ascii: "z"))
                    || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9"))
                    || byte == UInt8(ascii: "+") || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".")
            })
        else { return nil }
        return location[start..<colon]
    }

    /// Whether a target names a scheme other than http and https (in any case).
    static func hasForeignScheme(_ location: UnsafeRawBufferPointer.SubSequence) -> Bool {
        guard let scheme = scheme(of: location) else { return false }
        let lower = scheme.map { $0 | 0x20 }
        return lower != Array("http".utf8) && lower != Array("https".utf8)
    }

    /// The three-digit status of a status line (`HTTP/1.1 302 Found`), or 0. Read as libcurl
    /// reads it (`" HTTP/%1d.%1d%c%3d%c"`): whitespace may come before the number (the `Retry-After`
    /// and opt-out headers of `HTTP/1.1  200` count), a fourth digit may not.
    static func parseStatus(_ line: UnsafeRawBufferPointer) -> Int {
        // `HTTP/2` and `HTTP/3` (no minor version) take libcurl's other reading,
        // `" HTTP/%1[23] %d"`: whitespace, a sign, then digits without a width.
        if line.count > 6, line[5] == UInt8(ascii: "2") || line[5] == UInt8(ascii: "3"), line[6] != UInt8(ascii: ".") {
            return parseDecimalStatus(line, from: 6)
        }
        guard let space = line.firstIndex(of: UInt8(ascii: " ")) else { return 0 }
        let index = afterScanfSpace(line, from: space + 1)
        guard line.count >= index + 3 else { return 0 }
        var status = 0
        for byte in line[index..<(index + 3)] {
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return 0 }
            status = status * 10 + Int(byte - UInt8(ascii: "0"))
        }
        if index + 3 < line.count, line[index + 3] >= UInt8(ascii: "0"), line[index + 3] <= UInt8(ascii: "9") {
            return 0
        }
        return status
    }

    /// The index after the whitespace from `start`, as `sscanf` skips it (`isspace`: also VT, FF).
    private static func afterScanfSpace(_ line: UnsafeRawBufferPointer, from start: Int) -> Int {
        var index = start
        while index < line.count, isSpace(line[index]) || line[index] == 0x0B || line[index] == 0x0C { index += 1 }
        return index
    }

    /// `%d` of `sscanf` from `start`: whitespace, a sign, digits; 0 when there are none or the
    /// value is negative or past any status.
    private static func parseDecimalStatus(_ line: UnsafeRawBufferPointer, from start: Int) -> Int {
        var index = afterScanfSpace(line, from: start)
        var negative = false
        if index < line.count, line[index] == UInt8(ascii: "+") || line[index] == UInt8(ascii: "-") {
            negative = line[index] == UInt8(ascii: "-")
            index += 1
        }
        var status = 0
        var digits = 0
        while index < line.count, line[index] >= UInt8(ascii: "0"), line[index] <= UInt8(ascii: "9") {
            status = min(status * 10 + Int(line[index] - UInt8(ascii: "0")), 1_000_000)
            digits += 1
            index += 1
        }
        return digits == 0 || negative ? 0 : status
    }

    // MARK: Header parsing, without Foundation or allocation

    static let statusLinePrefix = Array("HTTP/".utf8)
    static let contentTypePrefix = Array("content-type:".utf8)
    static let contentLengthPrefix = Array("content-length:".utf8)
    static let locationPrefix = Array("location:".utf8)
    static let retryAfterPrefix = Array("retry-after:".utf8)
    static let etagPrefix = Array("etag:".utf8)
    static let lastModifiedPrefix = Array("last-modified:".utf8)
    static let transferEncodingPrefix = Array("transfer-encoding:".utf8)

    /// Whether `line` starts with `prefix`, ignoring ASCII case (`prefix` is lower-case).
    @inline(__always)
    static func hasPrefix(_ line: UnsafeRawBufferPointer, _ prefix: [UInt8], ignoringCase: Bool = false) -> Bool {
        guard line.count >= prefix.count else { return false }
        for index in 0..<prefix.count {
            var byte = line[index]
            if ignoringCase, byte >= UInt8(ascii: "A"), byte <= UInt8(ascii: "Z") { byte |= 0x20 }
            if byte != prefix[index] { return false }
        }
        return true
    }

    /// The trimmed value of header `name` (lower-case, colon included) if `line` is that header.
    static func value(of name: [UInt8], in line: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer.SubSequence? {
        guard hasPrefix(line, name, ignoringCase: true) else { return nil }
        var start = name.count
        var end = line.count
        while start < end, isSpace(line[start]) { start += 1 }
        while end > start, isSpace(line[end - 1]) { end -= 1 }
        return line[start..<end]
    }

    /// The `Location` value as libcurl reads it to follow it (`Curl_copy_header_value`): after
    /// the C spaces (VT and FF too), up to the first CR (else LF), less the C spaces before that.
    /// The redirect checks must read the target libcurl will request; a stray CR, VT or FF in the
    /// raw value made them fail to parse it, and the redirect went unchecked.
    static func location(in line: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer.SubSequence? {
        guard hasPrefix(line, locationPrefix, ignoringCase: true) else { return nil }
        func isCSpace(_ byte: UInt8) -> Bool { byte == UInt8(ascii: " ") || (byte >= 0x09 && byte <= 0x0D) }
        var start = locationPrefix.count
        while start < line.count, isCSpace(line[start]) { start += 1 }
        let rest = line[start...]
        var end = rest.firstIndex(of: UInt8(ascii: "\r")) ?? rest.firstIndex(of: UInt8(ascii: "\n")) ?? line.count
        while end > start, isCSpace(line[end - 1]) { end -= 1 }
        return line[start..<end]
    }

    /// Whether a `Transfer-Encoding` value names `chunked` among its codings, as libcurl reads it
    /// (any position, any case, the whole text between commas): only then are the body's ends its
    /// chunks, not the close.
    static func namesChunked(_ value: UnsafeRawBufferPointer.SubSequence) -> Bool {
        var rest = value[...]
        while !rest.isEmpty {
            let end = rest.firstIndex(of: UInt8(ascii: ",")) ?? rest.endIndex
            var coding = rest[rest.startIndex..<end]
            // libcurl skips blanks before a name and C spaces (VT and FF too) after it.
            while let first = coding.first, first == UInt8(ascii: " ") || first == UInt8(ascii: "\t") {
                coding = coding.dropFirst()
            }
            while let last = coding.last, last == UInt8(ascii: " ") || (0x09...0x0D).contains(last) {
                coding = coding.dropLast()
            }
            if coding.count == chunkedCoding.count,
                zip(coding, chunkedCoding).allSatisfy({ ($0 | 0x20) == $1 })
            {
                return true
            }
            rest = end == rest.endIndex ? rest[end...] : rest[rest.index(after: end)...]
        }
        return false
    }

    private static let chunkedCoding = Array("chunked".utf8)

    @inline(__always)
    private static func isSpace(_ byte: UInt8) -> Bool {
        byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") || byte == UInt8(ascii: "\r")
            || byte == UInt8(ascii: "\n")
    }

    /// A decimal Content-Length, or nil if it is not one.
    static func parseLength(_ digits: UnsafeRawBufferPointer.SubSequence) -> Int64? {
        guard !digits.isEmpty, digits.count <= 18 else { return nil }
        var value: Int64 = 0
        for byte in digits {
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
            value = value * 10 + Int64(byte - UInt8(ascii: "0"))
        }
        return value
    }
}
