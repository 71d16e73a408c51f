import Testing

@testable import ImageFetchWorker

@Suite struct DrainStateMachineTests {
    @Test func aDrainThatFinishesInTime() {
        var drain = DrainStateMachine()
        #expect(!drain.isDraining)
        #expect(drain.shutdownRequested() == .stopConsumingAndWait)
        #expect(drain.isDraining)
        #expect(drain.shutdownRequested() == .none)
        #expect(drain.consumerStopped() == .handBackWaiting)
        #expect(drain.jobsDrained() == .close)
        #expect(drain.closed() == .finish(exitStatus: 0))
        #expect(drain.state == .closed)
    }

    @Test func theDeadlineAbortsThenCloses() {
        var drain = DrainStateMachine()
        _ = drain.shutdownRequested()
        #expect(drain.deadlinePassed() == .abortFetches)
        #expect(drain.deadlinePassed() == .none)
        #expect(drain.abortGraceEnded() == .close)
        #expect(drain.jobsDrained() == .none)
        #expect(drain.closed() == .finish(exitStatus: 0))
    }

    @Test func jobsThatSettleAfterTheAbortClose() {
        var drain = DrainStateMachine()
        _ = drain.shutdownRequested()
        _ = drain.deadlinePassed()
        #expect(drain.jobsDrained() == .close)
        #expect(drain.abortGraceEnded() == .none)
    }

    @Test func nothingHappensBeforeShutdown() {
        var drain = DrainStateMachine()
        #expect(drain.consumerStopped() == .none)
        #expect(drain.jobsDrained() == .none)
        #expect(drain.deadlinePassed() == .none)
        #expect(drain.closed() == .none)
        #expect(drain.state == .running)
    }
}
