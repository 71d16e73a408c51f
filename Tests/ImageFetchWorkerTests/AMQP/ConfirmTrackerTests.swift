import Testing

@testable import ImageFetchWorker

@Suite struct ConfirmTrackerTests {
    @Test func numbersPublishesFromOne() {
        var tracker = ConfirmTracker<String>()
        do {
            let value = tracker.published("a", at: 0)
            #expect(value == 1)
        }
        do {
            let value = tracker.published("b", at: 0)
            #expect(value == 2)
        }
        #expect(tracker.pendingCount == 2)
    }

    @Test func singleAckAnswersOnlyThatPublish() {
        var tracker = ConfirmTracker<String>()
        _ = tracker.published("a", at: 0)
        _ = tracker.published("b", at: 0)
        let answered = tracker.confirm(sequence: 2, multiple: false, ack: true)
        #expect(answered.map(\.0) == ["b"])
        #expect(answered.map(\.1) == [.confirmed])
        #expect(tracker.pendingCount == 1)
        do {
            let value = tracker.confirm(sequence: 1, multiple: false, ack: true)
            #expect(value.map(\.0) == ["a"])
        }
        #expect(tracker.pendingCount == 0)
    }

    @Test func multipleAckAnswersEverythingUpToTheTag() {
        var tracker = ConfirmTracker<Int>()
        for token in 1...5 { _ = tracker.published(token, at: 0) }
        _ = tracker.confirm(sequence: 2, multiple: false, ack: true)
        let answered = tracker.confirm(sequence: 4, multiple: true, ack: true)
        #expect(answered.map(\.0) == [1, 3, 4])
        #expect(tracker.pendingCount == 1)
    }

    @Test func nackIsNeverAConfirm() {
        var tracker = ConfirmTracker<Int>()
        _ = tracker.published(1, at: 0)
        _ = tracker.published(2, at: 0)
        let answered = tracker.confirm(sequence: 2, multiple: true, ack: false)
        #expect(answered.map(\.1) == [.nacked, .nacked])
    }

    @Test func returnBeforeAckMeansReturned() {
        var tracker = ConfirmTracker<Int>()
        _ = tracker.published(1, at: 0)
        _ = tracker.published(2, at: 0)
        tracker.returned(sequence: 2)
        let answered = tracker.confirm(sequence: 2, multiple: true, ack: true)
        #expect(answered.map(\.1) == [.confirmed, .returned])
    }

    @Test func unknownOrRepeatedConfirmsAreIgnored() {
        var tracker = ConfirmTracker<Int>()
        _ = tracker.published(1, at: 0)
        do {
            let value = tracker.confirm(sequence: 7, multiple: false, ack: true)
            #expect(value.isEmpty)
        }
        do {
            let value = tracker.confirm(sequence: 1, multiple: false, ack: true)
            #expect(value.count == 1)
        }
        do {
            let value = tracker.confirm(sequence: 1, multiple: false, ack: true)
            #expect(value.isEmpty)
        }
    }

    @Test func resetHandsBackTheUnansweredAndRestartsNumbering() {
        var tracker = ConfirmTracker<Int>()
        for token in 1...3 { _ = tracker.published(token, at: 0) }
        _ = tracker.confirm(sequence: 1, multiple: false, ack: true)
        do {
            let value = tracker.reset()
            #expect(value == [2, 3])
        }
        do {
            let value = tracker.published(9, at: 0)
            #expect(value == 1)
        }
    }

    @Test func longRunsStayCompact() {
        var tracker = ConfirmTracker<Int>()
        for round in 0..<10_000 {
            let sequence = tracker.published(round, at: 0)
            do {
                let value = tracker.confirm(sequence: sequence, multiple: false, ack: true)
                #expect(value.count == 1)
            }
        }
        #expect(tracker.pendingCount == 0)
        #expect(tracker.nextSequence == 10_001)
    }

    /// A publish that never went out (it could not be encoded) gives its number back: the broker
    /// numbers only what it receives.
    @Test func aWithdrawnPublishGivesItsSequenceBack() {
        var tracker = ConfirmTracker<String>()
        let value1 = tracker.published("a", at: 0)
        #expect(value1 == 1)
        let value2 = tracker.published("b", at: 0)
        #expect(value2 == 2)
        let value3 = tracker.withdrawLast()
        #expect(value3 == "b")
        #expect(tracker.pendingCount == 1)
        let value4 = tracker.published("c", at: 0)
        #expect(value4 == 2)
        let answered = tracker.confirm(sequence: 2, multiple: true, ack: true)
        #expect(answered.map(\.0) == ["a", "c"])
        let value5 = tracker.withdrawLast()
        #expect(value5 == nil)
        let value6 = tracker.published("d", at: 0)
        #expect(value6 == 3)
        let value7 = tracker.withdrawLast()
        #expect(value7 == "d")
        let value8 = tracker.published("e", at: 0)
        #expect(value8 == 3)
    }
}
