import Foundation

/// URLs as they may be shown outside the process: in spans, logs and stored metadata.
extension URLPolicy {
    /// `url` without user information, query or fragment (any may hold a secret), and its host.
    package static func redacted(_ url: String) -> (url: String, host: String?) {
        var text = Substring(url)
        if let cut = text.firstIndex(where: { $0 == "?" || $0 == "#" }) { text = text[..<cut] }
        guard let scheme = text.range(of: "://") else { return (String(text), nil) }
        let afterScheme = text[scheme.upperBound...]
        let authorityEnd = afterScheme.firstIndex(of: "/") ?? afterScheme.endIndex
        var authority = afterScheme[..<authorityEnd]
        if let at = authority.lastIndex(of: "@") { authority = authority[authority.index(after: at)...] }
        let host: Substring
        if authority.hasPrefix("["), let close = authority.firstIndex(of: "]") {
            host = authority[authority.index(after: authority.startIndex)..<close]
        } else {
            host = authority.split(separator: ":", maxSplits: 1).first ?? authority
        }
        return (String(text[..<scheme.upperBound]) + authority + afterScheme[authorityEnd...], String(host))
    }

    /// Why an operator's URL (an API's, a collector's) cannot be read as written, or nil: an `@`
    /// after its host is a password's unencoded `/`, `?` or `#`. The rest of the password went
    /// into the path, and the host read is a piece of it, which a message or a log would show.
    package static func atAfterHostProblem(_ components: URLComponents) -> String? {
        let rest =
            components.percentEncodedPath + (components.percentEncodedQuery ?? "")
            + (components.percentEncodedFragment ?? "")
        guard rest.contains("@") else { return nil }
        return "has an @ after its host: percent-encode / ? # in the password (%2F %3F %23)"
    }
}
