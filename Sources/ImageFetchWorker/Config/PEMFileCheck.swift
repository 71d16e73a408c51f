import CShims

/// The TLS files a configuration names are read at start-up, with the OpenSSL that libcurl and
/// rabbitmq-c load them with later, so that a wrong path or a file of the wrong kind stops the
/// worker with exit 78 instead of failing every connection.
extension Check {
    /// A CA bundle or a client certificate: a readable file with at least one PEM certificate.
    static func pemCertificates(_ path: String) throws(ConfigurationKey.Invalid) -> String {
        let path = try readableFile(path)
        switch ifw_pem_certificate_count(path) {
        case ..<0: throw .init("is not a PEM file that OpenSSL can read")
        case 0: throw .init("holds no PEM certificate")
        default: return path
        }
    }

    /// A client private key: a readable PEM key that opens without a password.
    static func pemPrivateKey(_ path: String) throws(ConfigurationKey.Invalid) -> String {
        let path = try readableFile(path)
        guard ifw_pem_private_key_readable(path) == 1 else {
            throw .init("holds no PEM private key that opens without a password")
        }
        return path
    }

    /// Whether the first certificate of `certificate` and the key in `key` are one pair.
    static func pemPair(certificate: String, key: String) -> Bool {
        ifw_pem_key_matches_certificate(certificate, key) == 1
    }
}
