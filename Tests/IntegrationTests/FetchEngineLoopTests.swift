import Dispatch
import ImageFetchWorker
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The fetch loop under load, against a real local origin: cancellation, many transfers at once,
/// the hand-over of completions, and the body flow control. The helpers are ``FetchEngineTests``'s.
@Suite("FetchEngine's loop")
struct FetchEngineLoopTests {
    @Test("cancel aborts one transfer, cancelAll the rest")
    func cancellation() async throws {
        try await FetchEngineTests.withOrigin { origin, engine in
            let failures = Mutex<[FetchError?]>([])
            let done = DispatchGroup()
            var tickets: [FetchTicket] = []
            for _ in 0..<5 {
                done.enter()
                tickets.append(
                    engine.fetch(FetchRequest(url: origin.url("/slow?ms=5000"))) { response in
                        failures.withLock { $0.append(response.failure) }
                        done.leave()
                    })
            }
            #expect(await FetchEngineTests.eventually { origin.stats.inFlight == 5 })
            #expect(engine.activeTransfers == 5)
            engine.cancel(tickets[0])
            #expect(await FetchEngineTests.eventually { failures.withLock { $0.count } == 1 })
            let start = DispatchTime.now().uptimeNanoseconds
            engine.cancelAll()
            #expect(await FetchEngineTests.eventually(2) { failures.withLock { $0.count } == 5 })
            #expect(DispatchTime.now().uptimeNanoseconds - start < 1_000_000_000)
            #expect(failures.withLock { $0 } == Array(repeating: FetchError.aborted, count: 5))
            #expect(engine.activeTransfers == 0)
        }
    }

    @Test("200 concurrent fetches all complete, concurrently")
    func concurrency() async throws {
        try await FetchEngineTests.withOrigin { origin, engine in
            let count = 200
            let start = DispatchTime.now().uptimeNanoseconds
            let responses = await withTaskGroup(of: FetchResponse.self) { group in
                // 3 s responses: time for all 200 to connect and overlap on a busy machine (with
                // 300 ms, connecting 200 at a loaded machine's pace let only about half overlap).
                // One after another they would take 600 s.
                for _ in 0..<count {
                    group.addTask { await FetchEngineTests.fetch(engine, origin.url("/slow?ms=3000")) }
                }
                var all: [FetchResponse] = []
                for await response in group { all.append(response) }
                return all
            }
            let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
            #expect(responses.count == count)
            #expect(responses.allSatisfy { $0.error == nil && $0.body == TestOrigin.okBody })
            #expect(origin.stats.maxInFlight >= count * 3 / 4)
            #expect(seconds < 8)
        }
    }

    @Test("1,024 concurrent transfers on the one loop")
    func scale() async throws {
        // 1,024 client sockets and 1,024 server sockets in this one process: more than the usual
        // soft limit of 1,024 descriptors.
        try raiseFileDescriptorLimit(to: 4096)
        let origin = try await TestOrigin.start(threads: 2)
        let engine = try FetchEngine(configuration: FetchEngineTests.configuration(), addressPolicy: nil)
        let count = 1024
        let responses = await withTaskGroup(of: FetchResponse.self) { group in
            for _ in 0..<count {
                // 4 s responses: time for all 1,024 transfers to connect and overlap even when the
                // machine is busy (with 1 s, a loaded machine saw only 327 at once).
                group.addTask { await FetchEngineTests.fetch(engine, origin.url("/slow?ms=4000")) }
            }
            var all: [FetchResponse] = []
            for await response in group { all.append(response) }
            return all
        }
        #expect(responses.filter { $0.error == nil }.count == count)
        #expect(origin.stats.maxInFlight >= count / 2)
        #expect(engine.activeTransfers == 0)
        engine.shutdown()
        try await origin.shutdown()
    }

    @Test("with a completion queue, every completion runs there, small and large bodies alike, inside runBatch")
    func completionQueue() async throws {
        let origin = try await TestOrigin.start(threads: 2)
        let key = DispatchSpecificKey<Int>()
        let queue = DispatchQueue(label: "test.completions", attributes: .concurrent)
        queue.setSpecific(key: key, value: 7)
        // The threads inside runBatch right now; a completion must run on one of them.
        let inside = ThreadsInside()
        let engine = try FetchEngine(
            configuration: FetchEngineTests.configuration(), addressPolicy: nil, completionQueue: queue,
            runBatch: { block in
                inside.enter()
                block()
                inside.leave()
            })
        let onCompletionQueue: @Sendable () -> Bool = {
            DispatchQueue.getSpecific(key: key) == 7 && inside.containsCurrentThread
        }
        let large = FetchEngine.batchedCompletionBodyLimit + 1
        let urls =
            (0..<40).map { $0 % 10 == 0 ? origin.url("/padded.png?bytes=\(large)") : origin.url("/ok.png") }
            + [origin.url("/status/404")]
        let results = await withTaskGroup(of: (FetchResponse, Bool).self) { group in
            for url in urls {
                group.addTask {
                    await withCheckedContinuation { continuation in
                        engine.fetch(FetchRequest(url: url)) { response in
                            continuation.resume(returning: (response, onCompletionQueue()))
                        }
                    }
                }
            }
            var all: [(FetchResponse, Bool)] = []
            for await result in group { all.append(result) }
            return all
        }
        #expect(results.count == urls.count)
        #expect(results.allSatisfy { $0.1 }, "a completion ran outside the completion queue or outside runBatch")
        #expect(results.filter { $0.0.error == nil && $0.0.body == TestOrigin.okBody }.count == 36)
        #expect(results.filter { $0.0.error == nil && $0.0.body.count == large }.count == 4)
        #expect(results.filter { $0.0.error?.code == .httpError }.count == 1)
        engine.shutdown()
        // After shutdown a fetch completes at once with .aborted, still on the completion queue.
        let late = await withCheckedContinuation { continuation in
            engine.fetch(FetchRequest(url: origin.url("/ok.png"))) { response in
                continuation.resume(returning: (response, onCompletionQueue()))
            }
        }
        #expect(late.0.failure == .aborted)
        #expect(late.1)
        try await origin.shutdown()
    }

    /// A burst of fetches held back by the body limit: the completion queue is suspended, so
    /// complete bodies pile up to the limit and every other transfer pauses ahead of its body.
    struct HeldBurst {
        let origin: TestOrigin
        let queue: DispatchQueue
        let engine: FetchEngine
        let tickets: [FetchTicket]
        let responses: CollectedResponses

        /// Lets the completion queue run, waits for every response, and checks that `aborted` of
        /// them ended with `aborted` and the rest carry the whole `/ok.png` body.
        func resumeAndExpect(aborted: Int) async {
            queue.resume()
            let finished = await FetchEngineTests.eventually { responses.all.count == tickets.count }
            #expect(finished)
            let all = responses.all
            #expect(all.filter { $0.failure == .aborted }.count == aborted)
            #expect(all.filter { $0.error == nil && $0.body == TestOrigin.okBody }.count == tickets.count - aborted)
        }

        /// Checks that the engine goes on as before (a fetch on a kept-alive connection), then
        /// shuts the engine and the origin down.
        func fetchAgainAndShutDown() async throws {
            let again = await FetchEngineTests.fetch(engine, origin.url("/ok.png"))
            #expect(again.error == nil)
            engine.shutdown()
            try await origin.shutdown()
        }
    }

    /// Starts the fetches of `urls` (given the origin) with `maxWaitingBodies: limit`, and waits
    /// until every transfer is either complete and waiting or paused.
    static func heldBurst(limit: Int, _ urls: (TestOrigin) -> [String]) async throws -> HeldBurst {
        let origin = try await TestOrigin.start(threads: 2)
        let queue = DispatchQueue(label: "test.flow-control")
        queue.suspend()
        let engine = try FetchEngine(
            configuration: FetchEngineTests.configuration(), addressPolicy: nil, completionQueue: queue,
            maxWaitingBodies: limit)
        let responses = CollectedResponses()
        let tickets = urls(origin).map { url in
            engine.fetch(FetchRequest(url: url)) { responses.append($0) }
        }
        let settled = await FetchEngineTests.eventually {
            engine.waitingBodies >= limit && engine.waitingBodies + engine.pausedTransfers == tickets.count
        }
        #expect(settled, "waiting \(engine.waitingBodies), paused \(engine.pausedTransfers)")
        #expect(engine.pausedTransfers > 0)
        #expect(responses.all.isEmpty)
        return HeldBurst(origin: origin, queue: queue, engine: engine, tickets: tickets, responses: responses)
    }

    @Test(
        "with a body limit, a burst of responses waits ahead of its bodies until the completion queue takes some, and every body arrives whole"
    )
    func bodyFlowControl() async throws {
        // Large bodies take several reads of the 4 KiB receive buffer, so a resumed transfer gets
        // the chunk libcurl kept and then reads the rest from the socket.
        let large = 300_000
        let burst = try await Self.heldBurst(limit: 4) { origin in
            (0..<24).map { $0 % 3 == 0 ? origin.url("/padded.png?bytes=\(large)") : origin.url("/ok.png") }
        }
        let engine = burst.engine
        burst.queue.resume()
        let finished = await FetchEngineTests.eventually { burst.responses.all.count == burst.tickets.count }
        #expect(finished)
        let all = burst.responses.all
        #expect(all.filter { $0.error == nil && $0.body == TestOrigin.okBody }.count == 16)
        let padded = TestOrigin.okBody + [UInt8](repeating: 0, count: large - TestOrigin.okBody.count)
        #expect(all.filter { $0.error == nil && $0.body == padded }.count == 8)
        #expect(engine.waitingBodies == 0)
        #expect(engine.pausedTransfers == 0)
        try await burst.fetchAgainAndShutDown()
    }

    @Test("a transfer cancelled while paused by the body limit ends with aborted; the others still resume")
    func cancelPausedTransfer() async throws {
        let burst = try await Self.heldBurst(limit: 2) { origin in (0..<8).map { _ in origin.url("/ok.png") } }
        let engine = burst.engine
        let paused = engine.pausedTransfers
        // Cancel every transfer: the complete ones are past cancelling, the paused ones end now.
        for ticket in burst.tickets { engine.cancel(ticket) }
        #expect(await FetchEngineTests.eventually { engine.pausedTransfers == 0 })
        await burst.resumeAndExpect(aborted: paused)
        #expect(engine.activeTransfers == 0)
        try await burst.fetchAgainAndShutDown()
    }

    @Test("shutdown ends transfers paused by the body limit with aborted, and keeps the bodies already read")
    func shutdownWithPausedTransfers() async throws {
        let burst = try await Self.heldBurst(limit: 2) { origin in (0..<10).map { _ in origin.url("/ok.png") } }
        let engine = burst.engine
        let paused = engine.pausedTransfers
        engine.shutdown()  // returns once every completion has been handed to the queue
        #expect(engine.pausedTransfers == 0)
        await burst.resumeAndExpect(aborted: paused)
        try await burst.origin.shutdown()
    }
}

/// The threads that are inside a block right now (for FetchEngineLoopTests.completionQueue).
private final class ThreadsInside: Sendable {
    private let depth = Mutex<[pthread_t: Int]>([:])
    func enter() { depth.withLock { $0[pthread_self(), default: 0] += 1 } }
    func leave() { depth.withLock { $0[pthread_self(), default: 0] -= 1 } }
    var containsCurrentThread: Bool { depth.withLock { $0[pthread_self(), default: 0] > 0 } }
}

/// Responses as they complete, from any thread.
final class CollectedResponses: Sendable {
    private let responses = Mutex<[FetchResponse]>([])
    func append(_ response: FetchResponse) { responses.withLock { $0.append(response) } }
    var all: [FetchResponse] { responses.withLock { $0 } }
}
