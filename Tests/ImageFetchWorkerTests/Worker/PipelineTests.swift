import Dispatch
import Foundation
import ImageSamples
import Logging
import Synchronization
import Testing

@testable import ImageFetchWorker

/// The whole job pipeline in process (intake, admission, fetch, checks, store, outcome, publish,
/// settle, drain), run by the real ``JobRunner`` over a fake broker and a fake fetch engine
/// (`PipelineFakes.swift`). It checks what the broker sees: which messages go out, and that a
/// delivery is settled once, only after every one of its messages was answered. The same paths
/// against RabbitMQ are in `Tests/IntegrationTests/`.
@Suite struct PipelineTests {
    typealias Runner = JobRunner<FakeBroker, FakeFetcher>

    struct Pipeline {
        let broker: FakeBroker
        let fetcher: FakeFetcher
        let worker: Runner
        let configuration: WorkerConfiguration

        init(
            concurrency: Int = 4, prefetch: Int = 16, drainTimeout: Double = 10,
            confirms: FakeBroker.Confirms = .automatic
        ) throws {
            var configuration = WorkerConfiguration()
            configuration.worker.concurrency = concurrency
            configuration.worker.drainTimeout = drainTimeout
            configuration.amqp.prefetch = prefetch
            configuration.storage.kind = .none
            configuration.http.port = 0
            configuration.log.summaryInterval = 0
            configuration.metrics.depthInterval = 0
            var logger = Logger(label: "test.pipeline")
            logger.logLevel = .critical
            let workQueue = DispatchQueue(label: "test.pipeline.work", attributes: .concurrent)
            broker = FakeBroker(confirms: confirms)
            fetcher = FakeFetcher(completionQueue: workQueue)
            worker = try Runner(
                configuration: configuration, logger: logger, session: broker, fetchEngine: fetcher,
                sink: NoneSink(), workQueue: workQueue)
            self.configuration = configuration
            try worker.start()
        }

        var events: [FakeBroker.Event] { broker.read { $0.events } }
        var acked: [UInt64] {
            events.compactMap { if case .acked(let tag, _) = $0 { tag } else { nil } }
        }
        var nacked: [(tag: UInt64, requeue: Bool)] {
            events.compactMap { if case .nacked(let tag, _, let requeue) = $0 { (tag, requeue) } else { nil } }
        }
        var published: [OutboundMessage] { broker.read { $0.published.map(\.message) } }
        var pending: [Int] { broker.read { $0.pending.map(\.sequence) } }
    }

    static let png = ImageSamples.png(width: 4, height: 4)
    static let ok = FetchResponse(httpStatus: 200, contentType: "image/png", body: png)

    /// Polls `condition` every 5 ms for up to `seconds`.
    static func until(_ seconds: Double = 5, _ condition: () -> Bool) -> Bool {
        let deadline = DispatchTime.now() + seconds
        while DispatchTime.now() < deadline {
            if condition() { return true }
            usleep(5_000)
        }
        return condition()
    }

    /// Status and error code of a result message.
    static func result(_ message: OutboundMessage) -> (status: String?, code: String?) {
        let object = try? JSONSerialization.jsonObject(with: Data(message.body)) as? [String: Any]
        let error = object?["error"] as? [String: Any]
        return (object?["status"] as? String, error?["code"] as? String)
    }

    static func url(_ name: String) -> String { "https://\(name).example/image.png" }

    // MARK: - Ack after confirms

    /// A job on its last attempt that times out has two messages (the result and the dead copy).
    /// Its delivery is acked only once both are confirmed, and not after the first.
    @Test func aDeliveryIsAckedOnlyAfterEveryOneOfItsPublishesIsConfirmed() throws {
        let pipeline = try Pipeline(confirms: .held)
        let url = Self.url("last")
        pipeline.fetcher.script(url, .respond(FetchResponse(failure: .timeout)))
        let tag = pipeline.broker.deliver(id: "j1", url: url, attempt: pipeline.configuration.retry.maxAttempts)
        #expect(Self.until { pipeline.pending.count == 2 })
        let published = pipeline.published
        try #require(published.count == 2)
        #expect(Self.result(published[0]).status == "failed")
        #expect(Self.result(published[0]).code == "timeout")
        #expect(published[1].routingKey == pipeline.configuration.queue.dead)
        #expect(published[1].properties.headers[JobHeaders.errorCode] == .string("timeout"))
        #expect(pipeline.acked.isEmpty)

        pipeline.broker.answer(1, with: .confirmed)
        // The answer ran the worker's completion on the broker's queue: a settlement would be recorded.
        #expect(pipeline.acked.isEmpty, "acked after one of two confirms")
        pipeline.broker.answer(2, with: .confirmed)
        #expect(pipeline.acked == [tag])
        #expect(pipeline.nacked.isEmpty)
        #expect(pipeline.worker.stats.snapshot.deadLettered == 1)
    }

    /// A publish the broker nacks is not acked: the delivery goes back to the queue.
    @Test func aNackedPublishHandsTheDeliveryBackInsteadOfAckingIt() throws {
        let pipeline = try Pipeline(confirms: .held)
        let url = Self.url("nacked")
        pipeline.fetcher.script(url, .respond(Self.ok))
        let tag = pipeline.broker.deliver(id: "j1", url: url)
        #expect(Self.until { pipeline.pending.count == 1 })
        #expect(Self.result(pipeline.published[0]).status == "ok")
        pipeline.broker.answer(1, with: .nacked)
        #expect(pipeline.acked.isEmpty)
        #expect(pipeline.nacked.map(\.tag) == [tag])
        #expect(pipeline.nacked.map(\.requeue) == [true])
    }

    // MARK: - Routes

    /// A retryable failure with attempts left: a copy to the retry queue with the next attempt,
    /// no result, and the delivery acked once the copy is confirmed.
    @Test func aRetryableFailureWithAttemptsLeftPublishesARetryCopyAndNoResult() throws {
        let pipeline = try Pipeline()
        let url = Self.url("retry")
        pipeline.fetcher.script(url, .respond(FetchResponse(failure: .timeout)))
        let tag = pipeline.broker.deliver(id: "j1", url: url, attempt: 1)
        #expect(Self.until { pipeline.acked == [tag] })
        let published = pipeline.published
        #expect(published.count == 1)
        let delay = pipeline.configuration.retry.delays[0]
        #expect(
            published.first?.routingKey
                == Topology.retryQueueName(jobs: pipeline.configuration.queue.jobs, delaySeconds: delay))
        #expect(published.first?.properties.headers[JobHeaders.attempt] == .int(2))
        #expect(published.first?.body == Array(#"{"id":"j1","url":"\#(url)"}"#.utf8))
        #expect(pipeline.worker.stats.snapshot.retried == 1)
    }

    /// An image that passes every check: one result, `ok`, then the ack.
    @Test func aFetchedImageIsReportedOkThenAcked() throws {
        let pipeline = try Pipeline()
        let url = Self.url("fine")
        pipeline.fetcher.script(url, .respond(Self.ok))
        let tag = pipeline.broker.deliver(id: "j1", url: url)
        #expect(Self.until { pipeline.acked == [tag] })
        #expect(pipeline.published.map { Self.result($0).status } == ["ok"])
        #expect(pipeline.worker.stats.snapshot.succeeded == 1)
    }

    /// One origin paused by `Retry-After` for longer than the longest wait, alone, whose jobs fill
    /// the window: they leave it for a delay queue without a fetch, and each delivery is acked
    /// once its copy is confirmed.
    @Test func aPausedOriginsJobsAreDeferredToADelayQueue() throws {
        let pipeline = try Pipeline(prefetch: 2)
        let url = Self.url("paused")
        var busy = FetchResponse(httpStatus: 429, failure: .httpStatus(429))
        busy.retryAfter = "60"
        pipeline.fetcher.script(url, .respond(busy))
        let first = pipeline.broker.deliver(id: "j0", url: url)
        #expect(Self.until { pipeline.acked == [first] })
        // The 429 on the first attempt is a retry, at least as long as the origin asked.
        let retry = Topology.retryQueueName(
            jobs: pipeline.configuration.queue.jobs,
            delaySeconds: pipeline.configuration.retry.delays.first { $0 >= 60 } ?? 120)
        #expect(pipeline.published.map(\.routingKey) == [retry])

        let tags = (1...3).map { pipeline.broker.deliver(id: "j\($0)", url: url) }
        #expect(Self.until { Set(pipeline.acked) == Set([first] + tags) })
        let copies = pipeline.published.dropFirst()
        #expect(copies.count == 3)
        for copy in copies {
            #expect(copy.routingKey.hasPrefix(pipeline.configuration.queue.jobs + ".defer."))
            #expect(copy.properties.headers[JobHeaders.deferrals] == .int(1))
        }
        #expect(pipeline.fetcher.requested == [url])
    }

    // MARK: - Drain

    /// A drain lets the running jobs finish and be acked, hands the waiting ones back with
    /// requeue, and settles every delivery exactly once; then the worker closes.
    @Test func aDrainFinishesRunningJobsAndHandsWaitingOnesBack() throws {
        let pipeline = try Pipeline(concurrency: 2)
        let urls = (0..<5).map { Self.url("drain\($0)") }
        for url in urls { pipeline.fetcher.script(url, .hold) }
        let tags = urls.enumerated().map { pipeline.broker.deliver(id: "j\($0.offset)", url: $0.element) }
        #expect(Self.until { pipeline.fetcher.heldCount == 2 })
        #expect(Self.until { pipeline.worker.stats.snapshot.waiting == 3 })
        let running = pipeline.fetcher.requested

        let status = Mutex<Int32?>(nil)
        pipeline.worker.shutdown { code in status.withLock { $0 = code } }
        #expect(Self.until { pipeline.nacked.count == 3 })
        let late = pipeline.broker.deliver(id: "late", url: Self.url("late"))
        for url in running { pipeline.fetcher.release(url, with: Self.ok) }
        #expect(Self.until { status.withLock { $0 } != nil })

        let runningTags = running.map { url in tags[urls.firstIndex(of: url)!] }
        #expect(Set(pipeline.acked) == Set(runningTags))
        #expect(Set(pipeline.nacked.map(\.tag)) == Set(tags + [late]).subtracting(runningTags))
        #expect(!pipeline.nacked.map(\.requeue).contains(false))
        let settled = pipeline.acked + pipeline.nacked.map(\.tag)
        #expect(settled.count == Set(settled).count, "a delivery settled twice")
        #expect(Set(settled) == Set(tags + [late]), "a delivery neither acked nor handed back")
        #expect(pipeline.published.count == 2)
        #expect(status.withLock { $0 } == 0)
        #expect(pipeline.broker.read { $0.closed })
        #expect(pipeline.fetcher.requested == running, "a waiting job was fetched during the drain")
    }

    /// At the drain's deadline the running fetches are aborted, and their deliveries go back with
    /// requeue too: nothing acked, nothing lost.
    @Test func aDrainDeadlineAbortsRunningJobsAndHandsThemBack() throws {
        let pipeline = try Pipeline(concurrency: 2, drainTimeout: 0.2)
        let urls = (0..<3).map { Self.url("deadline\($0)") }
        for url in urls { pipeline.fetcher.script(url, .hold) }
        let tags = urls.enumerated().map { pipeline.broker.deliver(id: "j\($0.offset)", url: $0.element) }
        #expect(Self.until { pipeline.fetcher.heldCount == 2 })
        let status = Mutex<Int32?>(nil)
        pipeline.worker.shutdown { code in status.withLock { $0 = code } }
        #expect(Self.until { status.withLock { $0 } != nil })
        #expect(pipeline.acked.isEmpty)
        #expect(pipeline.nacked.map(\.tag).sorted() == tags)
        #expect(!pipeline.nacked.map(\.requeue).contains(false))
        #expect(pipeline.published.isEmpty)
    }

    // MARK: - Connection loss

    /// The connection drops with a job waiting for its confirm, two fetching and two waiting for
    /// admission: nothing is acked or nacked on the dead channel, every delivery is left to the
    /// broker's redelivery, and the worker holds nothing afterwards.
    @Test func aLostConnectionAcksNothingAndLeavesEveryDeliveryToTheBroker() throws {
        let pipeline = try Pipeline(concurrency: 2, confirms: .held)
        let urls = (0..<5).map { Self.url("lost\($0)") }
        pipeline.fetcher.script(urls[0], .respond(Self.ok))
        for url in urls.dropFirst() { pipeline.fetcher.script(url, .hold) }
        let tags = [pipeline.broker.deliver(id: "j0", url: urls[0])]
        #expect(Self.until { pipeline.pending.count == 1 })
        let more = urls.dropFirst().enumerated().map {
            pipeline.broker.deliver(id: "j\($0.offset + 1)", url: $0.element)
        }
        #expect(Self.until { pipeline.fetcher.heldCount == 2 })
        #expect(Self.until { pipeline.worker.stats.snapshot.waiting == 2 })

        pipeline.broker.loseConnection()
        for url in pipeline.fetcher.requested.dropFirst() { pipeline.fetcher.release(url, with: Self.ok) }
        #expect(
            Self.until { pipeline.worker.stats.snapshot.inFlight == 0 && pipeline.worker.stats.snapshot.waiting == 0 })
        #expect(pipeline.worker.inFlight.wait(timeout: .now() + 5) == .success)
        #expect(pipeline.acked.isEmpty)
        #expect(pipeline.nacked.isEmpty)
        #expect(pipeline.fetcher.requested.count == 3, "a job of the lost channel was fetched after the loss")
        #expect(pipeline.broker.read { $0.unsettled[1] } == Set(tags + more))
        #expect(pipeline.worker.stats.snapshot.succeeded == 0)
    }

    /// A job of a lost channel that finishes after the reconnect publishes nothing: the broker
    /// redelivers it, and a retry copy published beside that would fork the job into two lines
    /// that each retry and dead-letter on their own.
    @Test func aJobOfALostChannelPublishesNoCopyOnTheNextConnection() throws {
        let pipeline = try Pipeline(concurrency: 2)
        let url = Self.url("fork")
        pipeline.fetcher.script(url, .hold)
        let tag = pipeline.broker.deliver(id: "j1", url: url, attempt: 1)
        #expect(Self.until { pipeline.fetcher.heldCount == 1 })

        pipeline.broker.loseConnection()
        pipeline.broker.reconnect()
        pipeline.fetcher.release(url, with: FetchResponse(failure: .timeout))
        #expect(Self.until { pipeline.worker.stats.snapshot.inFlight == 0 })
        #expect(pipeline.worker.inFlight.wait(timeout: .now() + 5) == .success)
        #expect(pipeline.published.isEmpty, "\(pipeline.published.map(\.routingKey))")
        #expect(pipeline.acked.isEmpty && pipeline.nacked.isEmpty)
        #expect(pipeline.broker.read { $0.unsettled[1] } == [tag], "left to the broker's redelivery")
    }

    // MARK: - Blocked

    /// While the broker blocks publishing nothing is admitted; the unblock lets the job start.
    @Test func nothingIsFetchedWhileTheBrokerBlocksPublishing() throws {
        let pipeline = try Pipeline()
        let url = Self.url("blocked")
        pipeline.fetcher.script(url, .respond(Self.ok))
        pipeline.broker.setBlocked(true)
        let tag = pipeline.broker.deliver(id: "j1", url: url)
        #expect(!Self.until(0.2) { !pipeline.fetcher.requested.isEmpty })
        pipeline.broker.setBlocked(false)
        #expect(Self.until { pipeline.acked == [tag] })
    }
}
