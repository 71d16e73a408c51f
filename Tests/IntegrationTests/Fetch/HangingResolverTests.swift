import Foundation
import ImageFetchWorker
import Testing

/// A host name whose lookup never comes back must cost its own job, not the fetch loop: the worker
/// runs with a `getaddrinfo` that sleeps for names under `.hang` (an `LD_PRELOAD` shim built here),
/// as a black-holed DNS server makes glibc's do.
@Suite(.enabled(if: TestBroker.isAvailable, "needs the RabbitMQ that `make test` starts"), .serialized)
struct HangingResolverTests {
    /// How long the shim's lookups sleep: far longer than the test waits for anything.
    static let hangSeconds = 40

    static let shimSource = """
        #define _GNU_SOURCE
        #include <dlfcn.h>
        #include <netdb.h>
        #include <string.h>
        #include <unistd.h>

        int getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
                        struct addrinfo **res) {
            static int (*real)(const char *, const char *, const struct addrinfo *, struct addrinfo **);
            if (!real) real = dlsym(RTLD_NEXT, "getaddrinfo");
            if (node && strstr(node, ".hang")) { sleep(\(hangSeconds)); return EAI_AGAIN; }
            return real(node, service, hints, res);
        }
        """

    /// Builds the shim with the system's C compiler; its path.
    static func buildShim() throws -> String {
        // Both names from one stem: the scratch folder's own name may hold ".c" (mktemp's letters).
        let stem = TestScratch.path("hang-resolver-\(UUID().uuidString)")
        let source = stem + ".c"
        let library = stem + ".so"
        try shimSource.write(toFile: source, atomically: true, encoding: .utf8)
        let compiler = Process()
        compiler.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        compiler.arguments = ["cc", "-shared", "-fPIC", "-O1", "-o", library, source, "-ldl"]
        try compiler.run()
        compiler.waitUntilExit()
        try #require(compiler.terminationStatus == 0, "cc could not build the resolver shim")
        return library
    }

    @Test(.timeLimit(.minutes(2)))
    func aLookupThatNeverReturnsStallsOnlyItsOwnJob() async throws {
        let shim = try Self.buildShim()
        let origin = try await TestOrigin.start(threads: 2)
        let configuration = try TestBroker.configuration("hangdns")
        defer { TestBroker.cleanUp(configuration) }
        // The lookup's job gives up at its connect timeout (1 s); libcurl then ends the lookup. The
        // other jobs come once that has happened, so they find the loop in whatever state it left.
        let hanging = JobPublisher.jobBody(id: "hang", url: "http://images.example.hang/a.png")
        #expect(try TestBroker.publish(configuration, bodies: [hanging]) == 1)
        let results = try QueueCollector(configuration, queue: configuration.queue.results)
        defer { results.close() }
        let worker = try WorkerProcess(
            environment: HostileOriginTests.environment(
                configuration,
                [
                    "LD_PRELOAD": shim,
                    "FETCH_ALLOWED_NETWORKS": "127.0.0.1/32",
                    "FETCH_CONNECT_TIMEOUT": "1",
                    "FETCH_TIMEOUT": "10",
                ]))

        let first = await results.wait(for: 1, timeout: 15)
        #expect(first.count == 1, "the hanging lookup's job never ended:\n\(worker.log.suffix(3000))")

        let started = Date()
        let bodies = (0..<20).map { JobPublisher.jobBody(id: "ok\($0)", url: origin.url("/ok.png?n=\($0)")) }
        #expect(try TestBroker.publish(configuration, bodies: bodies) == bodies.count)
        await results.wait(for: 1 + bodies.count, timeout: 20)
        let waited = Date().timeIntervalSince(started)
        let byID = HostileOriginTests.byID(results)
        #expect(byID.count == 1 + bodies.count, "worker log:\n\(worker.log.suffix(3000))")
        // A loop held by the lookup would answer them only when the shim's sleep ends (40 s).
        #expect(waited < Double(Self.hangSeconds) / 2, "the other jobs waited \(waited) s behind the lookup")
        for index in 0..<bodies.count {
            #expect(byID["ok\(index)"]?["status"] as? String == "ok", "\(byID["ok\(index)"] ?? [:])")
        }
        let failure = HostileOriginTests.error(byID["hang"])
        #expect(byID["hang"]?["status"] as? String == "failed")
        #expect(failure?["code"] as? String == "timeout", "\(failure ?? [:])")
        #expect(worker.isRunning)
        // The drain does not wait for the lookup either.
        let stopStarted = Date()
        #expect(await worker.stop() == 0)
        #expect(Date().timeIntervalSince(stopStarted) < Double(Self.hangSeconds) / 2)
        try await origin.shutdown()
    }
}
