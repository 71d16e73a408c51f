/// One job's life, from its delivery to its settlement, as events in and actions out. Pure: the
/// worker's runner (``Worker/run(_:_:)``) feeds the events and performs the actions.
///
/// ```
/// received ─► waiting ─► admitted ─► fetched ─► decided ─► publishing ─► settled
/// received ─► decided                        answered without a fetch (invalid, poison, bad URL)
/// received ─► settled                        rejected unread (properties not read as they came)
/// waiting ─► decided                         deferred: republished to a delay queue
/// waiting, admitted, fetched, decided ─► handedBack   the drain, its deadline, a lost channel
/// publishing ─► handedBack                   the channel was lost before every confirm
/// publishing ─► rejecting ─► settled         a copy that cannot be encoded
/// received ─► following ─► followed ─► decided   a follower of an identical request's fetch
/// following ─► decided, following ─► handedBack   its leader was deferred, or handed back
/// ```
///
/// What the job holds, by state, and where each is given back; nothing else gives them back:
/// - the group `inFlight` (the drain waits on it): from `waiting` (``Admission`` enters it) or from
///   an answer without a fetch (``answeredWithoutFetch()``) or from ``attached()`` to `settled` or
///   `handedBack`;
/// - a global permit: while `admitted` and `fetched`, given back when the outcome is ``decided()``
///   or the job is handed back;
/// - its origin's slot: while `admitted`, given back with what the fetch told about the origin
///   (``fetched(_:)``), or with nothing learnt when the job is handed back first.
package struct JobLifecycle: Sendable, Equatable {
    package enum State: Sendable, Equatable {
        /// Read off the channel; not yet in the group.
        case received
        /// In its origin's queue (``OriginScheduler``), holding the group.
        case waiting
        /// Holding a global permit and its origin's slot: the fetch runs.
        case admitted(OriginSlot)
        /// The origin's slot is back; the permit is still held (checks, hash, store).
        case fetched
        /// Holding only the group: the outcome is known (stored, failed, deferred, answered at
        /// once) and its messages are about to go out.
        case decided
        /// Its messages wait for their confirms.
        case publishing(Publishing)
        /// A copy could not be encoded: the fallback result is out, then the delivery is rejected.
        case rejecting
        /// Attached to an identical request's leader (``InFlightRequests``), holding the group only:
        /// no permit and no slot, since it causes no request.
        case following
        /// The leader's fetch ended: its own checks and store run on the shared response, still
        /// holding only the group.
        case followed
        /// Acked, nacked or rejected, and out of the group.
        case settled
        /// Returned to the broker unanswered (nacked with requeue, or left to a lost channel's
        /// redelivery), and out of the group.
        case handedBack
    }

    /// The confirms a publishing job still waits for, and what to do once they are in.
    package struct Publishing: Sendable, Equatable {
        package var remaining: Int
        /// The weightiest answer of a publish that was not confirmed, if any
        /// (``JobLifecycle/weight(of:)``).
        package var failure: PublishOutcome?
        package var outcome: OutcomePolicy.Outcome
        package var requeueIfUnconfirmed: Bool
    }

    /// How a delivery whose messages were all answered is settled; each leaves the group.
    package enum Settlement: Sendable, Equatable {
        /// Every message was confirmed: ack, and count the outcome.
        case ack(OutcomePolicy.Outcome)
        /// A message was nacked or returned: nack, with or without requeue.
        case nack(requeue: Bool, failure: PublishOutcome)
        /// The channel is gone: its tag cannot be used, the broker redelivers the job.
        case leaveToBroker
        /// Rejected to the dead-letter exchange as it came (`properties_too_large`).
        case reject
    }

    /// How the job's publish span and its own span end, once its publishes are all answered.
    package struct SpanEnding: Sendable, Equatable {
        /// The publish failure that settled the delivery, for the publish span.
        package var publishFailure: PublishOutcome?
        /// The job span's error code: the outcome's, else `publish_unconfirmed` if one was not.
        package var errorCode: String?
    }

    package enum Action: Sendable, Equatable {
        case none
        /// The job is answered without a fetch: it enters the group here.
        case enterGroup
        /// Start the fetch; the job holds a permit and its origin's slot.
        case fetch
        /// Give the origin's slot back, with what the fetch told about the origin.
        case reportToOrigin(OriginSlot, OriginFetchOutcome)
        /// Give the global permit back.
        case releasePermit
        /// Taken out of its origin's queue on the channel queue (drain, lost channel): end its span
        /// as `aborted`, nack it with requeue if `nack` (else the broker redelivers it), and leave
        /// the group.
        case dropWaiting(nack: Bool)
        /// An admitted job goes back to the broker unanswered (an aborted fetch, or a job that
        /// cannot start): give back what it holds (`slot` with nothing learnt, the permit), end
        /// its span as `aborted`, nack it with requeue, and leave the group.
        case handBack(slot: OriginSlot?, releasePermit: Bool)
        /// All its messages are answered: end its spans (unless they ended already), settle, and
        /// leave the group.
        case settle(Settlement, ending: SpanEnding?)
        /// A copy could not be encoded (nothing was sent): end its spans, publish a result with
        /// `properties_too_large` first if `fallback` (the job had no result yet), then report
        /// ``fallbackAnswered(connectionLost:)``.
        case rejectUnencodable(fallback: Bool, ending: SpanEnding)
        /// Reject the delivery as it came, on the channel queue, with nothing held: its job span
        /// ends with `code`, which is counted.
        case rejectUnread(JobError.Code)
    }

    package private(set) var state = State.received

    package init() {}

    /// Where the job is, for the gauges (`image_fetch_jobs_waiting_admission`, `_in_flight`):
    /// just read, waiting for admission, in flight (admitted, deferred or answered, until
    /// settled), or done.
    package enum Phase: Sendable, Equatable {
        case arrived, waiting, inFlight, done
    }

    /// The origin's slot the job holds, while it is admitted.
    package var slot: OriginSlot? {
        if case .admitted(let slot) = state { return slot }
        return nil
    }

    package var phase: Phase {
        switch state {
        case .received: .arrived
        case .waiting: .waiting
        case .admitted, .fetched, .following, .followed, .decided, .publishing, .rejecting: .inFlight
        case .settled, .handedBack: .done
        }
    }

    // MARK: - Intake and admission

    /// The job went to admission, which entered the group for it.
    package mutating func submitted() -> Action {
        guard case .received = state else { return invalid() }
        state = .waiting
        return .none
    }

    /// The job is answered at once, without a fetch or a permit (invalid, poison, a refused URL).
    package mutating func answeredWithoutFetch() -> Action {
        guard case .received = state else { return invalid() }
        state = .decided
        return .enterGroup
    }

    /// The delivery cannot be copied as it came (``AMQPProperties/readLossily``): rejected to the
    /// dead-letter exchange at once, which keeps its bytes. It never enters the group.
    package mutating func refusedUnread(_ code: JobError.Code) -> Action {
        guard case .received = state else { return invalid() }
        state = .settled
        return .rejectUnread(code)
    }

    /// An identical request is waiting or in flight: the job follows it instead of going to
    /// admission, and enters the group here.
    package mutating func attached() -> Action {
        guard case .received = state else { return invalid() }
        state = .following
        return .enterGroup
    }

    /// The leader's fetch ended (or its robots.txt check did): the follower goes on with its own
    /// copy of the outcome.
    package mutating func leaderFetched() -> Action {
        guard case .following = state else { return invalid() }
        state = .followed
        return .none
    }

    /// Admission gave the job a permit and its origin's slot. A job that cannot start (no checked
    /// URL: never scheduled, but it must not be lost) gives both back and is handed back.
    package mutating func admitted(_ slot: OriginSlot, canStart: Bool) -> Action {
        guard case .waiting = state else { return invalid() }
        guard canStart else {
            state = .handedBack
            return .handBack(slot: slot, releasePermit: true)
        }
        state = .admitted(slot)
        return .fetch
    }

    /// The scheduler gave the job (or the leader it follows) up from the window: it is republished
    /// to a delay queue. It never held a permit.
    package mutating func deferred() -> Action {
        switch state {
        case .waiting, .following: break
        default: return invalid()
        }
        state = .decided
        return .none
    }

    /// Taken out of its origin's queue (or its leader was): by the drain (`nack`) or because its
    /// channel was lost.
    package mutating func takenBack(nack: Bool) -> Action {
        switch state {
        case .waiting, .following: break
        default: return invalid()
        }
        state = .handedBack
        return .dropWaiting(nack: nack)
    }

    // MARK: - Fetch and store

    /// The fetch ended (with a response or not): the origin's slot goes back with `outcome`.
    package mutating func fetched(_ outcome: OriginFetchOutcome) -> Action {
        guard case .admitted(let slot) = state else { return invalid() }
        state = .fetched
        return .reportToOrigin(slot, outcome)
    }

    /// The job's outcome is known: after a fetch, the permit goes back (the checks and the store,
    /// if any, are done). Outcomes known without a fetch held no permit.
    package mutating func decided() -> Action {
        switch state {
        case .fetched:
            state = .decided
            return .releasePermit
        case .followed:
            state = .decided
            return .none
        case .decided:
            return .none
        default:
            return invalid()
        }
    }

    /// The job goes back to the broker unanswered: its fetch was aborted (the drain's deadline),
    /// or it turned out not to be a job after all.
    package mutating func handBack() -> Action {
        switch state {
        case .admitted(let slot):
            state = .handedBack
            return .handBack(slot: slot, releasePermit: true)
        case .fetched:
            state = .handedBack
            return .handBack(slot: nil, releasePermit: true)
        case .decided, .following, .followed:
            state = .handedBack
            return .handBack(slot: nil, releasePermit: false)
        default:
            return invalid()
        }
    }

    // MARK: - Publish and settle

    /// `count` messages went out for `outcome`; the delivery is settled when all are answered.
    package mutating func publishing(
        _ count: Int, outcome: OutcomePolicy.Outcome, requeueIfUnconfirmed: Bool
    ) -> Action {
        // Every decision has at least one message (a result or a copy).
        guard case .decided = state, count > 0 else { return invalid() }
        state = .publishing(
            Publishing(
                remaining: count, failure: nil, outcome: outcome,
                requeueIfUnconfirmed: requeueIfUnconfirmed))
        return .none
    }

    /// The broker answered one of the job's publishes. The delivery is acked only when every one
    /// was confirmed.
    package mutating func publishAnswered(_ answer: PublishOutcome) -> Action {
        guard case .publishing(var publishing) = state, publishing.remaining > 0 else { return invalid() }
        publishing.remaining -= 1
        if Self.weight(of: answer) > publishing.failure.map(Self.weight(of:)) ?? 0 { publishing.failure = answer }
        state = .publishing(publishing)
        guard publishing.remaining == 0 else { return .none }
        return settle(publishing)
    }

    /// Which failure settles a delivery whose publishes failed in more than one way, whatever
    /// the order of their answers: a lost channel leaves nothing else to do; a nack or a return
    /// is passing, so the delivery is nacked (requeued if retryable) before a message that can
    /// never be encoded rejects it.
    package static func weight(of answer: PublishOutcome) -> Int {
        switch answer {
        case .confirmed: 0
        case .unencodable: 1
        case .nacked, .returned: 2
        case .connectionLost: 3
        }
    }

    private mutating func settle(_ publishing: Publishing) -> Action {
        let ending = SpanEnding(
            publishFailure: publishing.failure,
            errorCode: publishing.outcome.errorCode ?? publishing.failure.map { _ in "publish_unconfirmed" })
        switch publishing.failure {
        case nil:
            state = .settled
            return .settle(.ack(publishing.outcome), ending: ending)
        case .connectionLost?:
            state = .handedBack
            return .settle(.leaveToBroker, ending: ending)
        case .unencodable?:
            state = .rejecting
            return .rejectUnencodable(fallback: Self.hasFallbackResult(publishing.outcome), ending: ending)
        case let failure?:
            state = .settled
            return .settle(.nack(requeue: publishing.requeueIfUnconfirmed, failure: failure), ending: ending)
        }
    }

    /// Whether a decision with this outcome published a copy of the delivery and no result, so
    /// that a copy that cannot be encoded gets a result saying why: the job is kept for it.
    package static func hasFallbackResult(_ outcome: OutcomePolicy.Outcome) -> Bool {
        switch outcome {
        case .retry, .deferred, .deadLettered: true
        case .ok, .notModified, .failed, .failedFinal: false
        }
    }

    /// The fallback result of a job with a copy that could not be encoded was answered (or there
    /// was none to send): reject the delivery, unless the channel is gone.
    package mutating func fallbackAnswered(connectionLost: Bool) -> Action {
        guard case .rejecting = state else { return invalid() }
        if connectionLost {
            state = .handedBack
            return .settle(.leaveToBroker, ending: nil)
        }
        state = .settled
        return .settle(.reject, ending: nil)
    }

    /// An event that cannot happen in this state: a bug in the runner. Debug builds stop; a
    /// release build changes nothing, so the job keeps what it holds rather than give it back twice.
    private func invalid(_ function: StaticString = #function) -> Action {
        assertionFailure("JobLifecycle: \(function) in state \(state)")
        return .none
    }
}
