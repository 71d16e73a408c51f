import CShims

/// robots.txt (RFC 9309), parsed for one product token and matched against paths. Pure: bytes
/// in, a verdict out.
///
/// - Groups start with `user-agent` lines; a group's product token matches ours without case
///   (`User-agent: ImageFetchWorker/2.0` is the token `ImageFetchWorker`). All groups that
///   name our token are merged; without any, the `*` groups are; without those, all is allowed.
/// - The rule with the longest matching pattern wins; between an allow and a disallow of the same
///   length, allow wins. `*` matches any run of bytes, a final `$` the end of the path.
/// - Paths and patterns are compared in one percent-encoded form (``RobotsTxt/normalized(_:)``).
/// - Only the first ``RobotsTxt/parseLimit`` bytes are read (RFC 9309 §2.5 asks for at least
///   500 KiB); a line is cut at ``RobotsTxt/maxLineLength``.
package struct RobotsRules: Sendable, Equatable {
    /// One `allow` or `disallow` line of the selected groups.
    package struct Rule: Sendable, Equatable {
        package var allow: Bool
        /// Normalised (``RobotsTxt/normalized(_:)``), runs of `*` collapsed.
        package var pattern: [UInt8]
    }

    /// Where the rules come from.
    package enum Source: Sendable, Equatable {
        /// A robots.txt that was fetched (2xx).
        case parsed
        /// No robots.txt (4xx): everything is allowed (RFC 9309 §2.3.1.3).
        case missing
        /// The robots.txt was unreachable (5xx, no answer): nothing is allowed (§2.3.1.4).
        case unreachable
    }

    package let source: Source
    package let rules: [Rule]
    /// The patterns' bytes together, which bound the cost of matching a path.
    package let patternBytes: Int

    package init(source: Source, rules: [Rule]) {
        self.source = source
        self.rules = rules
        self.patternBytes = rules.reduce(0) { $0 + $1.pattern.count }
    }

    package static let allowAll = RobotsRules(source: .missing, rules: [])
    package static let disallowAll = RobotsRules(source: .unreachable, rules: [])

    /// Whether `path` (path and query of the URL, from its `/`) may be fetched.
    package func allows(_ path: String) -> Bool {
        switch source {
        case .missing: return true
        case .unreachable: return false
        case .parsed: break
        }
        let target = RobotsTxt.normalized(Array(path.utf8))
        // RFC 9309 §2.2.2: /robots.txt itself is always allowed.
        if target == RobotsTxt.robotsPath { return true }
        var best = -1
        var allowed = true
        for rule in rules where rule.pattern.count >= best {
            guard RobotsTxt.matches(target, rule.pattern) else { continue }
            if rule.pattern.count > best {
                best = rule.pattern.count
                allowed = rule.allow
            } else if rule.allow {
                allowed = true  // the same length: allow wins
            }
        }
        return allowed
    }

    /// The verdict for `path` as an opt-out signal, nil when it is allowed.
    package func signal(for path: String) -> OptOutSignal? {
        guard !allows(path) else { return nil }
        return source == .unreachable ? .robotsUnreachable : .robotsDisallowed
    }
}

package enum RobotsTxt {
    /// RFC 9309 §2.5: crawlers must parse at least 500 KiB; the rest is ignored.
    package static let parseLimit = 500 * 1024
    /// Longer lines are cut here: a pattern's match costs its length times the path's.
    package static let maxLineLength = 16 * 1024
    static let robotsPath = Array("/robots.txt".utf8)

    /// The rules of `text` that apply to `userAgent`, a product token (`[A-Za-z_-]+`).
    package static func parse(_ text: some Collection<UInt8>, userAgent: String) -> RobotsRules {
        let token = Array(userAgent.lowercased().utf8)
        var mine: [RobotsRules.Rule] = []
        var global: [RobotsRules.Rule] = []
        var foundMine = false
        var foundGlobal = false
        // The group being read: whether it names our token or `*`, and whether a rule ended its
        // user-agent lines (the next user-agent line then starts a new group).
        var groupIsMine = false
        var groupIsGlobal = false
        var inRules = false
        var bytes = Array(text.prefix(parseLimit))
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { bytes.removeFirst(3) }
        for line in bytes.split(omittingEmptySubsequences: true, whereSeparator: { $0 == 0x0A || $0 == 0x0D }) {
            guard let (key, value) = keyValue(line.prefix(maxLineLength)) else { continue }
            switch key {
            case .userAgent:
                if inRules {
                    groupIsMine = false
                    groupIsGlobal = false
                    inRules = false
                }
                if value.first == UInt8(ascii: "*") {
                    groupIsGlobal = true
                    foundGlobal = true
                } else if productToken(value) == token {
                    groupIsMine = true
                    foundMine = true
                }
            case .allow, .disallow:
                inRules = true
                guard !value.isEmpty, groupIsMine || groupIsGlobal else { continue }  // `Disallow:` allows all
                var pattern = normalized(value)
                if pattern.first != UInt8(ascii: "/"), pattern.first != UInt8(ascii: "*") {
                    pattern.insert(UInt8(ascii: "/"), at: 0)
                }
                let rule = RobotsRules.Rule(allow: key == .allow, pattern: collapsingStars(pattern))
                if groupIsMine { mine.append(rule) }
                if groupIsGlobal { global.append(rule) }
            }
        }
        if foundMine { return RobotsRules(source: .parsed, rules: mine) }
        return RobotsRules(source: .parsed, rules: foundGlobal ? global : [])
    }

    private enum Key { case userAgent, allow, disallow }

    /// The key and trimmed value of one line, comments removed; nil for lines that are no rule.
    private static func keyValue(_ line: ArraySlice<UInt8>) -> (Key, ArraySlice<UInt8>)? {
        let content = line.prefix { $0 != UInt8(ascii: "#") }
        guard let colon = content.firstIndex(of: UInt8(ascii: ":")) else { return nil }
        let name = String(decoding: trimmed(content[..<colon]), as: UTF8.self).lowercased()
        let value = trimmed(content[(colon + 1)...])
        switch name {
        // The common misspellings that Google's parser also accepts.
        case "user-agent", "useragent", "user agent": return (.userAgent, value)
        case "allow": return (.allow, value)
        case "disallow", "dissallow", "dissalow", "disalow", "diasllow", "disallaw": return (.disallow, value)
        default: return nil
        }
    }

    /// The product token at the start of a user-agent value, lower case: letters, `_` and `-`.
    private static func productToken(_ value: ArraySlice<UInt8>) -> [UInt8] {
        value.prefix { byte in
            let lower = byte | 0x20
            return (lower >= UInt8(ascii: "a") && lower <= UInt8(ascii: "z"))
                || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "-")
        }.map { $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z") ? $0 | 0x20 : $0 }
    }

    private static func trimmed(_ bytes: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        var bytes = bytes
        while let first = bytes.first, first == 0x20 || first == 0x09 { bytes.removeFirst() }
        while let last = bytes.last, last == 0x20 || last == 0x09 { bytes.removeLast() }
        return bytes
    }

    /// Sized to what it keeps: the stored rule must not keep the memory of a long run of `*` it
    /// collapsed, nor spare room from growing (the cache charges a rule by its capacity).
    private static func collapsingStars(_ pattern: [UInt8]) -> [UInt8] {
        let star = UInt8(ascii: "*")
        var kept = 0
        var previous: UInt8?
        for byte in pattern where !(byte == star && previous == star) {
            kept += 1
            previous = byte
        }
        var out: [UInt8] = []
        out.reserveCapacity(kept)
        for byte in pattern where !(byte == star && out.last == star) { out.append(byte) }
        return out
    }

    /// The form paths and patterns are compared in (RFC 9309 §2.2.2): an escape of an unreserved
    /// character is decoded (`%7E` → `~`), other escapes get upper-case hex digits, and bytes
    /// outside printable US-ASCII are percent-encoded (`ツ` → `%E3%83%84`).
    package static func normalized(_ bytes: some Collection<UInt8>) -> [UInt8] {
        let input = Array(bytes)
        var out: [UInt8] = []
        out.reserveCapacity(input.count)
        var index = 0
        while index < input.count {
            let byte = input[index]
            if byte == UInt8(ascii: "%"), index + 2 < input.count, let high = input[index + 1].hexDigitValue,
                let low = input[index + 2].hexDigitValue
            {
                let decoded = high << 4 | low
                if isUnreserved(decoded) {
                    out.append(decoded)
                } else {
                    out += [byte, hexDigit(high), hexDigit(low)]
                }
                index += 3
                continue
            }
            if byte <= 0x20 || byte >= 0x7F {
                out += [UInt8(ascii: "%"), hexDigit(byte >> 4), hexDigit(byte & 0x0F)]
            } else {
                out.append(byte)
            }
            index += 1
        }
        return out
    }

    /// Whether `pattern` (normalised, `*` and a final `$` special) matches a prefix of `path`, or
    /// all of it when it ends in `$`.
    ///
    /// The pieces between the stars match in turn, each at its leftmost place after the one
    /// before: with `*` the only wildcard, the leftmost place leaves the most room for the rest,
    /// so no other needs trying. Each piece is found with `memmem` (linear in the path), so a rule
    /// costs the path's length at worst. A hostile robots.txt of many `/*a*a*…` rules against a
    /// long path cost the pattern's length times the path's, seconds on the admission queue.
    package static func matches(_ path: [UInt8], _ pattern: [UInt8]) -> Bool {
        let star = UInt8(ascii: "*")
        let anchored = pattern.last == UInt8(ascii: "$")
        // Most patterns are plain prefixes.
        if !anchored, !pattern.contains(star) {
            return path.starts(with: pattern)
        }
        // The pieces are taken one at a time, so a rule that fails early costs no more.
        let body = pattern.dropLast(anchored ? 1 : 0)
        var end = body.firstIndex(of: star) ?? body.endIndex
        let first = body[..<end]
        guard path.starts(with: first) else { return false }
        if end == body.endIndex { return !anchored || path.count == first.count }
        var position = first.count
        var start = end + 1
        end = body[start...].firstIndex(of: star) ?? body.endIndex
        while end != body.endIndex {
            let piece = body[start..<end]
            if !piece.isEmpty {
                guard let found = find(piece, in: path, from: position) else { return false }
                position = found + piece.count
            }
            start = end + 1
            end = body[start...].firstIndex(of: star) ?? body.endIndex
        }
        let last = body[start...]
        if anchored {
            // The last piece ends the path, after what the others took.
            return path.count - position >= last.count && path.suffix(last.count).elementsEqual(last)
        }
        return last.isEmpty || find(last, in: path, from: position) != nil
    }

    /// Where `needle` first occurs in `haystack` at or after `start`.
    private static func find(_ needle: ArraySlice<UInt8>, in haystack: [UInt8], from start: Int) -> Int? {
        guard haystack.count - start >= needle.count else { return nil }
        return haystack.withUnsafeBytes { hay in
            needle.withUnsafeBytes { pin in
                guard let base = hay.baseAddress, let needle = pin.baseAddress,
                    let found = ifw_memmem(base + start, hay.count - start, needle, pin.count)
                else { return nil }
                return base.distance(to: UnsafeRawPointer(found))
            }
        }
    }

    private static func hexDigit(_ nibble: UInt8) -> UInt8 {
        nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "A") + nibble - 10
    }

    /// RFC 3986's unreserved characters: ALPHA, DIGIT, `-`, `.`, `_`, `~`.
    private static func isUnreserved(_ byte: UInt8) -> Bool {
        let lower = byte | 0x20
        return (lower >= UInt8(ascii: "a") && lower <= UInt8(ascii: "z"))
            || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9"))
            || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "_")
            || byte == UInt8(ascii: "~")
    }

    /// The path and query of a checked URL (`scheme://authority/path?query`), `/` at least.
    package static func pathAndQuery(of url: String) -> String {
        let utf8 = url.utf8
        guard let schemeEnd = utf8.firstRange(of: "://".utf8) else { return "/" }
        let rest = utf8[schemeEnd.upperBound...]
        guard let start = rest.firstIndex(where: { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") }) else {
            return "/"
        }
        let tail = rest[start...].prefix { $0 != UInt8(ascii: "#") }
        let text = String(decoding: tail, as: UTF8.self)
        return text.hasPrefix("/") ? text : "/" + text
    }
}
