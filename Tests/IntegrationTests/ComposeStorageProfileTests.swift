import Foundation
import Testing

/// `docker compose --profile s3` switches the workers to MinIO: the storage-config service's
/// command, taken from docker-compose.yml and run with a stand-in for curl, writes the file the
/// workers read with --config, and the worker's `config` command reads s3 or file from it.
@Suite(.serialized)
struct ComposeStorageProfileTests {
    static let root = KubernetesManifestTests.root

    static func shell(
        _ script: String, _ arguments: [String] = [], environment: [String: String] = [:]
    ) throws -> (Int32, String) {
        let log = TestScratch.path("compose-\(UUID().uuidString).log")
        let status = try TestBroker.run(
            "/bin/bash", ["-c", script + " 2>&1", "bash"] + arguments, environment: environment, log: log)
        return (status, (try? String(contentsOfFile: log, encoding: .utf8)) ?? "")
    }

    @Test(.timeLimit(.minutes(3)))
    func theS3ProfileSwitchesTheWorkersToMinIO() throws {
        // check-compose.sh installs the tools' Python (with ruamel.yaml) on first use.
        let (checked, checkLog) = try Self.shell(#""$1/scripts/check-compose.sh""#, [Self.root])
        #expect(checked == 0, "\(checkLog)")
        let (extracted, command) = try Self.shell(
            #"""
            "$1/.run/tools-venv/bin/python" -c 'import sys; from ruamel.yaml import YAML
            d = YAML(typ="safe").load(open(sys.argv[1]))
            print(d["services"]["storage-config"]["command"][0].replace("$$", "$").replace("/config/", "$CONFIG_DIR/"))
            assert "/etc/image-fetch-worker/storage.yaml" in d["services"]["worker"]["command"]' "$1/docker-compose.yml"
            """#, [Self.root])
        #expect(extracted == 0, "\(command)")

        for (minioAnswers, kind) in [(true, "s3"), (false, "file")] {
            let folder = TestScratch.path("compose-\(UUID().uuidString)")
            try FileManager.default.createDirectory(atPath: folder + "/bin", withIntermediateDirectories: true)
            try "#!/bin/sh\nexit \(minioAnswers ? 0 : 6)\n".write(
                toFile: folder + "/bin/curl", atomically: true, encoding: .utf8)
            chmod(folder + "/bin/curl", 0o755)
            let (wrote, log) = try Self.shell(
                command,
                environment: [
                    "PATH": folder + "/bin:/usr/bin:/bin", "CONFIG_DIR": folder,
                    "MINIO_ROOT_USER": "minio-user", "MINIO_ROOT_PASSWORD": "minio-secret-pw",
                ])
            #expect(wrote == 0, "\(log)")
            let (status, report) = try Self.shell(
                #""$1" config --config "$2""#, [WorkerProcess.binary, folder + "/storage.yaml"])
            #expect(status == 0, "\(report)")
            let rows = report.split(separator: "\n").map { $0.split(separator: " ").map(String.init) }
            #expect(rows.contains(["storage.kind", kind, "file", folder + "/storage.yaml"]), "\(report)")
            if minioAnswers {
                #expect(
                    rows.contains(["s3.endpoint", "http://minio:9000", "file", folder + "/storage.yaml"]), "\(report)")
                #expect(rows.contains(["s3.bucket", "images", "file", folder + "/storage.yaml"]), "\(report)")
                #expect(
                    rows.contains(["s3.access_key_id", "minio-user", "file", folder + "/storage.yaml"]), "\(report)")
                #expect(!report.contains("minio-secret-pw"))
            }
        }
    }
}
