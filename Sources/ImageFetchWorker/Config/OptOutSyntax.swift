/// Parsing of the `fetch.opt_out.*` keys. Pure functions of the text.
enum OptOutSyntax {
    /// `fetch.opt_out.directives`: comma-separated directive names, returned in lower case.
    static func directives(_ text: String) -> Result<Set<String>, ConfigProblem> {
        var names = Set<String>()
        for entry in text.split(separator: ",") {
            let name = ConfigText.trimmed(String(entry)).lowercased()
            if name.isEmpty { continue }
            guard isToken(name, digits: true) else {
                return .failure(
                    ConfigProblem(
                        "must be a comma-separated list of X-Robots-Tag directives "
                            + "like noai,noimageai, got \(ConfigText.quoted(name))"))
            }
            names.insert(name)
        }
        return .success(names)
    }

    /// `fetch.opt_out.user_agent`: a robots.txt product token (RFC 9309 §2.2.1: letters, `_`, `-`).
    static func productToken(_ text: String) throws(ConfigurationKey.Invalid) -> String {
        let token = ConfigText.trimmed(text)
        guard isToken(token, digits: false), token.utf8.count <= 128 else {
            throw ConfigurationKey.Invalid("must be a product token of letters, '_' and '-', like image-fetch-worker")
        }
        return token
    }

    private static func isToken(_ text: String, digits: Bool) -> Bool {
        !text.isEmpty
            && text.utf8.allSatisfy { byte in
                let lower = byte | 0x20
                return (lower >= UInt8(ascii: "a") && lower <= UInt8(ascii: "z")) || byte == UInt8(ascii: "_")
                    || byte == UInt8(ascii: "-") || (digits && byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9"))
            }
    }
}
