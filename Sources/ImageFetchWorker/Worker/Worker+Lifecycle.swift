import Dispatch
import Foundation
import Logging

extension JobRunner {
    /// The one entry for a job's events: the job's ``JobLifecycle`` changes state and says what to
    /// do, and this does it. It is the only place that gives back a permit, an origin's slot or a
    /// membership of the group, and the only place the waiting and in-flight gauges change.
    ///
    /// Called on the queue the job is on; the hand-offs between queues order the calls (see
    /// ``JobContext``), so it takes no lock.
    func run(_ context: JobContext, _ event: (inout JobLifecycle) -> JobLifecycle.Action) {
        let before = context.lifecycle.phase
        let action = event(&context.lifecycle)
        let after = context.lifecycle.phase
        if before != after { stats.jobMoved(from: before.gauge, to: after.gauge) }
        perform(action, for: context)
    }

    private func perform(_ action: JobLifecycle.Action, for context: JobContext) {
        switch action {
        case .none:
            break
        case .enterGroup:
            // A job answered without a fetch holds the group until it settles, like any other.
            inFlight.enter()
            context.admittedAt = DispatchTime.now().uptimeNanoseconds
        case .fetch:
            startFetch(context)
        case .reportToOrigin(let slot, let outcome):
            admission.finished(slot, outcome: outcome)
        case .releasePermit:
            // At the end of the block of completions this runs in, with the others (one wake-up).
            CompletionBatch.signal(semaphore)
        case .dropWaiting(let nack):
            // On the channel queue (the drain's hand-back, or a lost channel's cleanup).
            context.trace.end(errorCode: JobTrace.handedBack)
            if nack {
                session.nackOnQueue(context.delivery, requeue: true)
                stats.handedBack()
            }
            inFlight.leave()
            handBackFollowers(of: context, nack: nack)
        case .handBack(let slot, let releasePermit):
            if releasePermit { CompletionBatch.signal(semaphore) }
            if let slot { admission.finished(slot, outcome: .other) }
            context.trace.end(errorCode: JobTrace.handedBack)
            let delivery = context.delivery
            session.queue.async { [self] in
                session.nackOnQueue(delivery, requeue: true)
                stats.handedBack()
                inFlight.leave()
            }
            handBackFollowers(of: context, nack: nil)
        case .settle(let settlement, let ending):
            if let ending { endSpans(context, ending) }
            settle(context, settlement)
        case .rejectUnencodable(let fallback, let ending):
            endSpans(context, ending)
            rejectUnencodable(context, fallback: fallback)
        case .rejectUnread(let code):
            context.trace.end(errorCode: code.rawValue)
            session.nackOnQueue(context.delivery, requeue: false)
            stats.failed(code)
            stats.deadLettered()
        }
    }

    private func endSpans(_ context: JobContext, _ ending: JobLifecycle.SpanEnding) {
        if let span = context.publishSpan {
            JobTrace.endPublish(span, failure: ending.publishFailure.map { "\($0)" })
            context.publishSpan = nil
        }
        context.trace.end(errorCode: ending.errorCode)
    }

    /// Settles the delivery once the broker answered all the job's messages (channel queue), and
    /// leaves the group.
    private func settle(_ context: JobContext, _ settlement: JobLifecycle.Settlement) {
        let receipt = context.delivery
        switch settlement {
        case .ack(let outcome):
            session.ackOnQueue(receipt)
            stats.metrics.ackLatency.recordNanoseconds(Int64(DispatchTime.now().uptimeNanoseconds - receipt.receivedAt))
            count(outcome, redeliveredJobID: context.job.flatMap { $0.redelivered ? $0.id : nil })
        case .nack(let requeue, let failure):
            logger.warning(
                "publish not confirmed; job handed back",
                metadata: [
                    "outcome": "\(failure)", "requeue": "\(requeue)",
                ])
            session.nackOnQueue(receipt, requeue: requeue)
        case .leaveToBroker:
            break  // the broker redelivers it; the old tag cannot be used
        case .reject:
            session.nackOnQueue(receipt, requeue: false)
            stats.failed(.propertiesTooLarge)
            stats.deadLettered()
        }
        inFlight.leave()
    }

    /// A message of the job could not be encoded: a copy whose properties (the delivery's, plus
    /// the worker's headers) do not fit in a frame. Nothing was sent and the connection goes on.
    /// The original is rejected to the jobs queue's dead-letter exchange as it came, which loses
    /// nothing (the broker adds `x-death`, reason `rejected`); for a job that had no result yet
    /// (`fallback`), a result with `properties_too_large` says why first. Runs on the channel queue.
    private func rejectUnencodable(_ context: JobContext, fallback: Bool) {
        let job = fallback ? context.job : nil
        logger.error(
            "a copy of the job does not fit in a frame; the job is dead-lettered as it came",
            metadata: [
                "job_id": "\(job?.id ?? "")", "error": "\(JobError.Code.propertiesTooLarge)",
            ])
        guard let job else { return run(context) { $0.fallbackAnswered(connectionLost: false) } }
        let elapsed = Double(DispatchTime.now().uptimeNanoseconds - context.delivery.receivedAt) / 1e6
        var result = JobResult(
            job: job, status: .failed, durationMs: elapsed, worker: hostName,
            finishedAt: Date().timeIntervalSince1970)
        result.error = JobError(
            .propertiesTooLarge,
            "the job's properties leave no room in a frame for the worker's headers; dead-lettered as it came",
            retryable: false)
        session.publishOnQueue(policy.resultMessage(result, job: job)) { [self] answer in
            // A lost channel: redelivered, and decided again.
            run(context) { $0.fallbackAnswered(connectionLost: answer == .connectionLost) }
        }
    }
}

extension JobLifecycle.Phase {
    /// The gauge (``WorkerStats``) a job in this phase counts in.
    var gauge: WorkerStats.JobGauge {
        switch self {
        case .arrived, .done: .uncounted
        case .waiting: .waiting
        case .inFlight: .inFlight
        }
    }
}
