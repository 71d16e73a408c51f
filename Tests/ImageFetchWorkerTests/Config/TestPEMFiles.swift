import Foundation

@testable import ImageFetchWorker

/// PEM files made once per test process with `openssl`, in a folder under the temporary directory
/// that the test process removes when it exits: a CA, a client certificate and its key, a
/// second key, an encrypted key, the CA in DER, a text file that only mentions a PEM header, and
/// copies of the pair for tests that need distinct paths (`certificate("f")`, `key("f")`).
struct TestPEMFiles: Sendable {
    let folder: String
    var ca: String { folder + "/ca.pem" }
    var certificate: String { folder + "/client.pem" }
    var key: String { folder + "/client.key" }
    var otherKey: String { folder + "/other.key" }
    var encryptedKey: String { folder + "/encrypted.key" }
    var notPEM: String { folder + "/ca.der" }
    var text: String { folder + "/notes.txt" }
    /// A copy of the client certificate (also a valid CA bundle) named after `name`.
    func certificate(_ name: String) -> String { folder + "/client-\(name).pem" }
    /// A copy of the client key named after `name`; it matches every `certificate(_:)`.
    func key(_ name: String) -> String { folder + "/client-\(name).key" }

    private static let made: Result<TestPEMFiles, ConfigurationError> = make()

    static func shared() throws -> TestPEMFiles { try made.get() }

    /// The paths even when `openssl` failed: tests that use them then fail on "cannot be read".
    static var paths: TestPEMFiles { (try? made.get()) ?? TestPEMFiles(folder: "/nonexistent-ifw-pem") }

    private static let folder = FileManager.default.temporaryDirectory.appendingPathComponent(
        "ifw-pem-\(UUID().uuidString.prefix(8))"
    ).path

    private static func make() -> Result<TestPEMFiles, ConfigurationError> {
        // Removed when the test process exits, also outside `make test`'s own temporary folder.
        atexit { try? FileManager.default.removeItem(atPath: TestPEMFiles.folder) }
        let script = """
            set -euo pipefail
            mkdir -p "$1" && cd "$1"
            key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }
            key ca.key
            openssl req -x509 -new -key ca.key -sha256 -days 2 -subj /CN=ifw-pem-ca -out ca.pem
            openssl x509 -in ca.pem -outform DER -out ca.der
            key client.key
            openssl req -new -key client.key -subj /CN=ifw-pem-client -out client.csr
            openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 -out client.pem 2>/dev/null
            key other.key
            openssl pkey -in other.key -aes256 -passout pass:secret -out encrypted.key
            echo "-----BEGIN CERTIFICATE----- is only text here" > notes.txt
            for name in f e c k; do cp client.pem "client-$name.pem"; cp client.key "client-$name.key"; done
            """
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        process.arguments = ["-c", script, "pem", folder]
        do {
            try process.run()
            process.waitUntilExit()
        } catch {
            return .failure(ConfigurationError(key: "test", problem: "cannot run openssl: \(error)"))
        }
        guard process.terminationStatus == 0 else {
            return .failure(ConfigurationError(key: "test", problem: "openssl could not make the files in \(folder)"))
        }
        return .success(TestPEMFiles(folder: folder))
    }
}
