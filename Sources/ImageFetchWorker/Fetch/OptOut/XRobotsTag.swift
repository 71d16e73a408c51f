/// The `X-Robots-Tag` response header, as Google documents its de-facto syntax: each field is a
/// comma-separated list of directives, optionally scoped by a `useragent:` prefix, which applies
/// to the rest of that field (`X-Robots-Tag: otherbot: noindex, nofollow`). Directives and user
/// agents compare without case; `none` means `noindex, nofollow`. Pure.
package enum XRobotsTag {
    /// Directives that carry a value after a colon, so that `name:` before them is not read as a
    /// user agent (`unavailable_after: 25 Jun 2010 15:00:00 PST`).
    static let valued: Set<String> = ["unavailable_after", "max-snippet", "max-image-preview", "max-video-preview"]

    /// The directives of the fields `values` that apply to `userAgent` (a product token), lower
    /// case, in order, `none` expanded; a valued directive is named without its value.
    package static func directives(_ values: [String], userAgent: String) -> [String] {
        let agent = userAgent.lowercased()
        var found: [String] = []
        for value in values {
            var scope: String?  // nil: every crawler
            for item in value.split(separator: ",", omittingEmptySubsequences: true) {
                var entry = trimmed(item).lowercased()
                if let colon = entry.firstIndex(of: ":") {
                    let name = trimmed(entry[..<colon])
                    if !valued.contains(name), isToken(name) {
                        scope = name
                        entry = trimmed(entry[entry.index(after: colon)...])
                    }
                }
                if let colon = entry.firstIndex(of: ":") { entry = trimmed(entry[..<colon]) }
                guard !entry.isEmpty, scope == nil || scope == agent else { continue }
                if entry == "none" {
                    found += ["noindex", "nofollow"]
                } else {
                    found.append(entry)
                }
            }
        }
        return found
    }

    /// A user-agent token: letters, digits, `-` and `_` (a directive name with a space is not one).
    private static func isToken(_ text: String) -> Bool {
        !text.isEmpty
            && text.utf8.allSatisfy { byte in
                let lower = byte | 0x20
                return (lower >= UInt8(ascii: "a") && lower <= UInt8(ascii: "z"))
                    || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9"))
                    || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_")
            }
    }

    private static func trimmed<S: StringProtocol>(_ text: S) -> String {
        String(OptOutText.trimmed(text[...]))
    }
}

/// Which response headers forbid a job: `fetch.opt_out.*`. Pure; the fetch engine evaluates it
/// once the final response's headers are in, before any body byte is kept, and stops the
/// transfer when it finds a signal.
package struct OptOutPolicy: Sendable, Equatable {
    /// `fetch.opt_out.directives`, lower case; empty ignores `X-Robots-Tag`.
    package var directives: Set<String>
    /// `fetch.opt_out.tdm_reservation`.
    package var tdmReservation: Bool
    /// `fetch.opt_out.user_agent`: the product token a scoped `X-Robots-Tag` must name.
    package var userAgent: String

    package init(directives: Set<String>, tdmReservation: Bool, userAgent: String) {
        self.directives = directives
        self.tdmReservation = tdmReservation
        self.userAgent = userAgent
    }

    /// Whether any header can forbid a job at all.
    package var isActive: Bool { !directives.isEmpty || tdmReservation }

    /// The signal in a response's `X-Robots-Tag` fields and `tdm-reservation` fields, if any.
    package func signal(xRobotsTag: [String], tdmReservation reservations: [String]) -> OptOutSignal? {
        if !directives.isEmpty, !xRobotsTag.isEmpty,
            let directive = XRobotsTag.directives(xRobotsTag, userAgent: userAgent).first(where: directives.contains)
        {
            return .xRobotsTag(directive: directive)
        }
        // TDMRep (W3C CG report, §3.2.1): 1 reserves the rights, 0 does not; anything else is ignored.
        if tdmReservation, reservations.contains(where: { OptOutText.trimmed($0[...]) == "1" }) {
            return .tdmReservation
        }
        return nil
    }
}

enum OptOutText {
    /// `text` without leading and trailing white space.
    static func trimmed<S: StringProtocol>(_ text: S) -> S.SubSequence {
        var text = text[...]
        while let first = text.first, first.isWhitespace { text = text.dropFirst() }
        while let last = text.last, last.isWhitespace { text = text.dropLast() }
        return text
    }
}
