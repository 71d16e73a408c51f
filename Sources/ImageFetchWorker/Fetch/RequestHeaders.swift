/// One HTTP request header: `fetch.headers`, or one of a job's `headers`.
public struct HTTPHeaderField: Sendable, Hashable {
    /// The name as given; compared without regard to case.
    public var name: String
    /// The value, without CR, LF or other control characters except tab.
    public var value: String

    public init(name: String, value: String) {
        self.name = name
        self.value = value
    }
}

/// The rules for extra request headers, and how the configured ones and a job's combine.
///
/// Pure functions, no I/O.
package enum RequestHeaders {
    /// The longest value accepted, in bytes of UTF-8.
    package static let maxValueBytes = 4096
    /// The most headers a job may carry.
    package static let maxJobHeaders = 16

    /// Names that frame the message or the connection, or that libcurl sets itself: never extra
    /// headers, whatever the configuration says.
    package static let reservedNames: Set<String> = [
        "host", "content-length", "transfer-encoding", "connection", "keep-alive", "upgrade", "te", "trailer",
        "expect", "proxy-authorization", "proxy-connection", "http2-settings",
    ]

    /// Whether `name` is an HTTP token (RFC 9110 `tchar`s), 1 to 64 bytes.
    package static func isValidName(_ name: String) -> Bool {
        let bytes = name.utf8
        guard (1...64).contains(bytes.count) else { return false }
        return bytes.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"):
                return true
            default:
                return "!#$%&'*+-.^_`|~".utf8.contains(byte)
            }
        }
    }

    /// What is wrong with a value: a CR, LF or other control character (tab aside), or more than
    /// ``maxValueBytes``; nil when it is fine. Never repeats the value.
    package static func valueProblem(_ value: String) -> String? {
        if value.utf8.count > maxValueBytes { return "is longer than \(maxValueBytes) bytes" }
        for byte in value.utf8 where (byte < 0x20 && byte != 0x09) || byte == 0x7F {
            return byte == 0x0D || byte == 0x0A ? "contains a CR or LF" : "contains a control character"
        }
        return nil
    }

    /// Why a job's headers are refused. Names are the job's own (valid tokens by then), never a
    /// value.
    package enum JobHeaderRefusal: Error, Sendable, Equatable {
        /// More than ``RequestHeaders/maxJobHeaders``.
        case tooMany
        /// A name that is not an HTTP token of 1 to 64 bytes.
        case invalidName
        /// Not in `fetch.job_headers`, or a reserved name.
        case notAllowed(name: String)
        /// The same name twice, without regard to case.
        case repeated(name: String)
        /// The value's ``RequestHeaders/valueProblem(_:)``.
        case invalidValue(name: String, problem: String)
    }

    /// Checks a job's headers against `fetch.job_headers` (lower-case names) and the rules above.
    package static func checkJobHeaders(_ fields: [HTTPHeaderField], allowed: Set<String>) -> JobHeaderRefusal? {
        if fields.isEmpty { return nil }
        guard fields.count <= maxJobHeaders else { return .tooMany }
        var seen = Set<String>()
        for field in fields {
            guard isValidName(field.name) else { return .invalidName }
            let lower = field.name.lowercased()
            guard allowed.contains(lower), !reservedNames.contains(lower) else { return .notAllowed(name: field.name) }
            guard seen.insert(lower).inserted else { return .repeated(name: field.name) }
            if let problem = valueProblem(field.value) { return .invalidValue(name: field.name, problem: problem) }
        }
        return nil
    }

    /// The request's header lines for libcurl: the configured headers, then the job's; a job's
    /// header replaces a configured one of the same name, and an empty job value removes it.
    package static func lines(configured: [HTTPHeaderField], job: [HTTPHeaderField]) -> [String] {
        if configured.isEmpty && job.isEmpty { return [] }
        var lines: [String] = []
        lines.reserveCapacity(configured.count + job.count)
        for field in configured where !job.contains(where: { $0.name.lowercased() == field.name.lowercased() }) {
            lines.append(field.name + ": " + field.value)
        }
        for field in job where !field.value.isEmpty {
            lines.append(field.name + ": " + field.value)
        }
        return lines
    }
}
