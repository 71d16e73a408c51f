import Foundation
import ImageFetchWorker
import Testing

/// TLS to the broker: a second RabbitMQ node with a TLS listener on 127.0.0.1, certificates made
/// with `openssl` for the test, and the worker process over `amqps://`.
///
/// Starting a node costs about 10 s, so the suite starts one and runs every TLS check against it
/// in one test.
@Suite(.enabled(if: TestBroker.isAvailable, "needs the RabbitMQ that `make test` starts"), .serialized)
struct BrokerTLSTests {
    /// A CA, a server certificate for `localhost` and 127.0.0.1, a client certificate, and a
    /// second, unrelated CA, in a folder the rabbitmq user can read.
    struct Certificates {
        let folder: String
        var ca: String { folder + "/ca.pem" }
        var serverCert: String { folder + "/server.pem" }
        var serverKey: String { folder + "/server.key" }
        var clientCert: String { folder + "/client.pem" }
        var clientKey: String { folder + "/client.key" }
        var otherCA: String { folder + "/other-ca.pem" }

        static func make() throws -> Certificates {
            let folder = FileManager.default.temporaryDirectory.appendingPathComponent(
                "ifw-tls-\(UUID().uuidString.prefix(8))"
            ).path
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            let script = """
                set -euo pipefail
                cd "$1"
                key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }
                key ca.key
                openssl req -x509 -new -key ca.key -sha256 -days 2 -subj /CN=ifw-test-ca -out ca.pem
                key other-ca.key
                openssl req -x509 -new -key other-ca.key -sha256 -days 2 -subj /CN=ifw-other-ca -out other-ca.pem
                issue() { # name, subject, extensions
                  key "$1.key"
                  openssl req -new -key "$1.key" -subj "$2" -out "$1.csr"
                  printf '%s\\n' "$3" >"$1.ext"
                  openssl x509 -req -in "$1.csr" -CA ca.pem -CAkey ca.key -CAcreateserial -sha256 -days 2 \\
                    -extfile "$1.ext" -out "$1.pem" 2>/dev/null
                }
                issue server /CN=localhost "subjectAltName=DNS:localhost,IP:127.0.0.1
                extendedKeyUsage=serverAuth"
                issue client /CN=ifw-test-client "extendedKeyUsage=clientAuth"
                chmod 0755 .
                chmod 0644 ./*
                """
            guard try TestBroker.run("/bin/bash", ["-c", script, "certificates", folder]) == 0 else {
                throw TestS3Error("openssl could not make the test certificates in \(folder)")
            }
            return Certificates(folder: folder)
        }
    }

    /// A second node of scripts/rabbitmq.sh with a plain listener on `port` and TLS on `tlsPort`.
    final class TLSNode: @unchecked Sendable {
        let port: Int
        let tlsPort: Int
        let folder: String
        let script: String

        init(certificates: Certificates) throws {
            guard let script = TestBroker.script else { throw TestS3Error("IFW_TEST_RABBITMQ_SCRIPT is not set") }
            self.script = script
            folder =
                FileManager.default.temporaryDirectory.appendingPathComponent(
                    "ifw-tls-rabbitmq-\(UUID().uuidString.prefix(8))"
                ).path
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            chmod(folder, 0o755)
            // The node's distribution port is port + 20000, so keep to the range below 45536.
            let startLog = folder + ".start.log"
            var chosen: (Int, Int)?
            for candidate in stride(from: 5700, to: 5780, by: 2) {
                let tls = candidate + 1
                let extra = """
                    listeners.ssl.default = 127.0.0.1:\(tls)
                    ssl_options.cacertfile = \(certificates.ca)
                    ssl_options.certfile = \(certificates.serverCert)
                    ssl_options.keyfile = \(certificates.serverKey)
                    ssl_options.verify = verify_peer
                    ssl_options.fail_if_no_peer_cert = false
                    """
                if TLSNode.portAnswers(tls) { continue }
                let status = try TestBroker.run(
                    script, ["start"],
                    environment: [
                        "IFW_AMQP_PORT": "\(candidate)", "IFW_RABBIT_DIR": folder, "IFW_RABBIT_EXTRA_CONF": extra,
                        "IFW_RABBIT_OWNER_PID": "\(getpid())", "IFW_RABBIT_TIMEOUT": "90",
                        // No management plugin: its listener would clash with the main test node's.
                        "IFW_RABBIT_PLUGINS": "", "IFW_MGMT_PORT": "\(candidate + 10000)",
                    ], log: startLog)
                if status == 0 {
                    chosen = (candidate, tls)
                    break
                }
                if status != 98 {
                    let log = (try? String(contentsOfFile: startLog, encoding: .utf8)) ?? ""
                    throw TestS3Error("the TLS RabbitMQ node did not start (status \(status)):\n\(log.suffix(3000))")
                }
            }
            guard let chosen else { throw TestS3Error("no free port for the TLS RabbitMQ node") }
            (port, tlsPort) = chosen
        }

        var plainURL: String { "amqp://guest:guest@127.0.0.1:\(port)/%2F" }

        func destroy() {
            _ = try? TestBroker.run(
                script, ["destroy"], environment: ["IFW_AMQP_PORT": "\(port)", "IFW_RABBIT_DIR": folder])
        }

        static func portAnswers(_ port: Int) -> Bool {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            defer { close(fd) }
            return TestBroker.withLoopback(port: port) { connect(fd, $0, $1) == 0 }
        }
    }

    @Test(.timeLimit(.minutes(5)))
    func amqpsEndToEndAndCertificateErrors() async throws {
        let certificates = try Certificates.make()
        let node = try TLSNode(certificates: certificates)
        defer { node.destroy() }
        let origin = try await TestOrigin.start()

        // Producer and collector use the node's plain listener; only the worker speaks TLS.
        var configuration = try TestBroker.configuration("tls")
        configuration.amqp.urls = try AMQPURL.parseList(node.plainURL)
        let bodies = (0..<50).map { JobPublisher.jobBody(id: "tls-\($0)", url: origin.url("/ok.png?n=\($0)")) }
        #expect(try TestBroker.publish(configuration, bodies: bodies) == 50)
        let results = try QueueCollector(configuration, queue: configuration.queue.results)
        defer { results.close() }

        func environment(_ extra: [String: String]) -> [String: String] {
            TestBroker.environment(configuration, storage: WorkerEndToEndTests.storageFolder())
                .merging(extra) { _, new in new }
        }

        // 1. Over amqps:// with the test CA and a client certificate: every job is answered.
        let worker = try WorkerProcess(
            environment: environment([
                "AMQP_URL": "amqps://guest:guest@localhost:\(node.tlsPort)/%2F",
                "AMQP_TLS_CA_FILE": certificates.ca,
                "AMQP_TLS_CERT_FILE": certificates.clientCert,
                "AMQP_TLS_KEY_FILE": certificates.clientKey,
            ]))
        await results.wait(for: 50, timeout: 60)
        #expect(results.objects.count == 50, "worker log:\n\(worker.log.suffix(3000))")
        #expect(results.objects.allSatisfy { $0["status"] as? String == "ok" })
        #expect(worker.log.contains("amqps://guest:***@localhost:\(node.tlsPort)"), "\(worker.log.suffix(2000))")
        #expect(await worker.stop() == 0)

        // 2. The wrong CA: the worker refuses the broker and exits with one line naming the check.
        let wrongCA = try WorkerProcess(
            environment: environment([
                "AMQP_URL": "amqps://guest:guest@localhost:\(node.tlsPort)/%2F",
                "AMQP_TLS_CA_FILE": certificates.otherCA,
            ]))
        let wrongCAStatus = await wrongCA.waitForExit(timeout: 30)
        #expect(wrongCAStatus != nil && wrongCAStatus != 0, "\(wrongCA.log)")
        let refusal = wrongCA.log.split(separator: "\n").filter { $0.contains("cannot start") }
        #expect(refusal.count == 1, "\(wrongCA.log)")
        #expect(refusal.first?.contains("TLS") == true, "\(wrongCA.log)")
        #expect(
            refusal.first?.contains(certificates.otherCA) == true, "the line should name the CA file: \(wrongCA.log)")

        // 3. 127.0.0.1 is in the certificate only as an IP SAN. rabbitmq-c 0.11 matches the DNS
        //    names (and the common name) of a certificate, so hostname verification refuses it.
        let byAddress = try WorkerProcess(
            environment: environment([
                "AMQP_URL": "amqps://guest:guest@127.0.0.1:\(node.tlsPort)/%2F",
                "AMQP_TLS_CA_FILE": certificates.ca,
            ]))
        let byAddressStatus = await byAddress.waitForExit(timeout: 30)
        #expect(byAddressStatus == 1, "\(byAddress.log)")
        #expect(byAddress.log.contains("hostname verification failed"), "\(byAddress.log)")

        // 4. A CA file that does not exist, or a key that is not the certificate's: a configuration
        // error at start-up (78), with the key in the one line.
        let missing = try WorkerProcess(
            environment: environment([
                "AMQP_URL": "amqps://guest:guest@localhost:\(node.tlsPort)/%2F",
                "AMQP_TLS_CA_FILE": certificates.folder + "/missing.pem",
            ]))
        #expect(await missing.waitForExit(timeout: 30) == 78)
        #expect(
            missing.log.contains("configuration error: amqp.tls.ca_file: cannot be read"), "\(missing.log)")
        let mismatched = try WorkerProcess(
            environment: environment([
                "AMQP_URL": "amqps://guest:guest@localhost:\(node.tlsPort)/%2F",
                "AMQP_TLS_CA_FILE": certificates.ca, "AMQP_TLS_CERT_FILE": certificates.clientCert,
                "AMQP_TLS_KEY_FILE": certificates.serverKey,
            ]))
        #expect(await mismatched.waitForExit(timeout: 30) == 78)
        #expect(
            mismatched.log.contains("configuration error: amqp.tls.key_file: is not the private key"),
            "\(mismatched.log)")

        // 5. verify=false connects to the wrong-CA broker, but says loudly that it is insecure.
        let insecure = try WorkerProcess(
            environment: environment([
                "AMQP_URL": "amqps://guest:guest@localhost:\(node.tlsPort)/%2F",
                "AMQP_TLS_CA_FILE": certificates.otherCA,
                "AMQP_TLS_VERIFY": "false",
            ]))
        #expect(await eventually(timeout: 30) { insecure.log.contains("worker started") }, "\(insecure.log)")
        #expect(
            insecure.log.contains("warning") && insecure.log.contains("INSECURE: amqp.tls.verify=false"),
            "\(insecure.log)")
        #expect(await insecure.stop() == 0)

        try await origin.shutdown()
    }
}
