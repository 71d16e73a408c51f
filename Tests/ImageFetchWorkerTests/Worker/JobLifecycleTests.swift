import Testing

@testable import ImageFetchWorker

/// The job's lifecycle, event by event: what it holds in each state, and that each permit, origin
/// slot and group membership is given back exactly once, on every path (issue 34).
@Suite struct JobLifecycleTests {
    static let slot = OriginSlot(
        origin: Origin(scheme: "http", host: "a.example", port: 80), startedAt: 7,
        inFlightAtStart: 1)
    static let served = OriginFetchOutcome.response(
        status: 200, latencyNanoseconds: 1_000, durationNanoseconds: 2_000,
        retryAfterSeconds: nil)

    /// What the actions of one job took and gave back.
    struct Ledger {
        var permits = 0, slots = 0, group = 0
        var permitsReleased = 0, slotsReturned = 0, groupLeft = 0
        var actions: [JobLifecycle.Action] = []

        mutating func record(_ action: JobLifecycle.Action) {
            actions.append(action)
            switch action {
            case .none, .rejectUnencodable, .rejectUnread: break
            case .enterGroup: group += 1
            case .fetch:
                permits += 1
                slots += 1
            case .reportToOrigin: slotsReturned += 1
            case .releasePermit: permitsReleased += 1
            case .dropWaiting: groupLeft += 1
            case .handBack(let slot, let releasePermit):
                if slot != nil { slotsReturned += 1 }
                if releasePermit { permitsReleased += 1 }
                groupLeft += 1
            case .settle: groupLeft += 1
            }
        }

        /// Admission holds the group for a submitted job, and the permit and slot for an admitted one.
        mutating func admittedByScheduler(canStart: Bool) {
            if !canStart {
                permits += 1
                slots += 1
            }
        }

        var balanced: Bool {
            permits == permitsReleased && slots == slotsReturned && group == groupLeft
        }
    }

    /// A lifecycle with its ledger, fed events.
    struct Job {
        var lifecycle = JobLifecycle()
        var ledger = Ledger()

        @discardableResult
        mutating func on(_ event: (inout JobLifecycle) -> JobLifecycle.Action) -> JobLifecycle.Action {
            let action = event(&lifecycle)
            ledger.record(action)
            return action
        }

        /// Submitted to admission, which enters the group, then admitted.
        mutating func admit() {
            on { $0.submitted() }
            ledger.group += 1
            #expect(on { $0.admitted(JobLifecycleTests.slot, canStart: true) } == .fetch)
        }
    }

    // MARK: - The whole path

    @Test func aStoredJobIsAckedOnlyAfterEveryConfirm() {
        var job = Job()
        #expect(job.lifecycle.phase == .arrived)
        #expect(job.on { $0.submitted() } == JobLifecycle.Action.none)
        job.ledger.group += 1
        #expect(job.lifecycle.phase == .waiting)
        #expect(job.on { $0.admitted(Self.slot, canStart: true) } == .fetch)
        #expect(job.lifecycle.state == .admitted(Self.slot))
        #expect(job.lifecycle.phase == .inFlight)
        #expect(job.on { $0.fetched(Self.served) } == .reportToOrigin(Self.slot, Self.served))
        #expect(job.lifecycle.state == .fetched)
        #expect(job.on { $0.decided() } == .releasePermit)
        #expect(job.on { $0.publishing(3, outcome: .ok, requeueIfUnconfirmed: true) } == JobLifecycle.Action.none)
        #expect(job.on { $0.publishAnswered(.confirmed) } == JobLifecycle.Action.none)
        #expect(job.on { $0.publishAnswered(.confirmed) } == JobLifecycle.Action.none)
        #expect(job.lifecycle.phase == .inFlight)
        #expect(
            job.on { $0.publishAnswered(.confirmed) }
                == .settle(.ack(.ok), ending: .init(publishFailure: nil, errorCode: nil)))
        #expect(job.lifecycle.state == .settled)
        #expect(job.lifecycle.phase == .done)
        #expect(job.ledger.balanced)
    }

    @Test func theOutcomeIsKnownOnceSoThePermitGoesBackOnce() {
        var job = Job()
        job.admit()
        job.on { $0.fetched(.other) }
        #expect(job.on { $0.decided() } == .releasePermit)
        #expect(job.on { $0.decided() } == JobLifecycle.Action.none)
        job.on { $0.publishing(1, outcome: .retry, requeueIfUnconfirmed: true) }
        job.on { $0.publishAnswered(.confirmed) }
        #expect(job.ledger.permitsReleased == 1)
        #expect(job.ledger.balanced)
    }

    // MARK: - Abort paths

    @Test func theDrainHandsBackAWaitingJob() {
        var job = Job()
        job.on { $0.submitted() }
        job.ledger.group += 1
        #expect(job.on { $0.takenBack(nack: true) } == .dropWaiting(nack: true))
        #expect(job.lifecycle.state == .handedBack)
        #expect(job.ledger.balanced)
    }

    @Test func aLostChannelDropsAWaitingJobWithoutANack() {
        var job = Job()
        job.on { $0.submitted() }
        job.ledger.group += 1
        #expect(job.on { $0.takenBack(nack: false) } == .dropWaiting(nack: false))
        #expect(job.lifecycle.phase == .done)
        #expect(job.ledger.balanced)
    }

    @Test func aFetchAbortedAtTheDeadlineGivesBackSlotAndPermitOnce() {
        var job = Job()
        job.admit()
        #expect(job.on { $0.fetched(.other) } == .reportToOrigin(Self.slot, .other))
        #expect(job.on { $0.handBack() } == .handBack(slot: nil, releasePermit: true))
        #expect(job.lifecycle.state == .handedBack)
        #expect(job.ledger.balanced)
    }

    @Test func aJobThatCannotStartGivesBackWhatAdmissionGaveIt() {
        var job = Job()
        job.on { $0.submitted() }
        job.ledger.group += 1
        job.ledger.admittedByScheduler(canStart: false)
        #expect(job.on { $0.admitted(Self.slot, canStart: false) } == .handBack(slot: Self.slot, releasePermit: true))
        #expect(job.ledger.balanced)
    }

    @Test func aFailedStoreReleasesThePermitAndPublishesItsRetry() {
        var job = Job()
        job.admit()
        job.on { $0.fetched(Self.served) }
        // The store's completion: the outcome (a retry for storage_failed) is known.
        #expect(job.on { $0.decided() } == .releasePermit)
        job.on { $0.publishing(1, outcome: .retry, requeueIfUnconfirmed: true) }
        #expect(
            job.on { $0.publishAnswered(.confirmed) }
                == .settle(.ack(.retry), ending: .init(publishFailure: nil, errorCode: nil)))
        #expect(job.ledger.balanced)
    }

    @Test func anUnconfirmedPublishNacksAfterTheLastAnswer() {
        var job = Job()
        job.admit()
        job.on { $0.fetched(Self.served) }
        job.on { $0.decided() }
        job.on { $0.publishing(2, outcome: .failed(.httpError), requeueIfUnconfirmed: true) }
        #expect(job.on { $0.publishAnswered(.nacked) } == JobLifecycle.Action.none)
        #expect(
            job.on { $0.publishAnswered(.confirmed) }
                == .settle(
                    .nack(requeue: true, failure: .nacked),
                    ending: .init(publishFailure: .nacked, errorCode: JobError.Code.httpError.rawValue)))
        #expect(job.lifecycle.state == .settled)
        #expect(job.ledger.balanced)
    }

    @Test func aReturnedDeadCopyIsRejectedNotRequeued() {
        var job = Job()
        job.on { $0.answeredWithoutFetch() }
        job.on { $0.publishing(1, outcome: .deadLettered(.invalidJob), requeueIfUnconfirmed: false) }
        #expect(
            job.on { $0.publishAnswered(.returned) }
                == .settle(
                    .nack(requeue: false, failure: .returned),
                    ending: .init(publishFailure: .returned, errorCode: JobError.Code.invalidJob.rawValue)))
        #expect(job.ledger.balanced)
    }

    @Test func anOkJobWhosePublishIsUnconfirmedEndsItsSpanAsPublishUnconfirmed() {
        var job = Job()
        job.admit()
        job.on { $0.fetched(Self.served) }
        job.on { $0.decided() }
        job.on { $0.publishing(1, outcome: .ok, requeueIfUnconfirmed: true) }
        #expect(
            job.on { $0.publishAnswered(.nacked) }
                == .settle(
                    .nack(requeue: true, failure: .nacked),
                    ending: .init(publishFailure: .nacked, errorCode: "publish_unconfirmed")))
    }

    @Test func aConnectionLostWhilePublishingLeavesTheDeliveryToTheBroker() {
        var job = Job()
        job.admit()
        job.on { $0.fetched(Self.served) }
        job.on { $0.decided() }
        job.on { $0.publishing(2, outcome: .ok, requeueIfUnconfirmed: true) }
        job.on { $0.publishAnswered(.connectionLost) }
        #expect(
            job.on { $0.publishAnswered(.connectionLost) }
                == .settle(
                    .leaveToBroker, ending: .init(publishFailure: .connectionLost, errorCode: "publish_unconfirmed")))
        #expect(job.lifecycle.state == .handedBack)
        #expect(job.ledger.balanced)
    }

    // MARK: - Without a fetch

    /// A delivery that no copy could carry as it came is rejected at once and holds nothing.
    @Test func aDeliveryRejectedUnreadHoldsNothing() {
        var job = Job()
        #expect(job.on { $0.refusedUnread(.invalidJob) } == .rejectUnread(.invalidJob))
        #expect(job.lifecycle.state == .settled)
        #expect(job.lifecycle.phase == .done)
        #expect(job.ledger.balanced && job.ledger.group == 0)
    }

    @Test func aJobAnsweredAtOnceEntersTheGroupAndHoldsNoPermit() {
        var job = Job()
        #expect(job.on { $0.answeredWithoutFetch() } == .enterGroup)
        #expect(job.lifecycle.phase == .inFlight)
        #expect(job.on { $0.decided() } == JobLifecycle.Action.none)
        job.on { $0.publishing(1, outcome: .failed(.invalidURL), requeueIfUnconfirmed: true) }
        job.on { $0.publishAnswered(.confirmed) }
        #expect(job.ledger.permitsReleased == 0)
        #expect(job.ledger.balanced)
    }

    @Test func aDeferredJobHoldsNoPermit() {
        var job = Job()
        job.on { $0.submitted() }
        job.ledger.group += 1
        #expect(job.on { $0.deferred() } == JobLifecycle.Action.none)
        #expect(job.lifecycle.phase == .inFlight)
        job.on { $0.publishing(1, outcome: .deferred, requeueIfUnconfirmed: true) }
        #expect(
            job.on { $0.publishAnswered(.confirmed) }
                == .settle(.ack(.deferred), ending: .init(publishFailure: nil, errorCode: nil)))
        #expect(job.ledger.balanced)
    }

    @Test func aDeferredJobThatIsNoJobIsHandedBack() {
        var job = Job()
        job.on { $0.submitted() }
        job.ledger.group += 1
        job.on { $0.deferred() }
        #expect(job.on { $0.handBack() } == .handBack(slot: nil, releasePermit: false))
        #expect(job.ledger.balanced)
    }

    // MARK: - A copy that cannot be encoded

    @Test func anUnencodableCopyGetsAFallbackResultThenIsRejected() {
        var job = Job()
        job.on { $0.answeredWithoutFetch() }
        job.on { $0.publishing(1, outcome: .deadLettered(.invalidJob), requeueIfUnconfirmed: false) }
        let ending = JobLifecycle.SpanEnding(publishFailure: .unencodable, errorCode: JobError.Code.invalidJob.rawValue)
        #expect(job.on { $0.publishAnswered(.unencodable) } == .rejectUnencodable(fallback: true, ending: ending))
        #expect(job.lifecycle.state == .rejecting)
        #expect(job.ledger.groupLeft == 0)
        #expect(job.on { $0.fallbackAnswered(connectionLost: false) } == .settle(.reject, ending: nil))
        #expect(job.lifecycle.state == .settled)
        #expect(job.ledger.balanced)
    }

    @Test func anUnencodableResultHasNoFallback() {
        var job = Job()
        job.admit()
        job.on { $0.fetched(Self.served) }
        job.on { $0.decided() }
        job.on { $0.publishing(1, outcome: .ok, requeueIfUnconfirmed: true) }
        #expect(
            job.on { $0.publishAnswered(.unencodable) }
                == .rejectUnencodable(
                    fallback: false, ending: .init(publishFailure: .unencodable, errorCode: "publish_unconfirmed")))
    }

    /// A final failure publishes a result and a dead copy. How the delivery is settled when both
    /// fail depends on what failed, not on which answer came last.
    @Test(arguments: [
        (
            [PublishOutcome.unencodable, .nacked], PublishOutcome.nacked,
            JobLifecycle.Settlement.nack(requeue: true, failure: .nacked)
        ),
        ([.nacked, .unencodable], .nacked, .nack(requeue: true, failure: .nacked)),
        ([.returned, .unencodable], .returned, .nack(requeue: true, failure: .returned)),
        ([.connectionLost, .nacked], .connectionLost, .leaveToBroker),
        ([.nacked, .connectionLost], .connectionLost, .leaveToBroker),
        ([.unencodable, .connectionLost], .connectionLost, .leaveToBroker),
    ])
    func twoFailedPublishesSettleByTheWeightierFailure(
        answers: [PublishOutcome], failure: PublishOutcome, settlement: JobLifecycle.Settlement
    ) {
        var job = Job()
        job.admit()
        job.on { $0.fetched(Self.served) }
        job.on { $0.decided() }
        job.on { $0.publishing(2, outcome: .failedFinal(.httpError), requeueIfUnconfirmed: true) }
        #expect(job.on { $0.publishAnswered(answers[0]) } == JobLifecycle.Action.none)
        let ending = JobLifecycle.SpanEnding(publishFailure: failure, errorCode: "http_error")
        #expect(job.on { $0.publishAnswered(answers[1]) } == .settle(settlement, ending: ending))
    }

    @Test func aLostChannelDuringTheFallbackLeavesTheDeliveryToTheBroker() {
        var job = Job()
        job.on { $0.answeredWithoutFetch() }
        job.on { $0.publishing(1, outcome: .retry, requeueIfUnconfirmed: true) }
        job.on { $0.publishAnswered(.unencodable) }
        #expect(job.on { $0.fallbackAnswered(connectionLost: true) } == .settle(.leaveToBroker, ending: nil))
        #expect(job.lifecycle.state == .handedBack)
        #expect(job.ledger.balanced)
    }

    @Test func onlyCopiesWithoutAResultKeepTheJobForAFallback() {
        #expect(JobLifecycle.hasFallbackResult(.retry))
        #expect(JobLifecycle.hasFallbackResult(.deferred))
        #expect(JobLifecycle.hasFallbackResult(.deadLettered(.deliveryLimit)))
        #expect(!JobLifecycle.hasFallbackResult(.ok))
        #expect(!JobLifecycle.hasFallbackResult(.failed(.httpError)))
        #expect(!JobLifecycle.hasFallbackResult(.failedFinal(.httpError)))
    }
}
