import Testing

@testable import ImageFetchWorker

/// A follower's life (issue 35, item 3): it holds the group only, never a permit or a slot, and
/// goes where its leader goes.
@Suite struct JobLifecycleFollowerTests {
    typealias Job = JobLifecycleTests.Job

    private static func attached() -> Job {
        var job = Job()
        #expect(job.on { $0.attached() } == .enterGroup)
        #expect(job.lifecycle.state == .following)
        #expect(job.lifecycle.phase == .inFlight)
        return job
    }

    @Test func aFollowerTakesTheLeadersOutcomeWithoutAPermit() {
        var job = Self.attached()
        #expect(job.on { $0.leaderFetched() } == JobLifecycle.Action.none)
        #expect(job.lifecycle.state == .followed)
        #expect(job.lifecycle.slot == nil)
        #expect(job.on { $0.decided() } == JobLifecycle.Action.none)
        #expect(job.on { $0.publishing(1, outcome: .ok, requeueIfUnconfirmed: true) } == JobLifecycle.Action.none)
        #expect(
            job.on { $0.publishAnswered(.confirmed) }
                == .settle(.ack(.ok), ending: .init(publishFailure: nil, errorCode: nil)))
        #expect(job.ledger.permitsReleased == 0 && job.ledger.slotsReturned == 0)
        #expect(job.ledger.balanced)
    }

    @Test func aFollowerOfAnAbortedFetchIsHandedBackHoldingOnlyTheGroup() {
        var job = Self.attached()
        job.on { $0.leaderFetched() }
        #expect(job.on { $0.handBack() } == .handBack(slot: nil, releasePermit: false))
        #expect(job.lifecycle.phase == .done)
        #expect(job.ledger.balanced)
    }

    @Test func aFollowerWhoseLeaderIsHandedBackBeforeItsFetchGoesBackToo() {
        var job = Self.attached()
        #expect(job.on { $0.handBack() } == .handBack(slot: nil, releasePermit: false))
        #expect(job.ledger.balanced)
    }

    @Test func theDrainAndALostChannelTakeAFollowerBackWithItsWaitingLeader() {
        for nack in [true, false] {
            var job = Self.attached()
            #expect(job.on { $0.takenBack(nack: nack) } == .dropWaiting(nack: nack))
            #expect(job.lifecycle.state == .handedBack)
            #expect(job.ledger.balanced)
        }
    }

    @Test func aFollowerIsDeferredWithItsLeader() {
        var job = Self.attached()
        #expect(job.on { $0.deferred() } == JobLifecycle.Action.none)
        #expect(job.lifecycle.state == .decided)
        job.on { $0.publishing(1, outcome: .deferred, requeueIfUnconfirmed: true) }
        job.on { $0.publishAnswered(.confirmed) }
        #expect(job.ledger.balanced)
    }
}
