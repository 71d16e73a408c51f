import Testing

@testable import ImageFetchWorker

/// The confirm timeout (issue 33): when the oldest unconfirmed publish is overdue, on a fake clock.
@Suite struct ConfirmWatchTests {
    private let second: UInt64 = 1_000_000_000

    @Test func theOldestUnansweredPublishIsTheOneThatCounts() {
        var tracker = ConfirmTracker<Int>()
        #expect(tracker.oldestPublishedAt == nil)
        _ = tracker.published(1, at: 10)
        _ = tracker.published(2, at: 20)
        _ = tracker.published(3, at: 30)
        #expect(tracker.oldestPublishedAt == 10)
        // Confirmed out of order: the oldest stays until it is answered.
        _ = tracker.confirm(sequence: 2, multiple: false, ack: true)
        #expect(tracker.oldestPublishedAt == 10)
        _ = tracker.confirm(sequence: 1, multiple: false, ack: true)
        #expect(tracker.oldestPublishedAt == 30)
        _ = tracker.confirm(sequence: 3, multiple: true, ack: false)
        #expect(tracker.oldestPublishedAt == nil)
        _ = tracker.published(4, at: 40)
        _ = tracker.withdrawLast()
        #expect(tracker.oldestPublishedAt == nil)
    }

    @Test func aPublishIsOverdueAfterTheTimeout() {
        let watch = ConfirmWatch(timeoutSeconds: 30)
        #expect(!watch.isOverdue(oldestPublishedAt: nil, now: 100 * second, blocked: false))
        #expect(!watch.isOverdue(oldestPublishedAt: 10 * second, now: 39 * second, blocked: false))
        #expect(watch.isOverdue(oldestPublishedAt: 10 * second, now: 40 * second, blocked: false))
        // A clock that reads earlier than the publish (another thread's stamp) is not overdue.
        #expect(!watch.isOverdue(oldestPublishedAt: 50 * second, now: 40 * second, blocked: false))
    }

    @Test func zeroTurnsTheWatchOff() {
        let watch = ConfirmWatch(timeoutSeconds: 0)
        #expect(watch.timeoutNanoseconds == 0)
        #expect(!watch.isOverdue(oldestPublishedAt: 0, now: 1_000_000 * second, blocked: false))
    }

    /// A blocked connection is not read by the broker: its confirms wait with it, and the wait
    /// counts again from the unblock.
    @Test func aBlockStopsTheClockAndTheUnblockRestartsIt() {
        var watch = ConfirmWatch(timeoutSeconds: 30)
        #expect(!watch.isOverdue(oldestPublishedAt: 10 * second, now: 500 * second, blocked: true))
        watch.unblocked(at: 500 * second)
        #expect(!watch.isOverdue(oldestPublishedAt: 10 * second, now: 529 * second, blocked: false))
        #expect(watch.isOverdue(oldestPublishedAt: 10 * second, now: 530 * second, blocked: false))
        // A publish after the unblock counts from itself.
        #expect(!watch.isOverdue(oldestPublishedAt: 510 * second, now: 530 * second, blocked: false))
        // Blocked again: the clock stops again.
        #expect(!watch.isOverdue(oldestPublishedAt: 10 * second, now: 600 * second, blocked: true))
    }
}
