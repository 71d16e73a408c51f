import Foundation
import ImageFetchWorker
import Testing

/// The worker process over HTTPS (issue 31): origins behind nginx with a test CA that the worker
/// trusts through `fetch.tls.ca_file`, HTTP/2 by ALPN, and a certificate that does not verify.
@Suite(.enabled(if: TestBroker.isAvailable, "needs the RabbitMQ that `make test` starts"), .serialized)
struct WorkerHTTPSTests {
    @Test(.timeLimit(.minutes(3)))
    func jobsOverHTTPSWithATestCA() async throws {
        let names = ["a.test", "b.test", "c.test"]
        let origin = try TLSOrigin.start(names: names)
        defer { origin.shutdown() }
        let configuration = try TestBroker.configuration("https")
        defer { TestBroker.cleanUp(configuration) }
        var bodies: [[UInt8]] = []
        for index in 0..<30 {
            bodies.append(JobPublisher.jobBody(id: "ok\(index)", url: origin.url(names[index % 3], "/n/\(index).png")))
        }
        // A name the certificate does not list: hostname verification fails.
        let unlisted = "unlisted.test:\(origin.port):\(origin.address(of: "a.test"))"
        bodies.append(JobPublisher.jobBody(id: "badcert", url: "https://unlisted.test:\(origin.port)/ok.png"))
        #expect(try TestBroker.publish(configuration, bodies: bodies) == bodies.count)
        let results = try QueueCollector(configuration, queue: configuration.queue.results)
        defer { results.close() }
        let (worker, endpoint) = try OperationsTests.startWorker(
            configuration,
            extra: [
                "FETCH_TLS_CA_FILE": origin.caFile,
                "FETCH_RESOLVE": (origin.resolve + [unlisted]).joined(separator: ","),
                "FETCH_ALLOW_PRIVATE_NETWORKS": "true",
                "WORKER_CONCURRENCY": "8",
            ])
        await results.wait(for: bodies.count, timeout: 60)
        let objects = results.objects
        #expect(objects.count == bodies.count, "worker log:\n\(worker.log.suffix(2000))")
        for object in objects where object["id"] as? String != "badcert" {
            #expect(object["status"] as? String == "ok", "\(object)")
        }
        let bad = try #require(objects.first { $0["id"] as? String == "badcert" })
        #expect(bad["status"] as? String == "failed")
        #expect((bad["error"] as? [String: Any])?["code"] as? String == "tls_failure", "\(bad)")
        #expect(bad["attempt"] as? Int == 1, "tls_failure is final: no retry")

        // The origin saw HTTP/2 only, a few connections, and the worker's metrics agree.
        #expect(await FetchEngineTests.eventually { origin.accessLog().count == 30 })
        let log = origin.accessLog()
        #expect(log.allSatisfy { $0.serverProtocol == "HTTP/2.0" })
        let connections = Set(log.map(\.connection)).count
        #expect(connections <= 6, "\(connections) connections for 3 origins")
        let metrics = await endpoint.metrics()
        #expect(metrics["image_fetch_fetches_total", ["http_version": "2"]] == 30)
        #expect((metrics["image_fetch_connections_opened_total"] ?? 0) >= Double(connections))
        #expect(metrics["image_fetch_ca_store_loads_total"] == 1)
        // Plus the unlisted name's: the handshake completes, and libcurl checks the name after it.
        #expect(metrics["image_fetch_tls_handshakes_total"] == Double(connections + 1))
        #expect(await worker.stop() == 0)
    }
}
