import CRabbitMQ
import CShims
import Dispatch
import Foundation
import Logging
import Synchronization

// Connecting, reconnecting and closing: what the session does for each action of its
// ``ConnectionLifecycle``. Everything here runs on the channel queue.
extension BrokerSession {
    var isOpenEpoch: Bool {
        assertOnQueue()  // read on every ack and publish
        switch lifecycle.state {
        case .consuming, .draining: return true
        default: return false
        }
    }

    func perform(_ action: ConnectionLifecycle.Action) {
        dispatchPrecondition(condition: .onQueue(queue))
        switch action {
        case .none:
            break
        case .connect(let index):
            do throws(AMQPError) {
                try connect(urlIndex: index)
            } catch  where error.code == .interrupted {
                logger.info("shutdown began while connecting to the broker")
                perform(lifecycle.connectFailed(jitter: 0))
                publishState()
            } catch {
                let url = configuration.amqp.urls[index % configuration.amqp.urls.count]
                logger.warning(
                    "broker connection failed",
                    metadata: [
                        "broker": "\(url.host):\(url.port)", "error": "\(error)",
                    ])
                perform(lifecycle.connectFailed(jitter: Double.random(in: 0..<1)))
                publishState()
            }
        case .scheduleReconnect(let delay):
            logger.info("reconnecting to the broker", metadata: ["in_seconds": "\(String(format: "%.1f", delay))"])
            queue.asyncAfter(deadline: .now() + delay) {
                self.perform(self.lifecycle.reconnectTimerFired())
                self.publishState()
            }
        case .cancelConsumer:
            // The broker reads nothing from a connection it blocks: the cancel would wait out the
            // RPC timeout on this queue, holding the drain behind it. It is sent at the unblock,
            // if that comes first; else closing the connection ends the consumer.
            guard !isBlocked else {
                logger.info("the broker blocks the connection; the consumer is cancelled at the unblock or the close")
                cancelAwaitsUnblock = true
                return
            }
            cancelConsumer()
        case .failOutstanding:
            teardown()
        case .failOutstandingAndReconnect(let delay):
            teardown()
            perform(.scheduleReconnect(delay: delay))
        case .close:
            // The lifecycle already says closed: send the acks still held back, then close.
            cancelAwaitsUnblock = false
            if let connection { try? sendAcks(on: connection, force: true) }
            teardownSources()
            connection?.close()
            connection = nil
            acks.reset()
            for completion in confirms.reset() { completion(.connectionLost) }
            deadCopies = DeadCopyStream()
            clearBlocked()
        }
    }

    func connect(urlIndex: Int) throws(AMQPError) {
        dispatchPrecondition(condition: .onQueue(queue))
        let amqp = configuration.amqp
        let url = amqp.urls[urlIndex % amqp.urls.count]
        let connection = try AMQPConnection()
        do throws(AMQPError) {
            try connection.open(
                url: url,
                tls: .init(
                    caFile: amqp.tls.caFile, certFile: amqp.tls.certFile, keyFile: amqp.tls.keyFile,
                    verify: amqp.tls.verify),
                heartbeat: amqp.heartbeat, connectionName: connectionName, interrupter: interrupter)
            try connection.openChannel(Self.channel)
            try connection.confirmSelect(channel: Self.channel)
            if configuration.queue.declare {
                for queue in Topology(configuration: configuration).queues {
                    try declare(queue, on: connection)
                }
            }
            if consume {
                try connection.qos(channel: Self.channel, prefetch: amqp.prefetch)
                _ = try connection.consume(
                    channel: Self.channel, queue: configuration.queue.jobs, consumerTag: consumerTag)
            }
            guard interrupter.detach() else {
                throw AMQPError(.interrupted, operation: "connect to \(url.host):\(url.port)", message: "shutting down")
            }
        } catch {
            // Detached before the connection (and its socket) can go away.
            interrupter.detach()
            withExtendedLifetime(connection) {}
            throw error.code != .interrupted && interrupter.isInterrupted
                ? AMQPError(.interrupted, operation: error.operation, message: "shutting down") : error
        }
        self.connection = connection
        self.assembler = ContentAssembler(maxBodyBytes: configuration.queue.maxJobBytes)
        self.acks.reset()
        _ = lifecycle.connected()
        publishState()
        installSources(for: connection)
        logger.info(
            "connected to the broker",
            metadata: [
                "broker": "\(url)", "queue": "\(configuration.queue.jobs)", "prefetch": "\(amqp.prefetch)",
            ])
        delegate?.session(self, didConnect: lifecycle.epoch)
        // Frames may already sit in rabbitmq-c's buffer after the RPCs above.
        scheduleRead()
    }

    /// Declares a queue. A delay queue that an older release declared with other arguments
    /// (PRECONDITION_FAILED) is used as it is, with a warning, so that an upgrade does not stop the
    /// worker; its hop keeps the old guarantee until the queue is deleted (docs/reliability.md).
    private func declare(_ queue: Topology.Queue, on connection: AMQPConnection) throws(AMQPError) {
        do {
            try connection.declareQueue(channel: Self.channel, name: queue.name, arguments: queue.arguments)
        } catch  where queue.mayExistWithOtherArguments && error.code == .channelClosed && error.replyCode == 406 {
            // The broker closed the channel: confirm, open it again, and check that the queue is there.
            connection.sendCloseOk(channel: Self.channel, connection: false)
            try connection.openChannel(Self.channel)
            try connection.confirmSelect(channel: Self.channel)
            try connection.declareQueue(channel: Self.channel, name: queue.name, passive: true)
            logger.warning(
                "a delay queue exists with other arguments; using it as it is",
                metadata: [
                    "queue": "\(queue.name)", "broker_says": "\(error.message)",
                    "fix": "delete the queue when it is empty; the worker declares it again (docs/reliability.md)",
                ])
        }
    }

    private func installSources(for connection: AMQPConnection) {
        let source = DispatchSource.makeReadSource(fileDescriptor: connection.fileDescriptor, queue: queue)
        source.setEventHandler { [unowned self] in self.readAvailable() }
        source.resume()
        readSource = source
        let heartbeat = configuration.amqp.heartbeat
        if heartbeat > 0 {
            let timer = DispatchSource.makeTimerSource(queue: queue)
            let interval = max(Double(heartbeat) / 4, 0.25)
            timer.schedule(deadline: .now() + interval, repeating: interval, leeway: .milliseconds(50))
            timer.setEventHandler { [unowned self] in self.readAvailable() }
            timer.resume()
            heartbeatTimer = timer
        }
        confirmWatch = ConfirmWatch(timeoutSeconds: configuration.amqp.confirmTimeout)
        if confirmWatch.timeoutNanoseconds > 0 {
            let timer = DispatchSource.makeTimerSource(queue: queue)
            let interval = min(configuration.amqp.confirmTimeout / 4, 1)
            timer.schedule(deadline: .now() + interval, repeating: interval, leeway: .milliseconds(100))
            timer.setEventHandler { [unowned self] in self.checkConfirms() }
            timer.resume()
            confirmTimer = timer
        }
    }

    /// A broker that keeps the connection alive but confirms nothing would hold every job that
    /// published in the prefetch window for good: drop the connection as if it were lost. The
    /// broker redelivers those jobs (their results may come twice, never not at all). The dead
    /// copies of too-large jobs, on their own channel, are watched the same way.
    private func checkConfirms() {
        assertOnQueue()
        let now = DispatchTime.now().uptimeNanoseconds
        let oldest = [confirms.oldestPublishedAt, deadCopies.oldestUnconfirmedAt].compactMap { $0 }.min()
        guard isOpenEpoch, confirmWatch.isOverdue(oldestPublishedAt: oldest, now: now, blocked: isBlocked) else {
            return
        }
        let seconds = Parse.showSeconds(configuration.amqp.confirmTimeout)
        logger.error(
            "the broker confirmed no publish in time; reconnecting",
            metadata: [
                "unconfirmed": "\(confirms.pendingCount + deadCopies.unconfirmedCount)",
                "confirm_timeout_seconds": "\(seconds)",
            ])
        connection?.close()
        handleLoss(AMQPError(.confirmTimeout, operation: "publish", message: "no confirm within \(seconds) s"))
    }

    private func teardownSources() {
        readSource?.cancel()
        readSource = nil
        heartbeatTimer?.cancel()
        heartbeatTimer = nil
        confirmTimer?.cancel()
        confirmTimer = nil
    }

    /// Cancels the consumer for the drain; deliveries already sent are read and handed back.
    func cancelConsumer() {
        cancelAwaitsUnblock = false
        guard let connection else { return }
        do {
            try connection.cancel(channel: Self.channel, consumerTag: consumerTag)
            logger.info("consumer cancelled", metadata: ["queue": "\(configuration.queue.jobs)"])
            readBufferedInput()
        } catch {
            handleLoss(error)
        }
    }

    private func teardown() {
        cancelAwaitsUnblock = false
        teardownSources()
        connection = nil
        acks.reset()
        for completion in confirms.reset() { completion(.connectionLost) }
        // The copies' originals are redelivered; a copy still waiting for its confirm would
        // otherwise count as overdue on every later connection.
        deadCopies = DeadCopyStream()
        clearBlocked()
    }

    /// A block belongs to the connection the broker sent it on. The next connection starts
    /// unblocked, and the broker never sends `connection.unblocked` on a connection it did not
    /// block, so a block kept past its connection would park admission for good (issue 33).
    private func clearBlocked() {
        let wasBlocked = visible.withLock { state in
            defer { state.blocked = false }
            return state.blocked
        }
        if wasBlocked {
            logger.notice("the connection the broker blocked is gone; admission resumes")
            delegate?.session(self, blocked: false)
        }
    }

    func handleLoss(_ error: AMQPError) {
        dispatchPrecondition(condition: .onQueue(queue))
        guard isOpenEpoch else { return }
        logger.error("lost the broker connection", metadata: ["error": "\(error)"])
        perform(lifecycle.connectionLost(jitter: Double.random(in: 0..<1)))
        publishState()
        delegate?.session(self, didLoseConnection: error)
    }

    func publishState() {
        assertOnQueue()
        let state = lifecycle.state
        visible.withLock { $0.state = state }
    }
}
