import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A real HTTPS origin for tests: nginx on loopback with TLS 1.3, HTTP/2 offered by ALPN (or
/// not), a certificate for several host names signed by a test CA made with `openssl` in a
/// temporary folder, and an access log the test reads:
/// `$connection $connection_requests $ssl_session_reused $server_protocol $host $request_uri $status`.
///
/// Every name listens on its own loopback address (`127.0.0.2`, `127.0.0.3`, …) on one port;
/// ``resolve`` gives the `fetch.resolve` entries that map them there. Paths: `/ok.png` (a 12 KiB
/// PNG), `/sleep.png` (the same after 300 ms, for transfers that must overlap), `/n/<anything>`
/// (the same PNG under any name).
///
/// One process (`master_process off`), so TLS session tickets are the same key for every
/// connection and a session can be resumed.
final class TLSOrigin: @unchecked Sendable {  // set up once, then read-only, apart from `process`
    let directory: URL
    let names: [String]
    let port: Int
    /// The CA bundle that verifies the origin's certificate.
    var caFile: String { directory.appendingPathComponent("ca.pem").path }
    /// The server's certificate and key, for other test servers under the same names.
    var serverCertificate: String { path("server.pem") }
    var serverKey: String { path("server-key.pem") }
    /// Another CA's bundle, which does not verify it.
    var otherCAFile: String { directory.appendingPathComponent("other-ca.pem").path }
    private var process: Process?

    struct Options {
        var http2 = true
        /// nginx's `keepalive_timeout`; 0 closes every HTTP/1.1 connection after its request.
        var keepaliveSeconds = 65
    }

    /// The body of every path: ``TestOrigin/okBody``, a PNG the worker accepts.
    static let pngBody = TestOrigin.okBody

    static func start(names: [String], options: Options = Options()) throws -> TLSOrigin {
        let origin = try TLSOrigin(names: names, options: options)
        try origin.launch()
        return origin
    }

    private init(names: [String], options: Options) throws {
        self.names = names
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("ifw-tls-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        port = try TestBroker.freePort()
        try makeCertificates()
        let root = directory.appendingPathComponent("www")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        try Data(Self.pngBody).write(to: root.appendingPathComponent("ok.png"))
        try config(options).write(to: directory.appendingPathComponent("nginx.conf"), atomically: true, encoding: .utf8)
    }

    /// The loopback address of the n-th name.
    func address(of name: String) -> String {
        "127.0.0.\((names.firstIndex(of: name) ?? 0) + 2)"
    }

    /// `fetch.resolve` entries for every name.
    var resolve: [String] { names.map { "\($0):\(port):\(address(of: $0))" } }

    func url(_ name: String, _ path: String = "/ok.png") -> String { "https://\(name):\(port)\(path)" }

    // MARK: The access log

    struct LogLine: Equatable {
        var connection: Int
        var connectionRequests: Int
        var sessionReused: Bool
        var serverProtocol: String
        var host: String
        var uri: String
        var status: Int
    }

    func accessLog() -> [LogLine] {
        let text = (try? String(contentsOf: directory.appendingPathComponent("access.log"), encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { line in
            let fields = line.split(separator: " ").map(String.init)
            guard fields.count == 7, let connection = Int(fields[0]), let requests = Int(fields[1]),
                let status = Int(fields[6])
            else { return nil }
            return LogLine(
                connection: connection, connectionRequests: requests, sessionReused: fields[2] == "r",
                serverProtocol: fields[3], host: fields[4], uri: fields[5], status: status)
        }
    }

    func errorLog() -> String {
        (try? String(contentsOf: directory.appendingPathComponent("error.log"), encoding: .utf8)) ?? ""
    }

    // MARK: Set-up

    private func openssl(_ arguments: [String]) throws {
        let status = try TestBroker.run("/usr/bin/openssl", arguments, log: path("openssl.log"))
        guard status == 0 else { throw TLSOriginError("openssl \(arguments.first ?? "") exited \(status)") }
    }

    private func path(_ name: String) -> String { directory.appendingPathComponent(name).path }

    private func makeCertificates() throws {
        for ca in ["ca", "other-ca"] {
            try openssl([
                "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                "-keyout", path("\(ca)-key.pem"), "-out", path("\(ca).pem"), "-days", "2",
                "-subj", "/CN=image-fetch-worker test \(ca)",
                "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign",
            ])
        }
        try openssl([
            "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", path("server-key.pem"), "-out", path("server.csr"), "-subj", "/CN=\(names[0])",
        ])
        let san = "subjectAltName=" + names.map { "DNS:\($0)" }.joined(separator: ",")
        try "\(san)\nextendedKeyUsage=serverAuth\n".write(toFile: path("server.ext"), atomically: true, encoding: .utf8)
        try openssl([
            "x509", "-req", "-in", path("server.csr"), "-CA", path("ca.pem"), "-CAkey", path("ca-key.pem"),
            "-CAcreateserial", "-days", "2", "-extfile", path("server.ext"), "-out", path("server.pem"),
        ])
    }

    private func config(_ options: Options) -> String {
        let listens = names.map { "        listen \(address(of: $0)):\(port) ssl\(options.http2 ? " http2" : "");" }
        return """
            daemon off;
            master_process off;
            worker_processes 1;
            pid \(path("nginx.pid"));
            error_log \(path("error.log")) info;
            load_module /usr/lib/nginx/modules/ngx_http_echo_module.so;
            events { worker_connections 1024; }
            http {
                client_body_temp_path \(path("body"));
                proxy_temp_path \(path("proxy"));
                fastcgi_temp_path \(path("fastcgi"));
                uwsgi_temp_path \(path("uwsgi"));
                scgi_temp_path \(path("scgi"));
                log_format probe '$connection $connection_requests $ssl_session_reused $server_protocol'
                                 ' $host $request_uri $status';
                access_log \(path("access.log")) probe;
                keepalive_timeout \(options.keepaliveSeconds);
                server {
            \(listens.joined(separator: "\n"))
                    server_name \(names.joined(separator: " "));
                    ssl_certificate \(path("server.pem"));
                    ssl_certificate_key \(path("server-key.pem"));
                    ssl_protocols TLSv1.3;
                    ssl_session_tickets on;
                    ssl_session_cache shared:tls:1m;
                    root \(path("www"));
                    types { image/png png; }
                    location = /ok.png { }
                    location = /sleep.png { echo_sleep 0.3; echo_exec /ok.png; }
                    location /n/ { rewrite ^ /ok.png last; }
                }
            }

            """
    }

    private func launch() throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/sbin/nginx")
        process.arguments = ["-p", directory.path, "-c", path("nginx.conf")]
        let log = FileHandle(forWritingAtPath: "/dev/null")
        process.standardOutput = log
        process.standardError = log
        try process.run()
        self.process = process
        // Ready when every address accepts a connection.
        let deadline = Date().addingTimeInterval(10)
        for name in names {
            while !Self.accepts(address(of: name), port) {
                guard process.isRunning, Date() < deadline else {
                    throw TLSOriginError("nginx did not start: \(errorLog().suffix(1500))")
                }
                usleep(20_000)
            }
        }
    }

    private static func accepts(_ address: String, _ port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var target = sockaddr_in()
        target.sin_family = sa_family_t(AF_INET)
        target.sin_addr.s_addr = inet_addr(address)
        target.sin_port = UInt16(port).bigEndian
        return withUnsafePointer(to: &target) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
    }

    /// Stops nginx (SIGKILL to its pid: nothing of it needs to survive) and removes the folder.
    func shutdown() {
        if let process, process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        try? FileManager.default.removeItem(at: directory)
    }

    deinit {
        if let process, process.isRunning { kill(process.processIdentifier, SIGKILL) }
    }
}

struct TLSOriginError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
