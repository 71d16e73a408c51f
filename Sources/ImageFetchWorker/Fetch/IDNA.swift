import CShims

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Internationalised domain names: IDNA 2008 with the UTS #46 mapping (non-transitional), through
/// libidn2, plus a check for labels that imitate Latin letters.
///
/// A host with a non-ASCII character or an `xn--` label is turned into its ASCII form
/// (`bücher.example` → `xn--bcher-kva.example`), which is what is resolved, connected and checked
/// against the host lists. A name libidn2 refuses (a disallowed character, a bad `xn--` label, a
/// bidi or joiner rule broken) is refused, and so is a confusable label:
///
/// - a label that mixes Latin, Greek and Cyrillic letters (`аpple`, with a Cyrillic `а`);
/// - a label written only with Cyrillic (or only Greek) letters that all look like Latin ones
///   (`аррӏе`), unless the top-level label is in that script too (`.рф`).
///
/// This covers the homographs of Latin names that browsers block; it is not the whole of UTS #39.
/// Pure apart from libidn2's calls; no I/O.
package enum IDNA {
    /// Whether `host` needs the conversion: it has a byte outside ASCII or an `xn--` label.
    package static func needsConversion<Bytes: Collection>(_ host: Bytes) -> Bool where Bytes.Element == UInt8 {
        if host.contains(where: { $0 >= 0x80 }) { return true }
        // One pass without splitting (every job's host comes through here): how many bytes of
        // "xn--" the current label starts with, case-insensitively; -1 once it cannot.
        var matched = 0
        for byte in host {
            if byte == UInt8(ascii: ".") {
                matched = 0
                continue
            }
            guard matched >= 0 else { continue }
            let expected = matched == 0 ? UInt8(ascii: "x") : matched == 1 ? UInt8(ascii: "n") : UInt8(ascii: "-")
            guard byte | 0x20 == expected else {
                matched = -1
                continue
            }
            matched += 1
            if matched == 4 { return true }
        }
        return false
    }

    /// The ASCII (punycode) form of `host`, lower case, or why it is refused (a short text that
    /// does not repeat the name).
    package static func toASCII(_ host: String) -> Result<String, IDNAProblem> {
        guard let ascii = call(ifw_idna_to_ascii, host) else {
            return .failure(IDNAProblem("the internationalised host name is not valid under IDNA 2008"))
        }
        // The Unicode form shows what the reader sees; `xn--` input is checked the same way.
        guard let unicode = call(ifw_idna_to_unicode, ascii) else {
            return .failure(IDNAProblem("the internationalised host name is not valid under IDNA 2008"))
        }
        if let problem = confusableProblem(unicode) { return .failure(problem) }
        return .success(ascii.lowercased())
    }

    private static func call(
        _ function: (UnsafePointer<CChar>, UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) -> Int32, _ input: String
    ) -> String? {
        var output: UnsafeMutablePointer<CChar>? = nil
        let code = input.withCString { function($0, &output) }
        defer { ifw_idna_free(output) }
        guard code == 0, let output else { return nil }
        return String(cString: output)
    }

    /// Why a host in Unicode form is confusable, or nil.
    package static func confusableProblem(_ unicodeHost: String) -> IDNAProblem? {
        let labels = unicodeHost.split(separator: ".")
        let topScript = labels.last.map(Self.script(of:)) ?? .none
        for label in labels {
            var scripts = Set<Script>()
            var allLookalikes = true
            for scalar in label.unicodeScalars {
                let script = Self.script(of: scalar)
                guard script != .none else { continue }
                scripts.insert(script)
                if script == .latin || script == .other || !Self.latinLookalikes.contains(scalar) {
                    allLookalikes = false
                }
            }
            let mixed = scripts.subtracting([.other]).count > 1
            if mixed {
                return IDNAProblem("a label of the host name mixes Latin, Greek or Cyrillic letters")
            }
            if allLookalikes, let only = scripts.first, scripts.count == 1, only == .greek || only == .cyrillic,
                topScript != only
            {
                return IDNAProblem("a label of the host name is made of letters that imitate Latin ones")
            }
        }
        return nil
    }

    enum Script: Hashable {
        case none, latin, greek, cyrillic, other
    }

    /// The script of a label's letters: one script, `.other` for a mix with other scripts.
    private static func script(of label: Substring) -> Script {
        var found = Script.none
        for scalar in label.unicodeScalars {
            let script = script(of: scalar)
            if script == .none { continue }
            if found == .none { found = script } else if found != script { return .other }
        }
        return found
    }

    /// Latin, Greek, Cyrillic, another script's letter, or none (digits, `-`, marks, symbols).
    static func script(of scalar: Unicode.Scalar) -> Script {
        let value = scalar.value
        switch value {
        case 0x41...0x5A, 0x61...0x7A, 0xAA, 0xBA, 0xC0...0xD6, 0xD8...0xF6, 0xF8...0x2AF, 0x1D00...0x1D7F,
            0x1E00...0x1EFF, 0x2C60...0x2C7F, 0xA720...0xA7FF, 0xAB30...0xAB6F, 0xFF21...0xFF3A, 0xFF41...0xFF5A:
            return .latin
        case 0x370...0x3FF, 0x1F00...0x1FFF:
            return scalar.properties.isAlphabetic ? .greek : .none
        case 0x400...0x52F, 0x1C80...0x1C8F, 0x2DE0...0x2DFF, 0xA640...0xA69F:
            return scalar.properties.isAlphabetic ? .cyrillic : .none
        default:
            return value >= 0x80 && scalar.properties.isAlphabetic
                && scalar.properties.generalCategory != .nonspacingMark
                ? .other : .none
        }
    }

    /// Cyrillic and Greek small letters that read as Latin ones in common fonts.
    static let latinLookalikes: Set<Unicode.Scalar> = Set(
        "асԁеԍһіјӏорԛѕԝхуүпгѵѡыъҽ".unicodeScalars
            + "αειικνορτυχγηω".unicodeScalars)
}

/// Why a host name failed ``IDNA/toASCII(_:)``; the text names the rule, never the name.
package struct IDNAProblem: Error, Equatable {
    package var message: String
    init(_ message: String) { self.message = message }
}
