import Testing

@testable import ImageFetchWorker

@Suite struct DeadCopyStreamTests {
    @Test func aCopySentWholeIsSettledByItsConfirm() {
        var stream = DeadCopyStream()
        let value1 = stream.needsChannel(epoch: 1)
        #expect(value1)
        let value2 = stream.needsChannel(epoch: 1)
        #expect(!value2)
        let sequence = stream.begin(tag: 9, bodySize: 300)
        let value3 = stream.forward(tag: 9, fragment: 200)
        #expect(value3 == 200)
        let value4 = stream.forward(tag: 8, fragment: 200)
        #expect(value4 == 0, "another delivery's frame")
        let value5 = stream.forward(tag: 9, fragment: 200)
        #expect(value5 == 100, "no more than the header declared")
        let value6 = stream.finished(tag: 9, now: 1)
        #expect(value6)
        let value7 = stream.confirmed(sequence: sequence, multiple: false, ack: true)
        #expect(value7 == [.ack(9)])
        let value8 = stream.confirmed(sequence: sequence, multiple: false, ack: true)
        #expect(value8.isEmpty)
    }

    /// A copy that could not be encoded was never sent, so the broker never numbered it: the next
    /// copy takes its number, and the broker's confirm of that number settles the next original.
    @Test func aWithdrawnCopyGivesItsNumberBack() {
        var stream = DeadCopyStream()
        _ = stream.needsChannel(epoch: 1)
        let first = stream.begin(tag: 1, bodySize: 10)
        stream.withdraw()
        let firstHasCopy = stream.finished(tag: 1, now: 1)
        #expect(!firstHasCopy, "its original is rejected")
        let second = stream.begin(tag: 2, bodySize: 10)
        #expect(second == first)
        _ = stream.forward(tag: 2, fragment: 10)
        let secondHasCopy = stream.finished(tag: 2, now: 1)
        #expect(secondHasCopy)
        let settled = stream.confirmed(sequence: first, multiple: false, ack: true)
        #expect(settled == [.ack(2)])
    }

    @Test func aReturnedNackedShortOrAbandonedCopyRejectsTheOriginal() {
        var stream = DeadCopyStream()
        _ = stream.needsChannel(epoch: 1)
        let first = stream.begin(tag: 1, bodySize: 10)
        _ = stream.forward(tag: 1, fragment: 10)
        let value9 = stream.finished(tag: 1, now: 1)
        #expect(value9)
        let second = stream.begin(tag: 2, bodySize: 10)
        _ = stream.forward(tag: 2, fragment: 10)
        let value10 = stream.finished(tag: 2, now: 1)
        #expect(value10)
        stream.returned(sequence: first)
        let value11 = stream.confirmed(sequence: second, multiple: true, ack: true)
        #expect(value11 == [.reject(1), .ack(2)])

        let third = stream.begin(tag: 3, bodySize: 10)
        _ = stream.forward(tag: 3, fragment: 10)
        let value12 = stream.finished(tag: 3, now: 1)
        #expect(value12)
        let value13 = stream.confirmed(sequence: third, multiple: false, ack: false)
        #expect(value13 == [.reject(3)])

        _ = stream.begin(tag: 4, bodySize: 10)
        _ = stream.forward(tag: 4, fragment: 5)
        let value14 = stream.finished(tag: 4, now: 1)
        #expect(!value14, "a copy cut short is no copy")
        _ = stream.begin(tag: 5, bodySize: 10)
        stream.abandon()
        let value15 = stream.forward(tag: 5, fragment: 10)
        #expect(value15 == 0)
        let value16 = stream.finished(tag: 5, now: 1)
        #expect(!value16)
    }

    @Test func aNewConnectionForgetsTheOldOnesCopies() {
        var stream = DeadCopyStream()
        _ = stream.needsChannel(epoch: 1)
        let sequence = stream.begin(tag: 1, bodySize: 1)
        _ = stream.forward(tag: 1, fragment: 1)
        let value17 = stream.finished(tag: 1, now: 1)
        #expect(value17)
        let value18 = stream.needsChannel(epoch: 2)
        #expect(value18)
        let value19 = stream.confirmed(sequence: sequence, multiple: true, ack: true)
        #expect(value19.isEmpty)
        let value20 = stream.begin(tag: 1, bodySize: 1)
        #expect(value20 == 1, "the new channel numbers its publishes from 1")
    }

    /// What the confirm timeout watches: the copy that has waited longest, until it is answered.
    @Test func theOldestUnconfirmedCopyIsTheOneSentFirst() {
        var stream = DeadCopyStream()
        _ = stream.needsChannel(epoch: 1)
        #expect(stream.oldestUnconfirmedAt == nil)
        let first = stream.begin(tag: 1, bodySize: 1)
        _ = stream.forward(tag: 1, fragment: 1)
        #expect(stream.oldestUnconfirmedAt == nil, "not sent whole yet")
        _ = stream.finished(tag: 1, now: 100)
        let second = stream.begin(tag: 2, bodySize: 1)
        _ = stream.forward(tag: 2, fragment: 1)
        _ = stream.finished(tag: 2, now: 250)
        #expect(stream.oldestUnconfirmedAt == 100)
        #expect(stream.unconfirmedCount == 2)
        _ = stream.confirmed(sequence: first, multiple: false, ack: true)
        #expect(stream.oldestUnconfirmedAt == 250)
        _ = stream.confirmed(sequence: second, multiple: false, ack: false)
        #expect(stream.oldestUnconfirmedAt == nil)
        #expect(stream.unconfirmedCount == 0)
    }
}
