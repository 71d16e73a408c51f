import Testing

@testable import ImageFetchWorker

@Suite struct BodyBacklogTests {
    /// Completes `count` bodies: each starts (and must be let in) and completes.
    private func complete(_ count: Int, in backlog: inout BodyBacklog) {
        for _ in 0..<count {
            let admitted = backlog.bodyStarting()
            #expect(admitted)
            backlog.bodyCompleted()
        }
    }

    @Test func bodiesStartFreelyBelowTheLimit() {
        var backlog = BodyBacklog(limit: 4)
        complete(3, in: &backlog)
        #expect(backlog.waiting == 3)
        #expect(backlog.paused == 0)
        // Starting is not completing: bodies still receiving hold no place.
        for _ in 0..<10 {
            let admitted = backlog.bodyStarting()
            #expect(admitted)
        }
        #expect(backlog.waiting == 3)
    }

    @Test func atTheLimitNewBodiesPause() {
        var backlog = BodyBacklog(limit: 4)
        complete(4, in: &backlog)
        let first = backlog.bodyStarting()
        let second = backlog.bodyStarting()
        #expect(!first)
        #expect(!second)
        #expect(backlog.paused == 2)
    }

    @Test func theLoopIsWokenOnceWhenTheBacklogFallsToHalf() {
        var backlog = BodyBacklog(limit: 4)
        complete(4, in: &backlog)
        _ = backlog.bodyStarting()  // paused
        let atThree = backlog.bodiesTaken(1)
        #expect(!atThree, "3 waiting is above the resume threshold of 2")
        let atTwo = backlog.bodiesTaken(1)
        #expect(atTwo)
        let atOne = backlog.bodiesTaken(1)
        #expect(!atOne, "one wake-up per refill")
        // The loop looks: it may resume up to the limit.
        #expect(backlog.resumable() == 1)
        backlog.resumed(1)
        #expect(backlog.paused == 0)
        // Nothing paused: taking bodies wakes nobody.
        let none = backlog.bodiesTaken(1)
        #expect(!none)
    }

    @Test func resumingFillsUpToTheLimitOldestFirst() {
        var backlog = BodyBacklog(limit: 4)
        complete(4, in: &backlog)
        for _ in 0..<10 { _ = backlog.bodyStarting() }
        #expect(backlog.resumable() == 0, "still full")
        _ = backlog.bodiesTaken(3)
        #expect(backlog.resumable() == 3)
        backlog.resumed(3)
        #expect(backlog.paused == 7)
        // The three complete; the backlog is full again and the rest stay paused.
        for _ in 0..<3 { backlog.bodyCompleted() }
        #expect(backlog.resumable() == 0)
    }

    @Test func aWakeUpIsAskedForAgainAfterTheLoopHasLooked() {
        var backlog = BodyBacklog(limit: 2)
        complete(2, in: &backlog)
        for _ in 0..<5 { _ = backlog.bodyStarting() }
        let first = backlog.bodiesTaken(1)
        #expect(first)
        #expect(backlog.resumable() == 1)
        backlog.resumed(1)
        backlog.bodyCompleted()
        let again = backlog.bodiesTaken(1)
        #expect(again, "the loop looked since the last wake-up, so this refill wakes it again")
    }

    @Test func aPausedTransferThatEndsIsForgotten() {
        var backlog = BodyBacklog(limit: 1)
        complete(1, in: &backlog)
        _ = backlog.bodyStarting()
        #expect(backlog.paused == 1)
        backlog.pausedEnded()
        #expect(backlog.paused == 0)
        let wake = backlog.bodiesTaken(1)
        #expect(!wake, "nothing left to resume")
    }

    @Test func theLimitIsAtLeastOne() {
        var backlog = BodyBacklog(limit: 0)
        #expect(backlog.limit == 1)
        let admitted = backlog.bodyStarting()
        #expect(admitted)
        backlog.bodyCompleted()
        let next = backlog.bodyStarting()
        #expect(!next)
    }
}
