import Foundation
import Testing

/// scripts/check-kubernetes.sh passes deploy/kubernetes/ and refuses the mistakes issue 21 named:
/// replicas on the scaled Deployment, classic queues, a manifest the kustomization leaves out.
@Suite(.serialized)
struct KubernetesManifestTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path

    /// Runs the checker on a copy of deploy/kubernetes/ changed by `edit`; returns its status and output.
    static func check(_ edit: (String) throws -> Void) throws -> (status: Int32, output: String) {
        let copy = TestScratch.path("kubernetes-\(UUID().uuidString)")
        try FileManager.default.copyItem(atPath: root + "/deploy/kubernetes", toPath: copy)
        try edit(copy)
        let log = TestScratch.path("check-kubernetes-\(UUID().uuidString).log")
        // Standard error joined to the log in the shell: TestBroker.run's log keeps only standard output here.
        let status = try TestBroker.run(
            "/bin/bash", ["-c", #"exec "$0" "$@" 2>&1"#, root + "/scripts/check-kubernetes.sh", copy], log: log)
        let output = try String(contentsOfFile: log, encoding: .utf8)
        return (status, output)
    }

    static func replace(_ path: String, _ old: String, _ new: String) throws {
        let text = try String(contentsOfFile: path, encoding: .utf8)
        #expect(text.contains(old), "\(path) lacks \(old)")
        try text.replacingOccurrences(of: old, with: new).write(toFile: path, atomically: true, encoding: .utf8)
    }

    @Test(.timeLimit(.minutes(5)))
    func theManifestsPassAndEachMistakeIsCaught() throws {
        let good = try Self.check { _ in }
        #expect(good.status == 0, "\(good.output)")

        let replicas = try Self.check {
            try Self.replace(
                $0 + "/deployment.yaml", "  revisionHistoryLimit: 5", "  replicas: 3\n  revisionHistoryLimit: 5")
        }
        #expect(replicas.status == 1)
        #expect(replicas.output.contains("has spec.replicas"), "\(replicas.output)")

        let classic = try Self.check {
            try Self.replace($0 + "/configmap.yaml", "QUEUE_TYPE: quorum", "QUEUE_TYPE: classic")
        }
        #expect(classic.status == 1)
        #expect(classic.output.contains("QUEUE_TYPE should be quorum"), "\(classic.output)")

        let unlisted = try Self.check {
            try Self.replace($0 + "/kustomization.yaml", "  - poddisruptionbudget.yaml\n", "")
        }
        #expect(unlisted.status == 1)
        #expect(unlisted.output.contains("does not list poddisruptionbudget.yaml"), "\(unlisted.output)")

        let missing = try Self.check { try FileManager.default.removeItem(atPath: $0 + "/kustomization.yaml") }
        #expect(missing.status == 1)
        #expect(missing.output.contains("no kustomization.yaml"), "\(missing.output)")
    }
}
