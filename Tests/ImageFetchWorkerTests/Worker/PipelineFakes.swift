import Dispatch
import Foundation
import Synchronization

@testable import ImageFetchWorker

/// A broker for the in-process pipeline tests: it delivers what the test gives it, records every
/// publish, ack and nack in order, and answers publishes as the test says (at once, later, or
/// not at all). Like ``BrokerSession``, everything runs on its serial ``queue``, and a delivery of
/// an older channel epoch cannot be acked or nacked.
final class FakeBroker: JobBroker, @unchecked Sendable {
    // @unchecked Sendable: every `var` is touched only on `queue`; `flags` has its own lock.

    enum Confirms {
        /// Each publish is confirmed on a later turn of the queue, as a broker would.
        case automatic
        /// Publishes wait until the test answers them (``answer(_:with:)``).
        case held
    }

    /// Something the worker did to the broker, in the order it happened.
    enum Event: Equatable {
        case published(sequence: Int, routingKey: String, jobID: String)
        case answered(sequence: Int, PublishOutcome)
        case acked(tag: UInt64, epoch: UInt64)
        case nacked(tag: UInt64, epoch: UInt64, requeue: Bool)
    }

    struct Published {
        var sequence: Int
        var message: OutboundMessage
        var epoch: UInt64
        var completion: (@Sendable (PublishOutcome) -> Void)?
    }

    let queue = DispatchQueue(label: "test.fake-broker")
    var confirms: Confirms
    private(set) var events: [Event] = []
    private(set) var published: [Published] = []
    private(set) var epoch: UInt64 = 1
    private var connected = false
    private(set) var closed = false
    private var nextTag: UInt64 = 0
    /// Deliveries handed out and not settled, by epoch and tag: what a lost channel gives back.
    private(set) var unsettled: [UInt64: Set<UInt64>] = [:]
    private weak var delegate: (any JobBrokerDelegate)?
    /// Read from any thread (readiness, admission).
    private let flags = Mutex((consuming: false, blocked: false))

    init(confirms: Confirms = .automatic) {
        self.confirms = confirms
    }

    /// Reads the broker's state on its queue.
    func read<T>(_ body: (FakeBroker) -> T) -> T { queue.sync { body(self) } }

    // MARK: - Driven by the test

    /// Delivers a job on the current epoch; returns its tag.
    @discardableResult
    func deliver(id: String, url: String, attempt: Int? = nil) -> UInt64 {
        queue.sync {
            nextTag += 1
            var properties = AMQPProperties()
            properties.messageID = id
            if let attempt { properties.headers[JobHeaders.attempt] = .int(Int64(attempt)) }
            let body = Array(#"{"id":"\#(id)","url":"\#(url)"}"#.utf8)
            let delivery = Delivery(
                tag: nextTag, epoch: epoch, redelivered: false, routingKey: "image-fetch.jobs",
                properties: properties, body: body, receivedAt: DispatchTime.now().uptimeNanoseconds)
            unsettled[epoch, default: []].insert(nextTag)
            delegate?.brokerDelivered(delivery)
            return nextTag
        }
    }

    /// Answers the held publish with this sequence number.
    func answer(_ sequence: Int, with outcome: PublishOutcome) {
        queue.sync { complete(sequence, outcome) }
    }

    /// The connection drops: every unanswered publish is lost, the channel's deliveries return to
    /// the queue (``unsettled`` keeps them for the test), and nothing of that epoch can be settled.
    func loseConnection() {
        queue.sync {
            connected = false
            flags.withLock { $0.consuming = false }
            for item in published where item.completion != nil { complete(item.sequence, .connectionLost) }
            delegate?.brokerLostConnection(AMQPError(.connectionClosed, operation: "test", message: "lost"))
        }
    }

    /// A new connection after a loss: a new channel epoch, consuming again.
    func reconnect() {
        queue.sync {
            epoch += 1
            connected = true
            flags.withLock { $0.consuming = true }
            delegate?.brokerConnected(epoch: epoch)
        }
    }

    func setBlocked(_ isBlocked: Bool) {
        queue.sync {
            flags.withLock { $0.blocked = isBlocked }
            delegate?.brokerBlockedChanged(isBlocked)
        }
    }

    private func complete(_ sequence: Int, _ outcome: PublishOutcome) {
        dispatchPrecondition(condition: .onQueue(queue))
        guard let index = published.firstIndex(where: { $0.sequence == sequence }),
            let completion = published[index].completion
        else { return }
        published[index].completion = nil
        events.append(.answered(sequence: sequence, outcome))
        completion(outcome)
    }

    /// The publishes still waiting for an answer.
    var pending: [Published] { published.filter { $0.completion != nil } }

    // MARK: - JobBroker

    func publishOnQueue(_ message: OutboundMessage, completion: @escaping @Sendable (PublishOutcome) -> Void) {
        dispatchPrecondition(condition: .onQueue(queue))
        guard connected else { return completion(.connectionLost) }
        let sequence = published.count + 1
        let jobID = message.properties.correlationID ?? message.properties.messageID ?? ""
        published.append(Published(sequence: sequence, message: message, epoch: epoch, completion: completion))
        events.append(.published(sequence: sequence, routingKey: message.routingKey, jobID: jobID))
        if case .automatic = confirms {
            queue.async { self.complete(sequence, .confirmed) }
        }
    }

    func isCurrentOnQueue(_ delivery: Delivery) -> Bool {
        dispatchPrecondition(condition: .onQueue(queue))
        return connected && delivery.epoch == epoch
    }

    func ackOnQueue(_ delivery: Delivery) {
        dispatchPrecondition(condition: .onQueue(queue))
        events.append(.acked(tag: delivery.tag, epoch: delivery.epoch))
        guard connected, delivery.epoch == epoch else { return }
        unsettled[delivery.epoch]?.remove(delivery.tag)
    }

    func nackOnQueue(_ delivery: Delivery, requeue: Bool) {
        dispatchPrecondition(condition: .onQueue(queue))
        events.append(.nacked(tag: delivery.tag, epoch: delivery.epoch, requeue: requeue))
        guard connected, delivery.epoch == epoch else { return }
        unsettled[delivery.epoch]?.remove(delivery.tag)
    }

    var isBlocked: Bool { flags.withLock { $0.blocked } }
    var isConsuming: Bool { flags.withLock { $0.consuming && !$0.blocked } }
    var stateName: String { "fake" }

    func attach(_ delegate: any JobBrokerDelegate) {
        queue.sync { self.delegate = delegate }
    }

    func start(retrying: Bool) throws(AMQPError) {
        queue.sync {
            connected = true
            flags.withLock { $0.consuming = true }
            delegate?.brokerConnected(epoch: epoch)
        }
    }

    func stopConsuming(completion: @escaping @Sendable () -> Void) {
        queue.async {
            self.flags.withLock { $0.consuming = false }
            completion()
        }
    }

    @discardableResult
    func close(deadline: DispatchTime = .distantFuture) -> Bool {
        queue.sync {
            closed = true
            connected = false
        }
        return true
    }

    func queueDepth(_ name: String, completion: @escaping @Sendable ((messages: Int, consumers: Int)?) -> Void) {
        queue.async { completion(nil) }
    }
}

/// A fetch engine for the in-process pipeline tests: each URL gets the response the test
/// scripted, at once or when the test releases it. Completions run on the work queue inside
/// ``CompletionBatch/run(_:)``, as the worker's engine runs them.
final class FakeFetcher: JobFetcher, @unchecked Sendable {
    // @unchecked Sendable: all state is behind `state`'s lock.

    enum Script: Sendable {
        case respond(FetchResponse)
        /// Waits until ``release(_:with:)``, ``FetcherState/cancelAll()`` or a shutdown.
        case hold
    }

    private struct State {
        var scripts: [String: Script] = [:]
        var requested: [String] = []
        var held: [String: @Sendable (FetchResponse) -> Void] = [:]
        var shutDown = false
    }

    private let state = Mutex(State())
    private let completionQueue: DispatchQueue
    private let nextID = Atomic<UInt64>(1)

    init(completionQueue: DispatchQueue) {
        self.completionQueue = completionQueue
    }

    func script(_ url: String, _ script: Script) {
        state.withLock { $0.scripts[url] = script }
    }

    /// The URLs fetched, in order.
    var requested: [String] { state.withLock { $0.requested } }
    var heldCount: Int { state.withLock { $0.held.count } }
    var isShutDown: Bool { state.withLock { $0.shutDown } }

    /// Answers a held fetch.
    func release(_ url: String, with response: FetchResponse) {
        guard let completion = state.withLock({ $0.held.removeValue(forKey: url) }) else { return }
        deliver(response, to: completion)
    }

    private func deliver(_ response: FetchResponse, to completion: @escaping @Sendable (FetchResponse) -> Void) {
        completionQueue.async { CompletionBatch.run { completion(response) } }
    }

    private func abortAll() {
        let held = state.withLock { state in
            defer { state.held.removeAll() }
            return Array(state.held.values)
        }
        for completion in held { deliver(FetchResponse(failure: .aborted), to: completion) }
    }

    // MARK: - JobFetcher

    @discardableResult
    func fetch(_ request: FetchRequest, completion: @escaping @Sendable (FetchResponse) -> Void) -> FetchTicket {
        let ticket = FetchTicket(id: nextID.wrappingAdd(1, ordering: .relaxed).oldValue)
        let script: Script? = state.withLock { state in
            state.requested.append(request.url)
            guard !state.shutDown else { return nil }
            let script = state.scripts[request.url] ?? .respond(FetchResponse(failure: .dnsFailure))
            if case .hold = script { state.held[request.url] = completion }
            return script
        }
        switch script {
        case nil: deliver(FetchResponse(failure: .aborted), to: completion)
        case .respond(let response)?: deliver(response, to: completion)
        case .hold?: break
        }
        return ticket
    }

    func cancelAll() { abortAll() }

    func shutdown() {
        state.withLock { $0.shutDown = true }
        abortAll()
    }

    var tlsCounts: FetchTLSCounts { FetchTLSCounts() }
}
