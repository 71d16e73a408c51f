import Foundation
import Testing

@testable import ImageFetchWorker

/// The TLS files of `amqp.tls.*` and `fetch.tls.ca_file` are read at start-up, so that a wrong file
/// stops the worker with exit 78 and one line, instead of failing at connect (exit 1) or on every
/// fetch (`tls_failure`).
@Suite("TLS files are checked at load")
struct PEMFileCheckTests {
    private func problem(_ environment: [String: String]) -> String {
        ConfigurationLoader.problem([], environment)
    }

    @Test func goodFilesLoad() throws {
        let files = try TestPEMFiles.shared()
        let config = try ConfigurationLoader.load(
            arguments: [],
            environment: [
                "AMQP_TLS_CA_FILE": files.ca, "AMQP_TLS_CERT_FILE": files.certificate, "AMQP_TLS_KEY_FILE": files.key,
                "FETCH_TLS_CA_FILE": files.ca,
            ])
        #expect(config.amqp.tls.caFile == files.ca && config.amqp.tls.keyFile == files.key)
        #expect(config.fetch.tls.caFile == files.ca)
    }

    @Test(arguments: ["AMQP_TLS_CA_FILE", "FETCH_TLS_CA_FILE"])
    func aCABundleMustHoldPEMCertificates(variable: String) throws {
        let files = try TestPEMFiles.shared()
        let key = variable == "AMQP_TLS_CA_FILE" ? "amqp.tls.ca_file" : "fetch.tls.ca_file"
        for (path, expected) in [
            (files.folder + "/missing.pem", "cannot be read"), (files.notPEM, "holds no PEM certificate"),
            (files.text, "holds no PEM certificate"), (files.key, "holds no PEM certificate"),
        ] {
            let line = problem([variable: path])
            #expect(line.hasPrefix("configuration error: \(key): "), "\(line)")
            #expect(line.contains(expected), "\(path): \(line)")
        }
    }

    @Test func aClientCertificateMustBeACertificate() throws {
        let files = try TestPEMFiles.shared()
        let line = problem(["AMQP_TLS_CERT_FILE": files.key, "AMQP_TLS_KEY_FILE": files.key])
        #expect(line.hasPrefix("configuration error: amqp.tls.cert_file: holds no PEM certificate"), "\(line)")
    }

    @Test func aClientKeyMustOpenWithoutAPasswordAndMatchTheCertificate() throws {
        let files = try TestPEMFiles.shared()
        for (path, expected) in [
            (files.folder + "/missing.key", "cannot be read"),
            (files.certificate, "holds no PEM private key that opens without a password"),
            (files.encryptedKey, "holds no PEM private key that opens without a password"),
            (files.otherKey, "is not the private key of amqp.tls.cert_file's certificate"),
        ] {
            let line = problem(["AMQP_TLS_CERT_FILE": files.certificate, "AMQP_TLS_KEY_FILE": path])
            #expect(line.hasPrefix("configuration error: amqp.tls.key_file: \(expected)"), "\(path): \(line)")
            #expect(!line.contains("secret"))
        }
    }
}
