/// One broker address parsed from `amqp.url`: `amqp[s]://user:password@host:port/vhost`.
///
/// ``description`` never shows the password.
public struct AMQPURL: Sendable, Equatable, CustomStringConvertible {
    public var tls: Bool
    public var host: String
    public var port: Int
    public var user: String
    public var password: String
    /// The virtual host, percent-decoded (`%2F` is `/`).
    public var vhost: String

    public init(tls: Bool = false, host: String, port: Int? = nil, user: String = "guest",
                password: String = "guest", vhost: String = "/") {
        self.tls = tls
        self.host = host
        self.port = port ?? (tls ? 5671 : 5672)
        self.user = user
        self.password = password
        self.vhost = vhost
    }

    /// `amqp://guest:guest@localhost:5672/%2F`.
    public static let `default` = AMQPURL(host: "localhost")

    /// The URL with the password replaced by `***`, safe to log.
    public var description: String {
        let scheme = tls ? "amqps" : "amqp"
        let vhostPart = vhost == "/" ? "%2F" : (vhost.addingPercentEncodingForVhost())
        return "\(scheme)://\(user):***@\(host):\(port)/\(vhostPart)"
    }
}

extension String {
    fileprivate func addingPercentEncodingForVhost() -> String {
        var out = ""
        for byte in self.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"),
                UInt8(ascii: "."), UInt8(ascii: "~"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                let hex = String(byte, radix: 16, uppercase: true)
                out += "%" + (hex.count == 1 ? "0" + hex : hex)
            }
        }
        return out
    }
}
