import Testing

@testable import ImageFetchWorker

@Suite struct AckBatcherTests {
    private static let delay: UInt64 = 2_000_000

    private func batcher(delivered tags: ClosedRange<UInt64>) -> AckBatcher {
        var batcher = AckBatcher(maxDelayNanoseconds: Self.delay)
        for tag in tags { _ = batcher.delivered(tag) }
        return batcher
    }

    @Test func aRunAtTheFrontBecomesOneMultipleAck() {
        var batcher = batcher(delivered: 1...5)
        for tag: UInt64 in [2, 1, 3] { batcher.requestAck(tag, now: 0) }
        do {
            let value = batcher.flush(now: 0)
            #expect(value == [.init(tag: 3, multiple: true)])
        }
        #expect(batcher.pendingCount == 0)
        #expect(batcher.trackedCount == 2)
    }

    /// Tags come from the broker: one that does not increase is refused (the session then
    /// reconnects) instead of stopping the process, and what is tracked stays as it was.
    @Test func aTagThatDoesNotIncreaseIsRefused() {
        var batcher = batcher(delivered: 1...3)
        let repeated = batcher.delivered(3)
        let lower = batcher.delivered(2)
        #expect(!repeated && !lower)
        #expect(batcher.trackedCount == 3)
        let next = batcher.delivered(4)
        #expect(next)
        var fresh = AckBatcher(maxDelayNanoseconds: Self.delay)
        let zero = fresh.delivered(0)
        #expect(!zero)
        #expect(fresh.trackedCount == 0)
    }

    @Test func aSingleAckIsNotMultiple() {
        var batcher = batcher(delivered: 1...3)
        batcher.requestAck(1, now: 0)
        do {
            let value = batcher.flush(now: 0)
            #expect(value == [.init(tag: 1, multiple: false)])
        }
    }

    @Test func nothingToSendWithoutRequests() {
        var batcher = batcher(delivered: 1...3)
        do {
            let value = batcher.flush(now: 10 * Self.delay)
            #expect(value.isEmpty)
        }
        #expect(batcher.nextDeadline == nil)
    }

    @Test func anAckBehindAnOpenDeliveryWaitsThenGoesAlone() {
        var batcher = batcher(delivered: 1...4)
        batcher.requestAck(3, now: 100)
        do {
            let value = batcher.flush(now: 100)
            #expect(value.isEmpty)
        }
        #expect(batcher.nextDeadline == 100 + Self.delay)
        do {
            let value = batcher.flush(now: 100 + Self.delay - 1)
            #expect(value.isEmpty)
        }
        do {
            let value = batcher.flush(now: 100 + Self.delay)
            #expect(value == [.init(tag: 3, multiple: false)])
        }
        #expect(batcher.nextDeadline == nil)
        // The front delivery finishing later is acked on its own: 3 is already settled.
        batcher.requestAck(1, now: 200 + Self.delay)
        batcher.requestAck(2, now: 200 + Self.delay)
        do {
            let value = batcher.flush(now: 200 + Self.delay)
            #expect(value == [.init(tag: 2, multiple: true)])
        }
        #expect(batcher.trackedCount == 1)
    }

    @Test func theRunCatchingUpInTimeTakesTheWaitingAckAlong() {
        var batcher = batcher(delivered: 1...4)
        batcher.requestAck(3, now: 0)
        do {
            let value = batcher.flush(now: 0)
            #expect(value.isEmpty)
        }
        batcher.requestAck(1, now: 1)
        batcher.requestAck(2, now: 1)
        do {
            let value = batcher.flush(now: 1)
            #expect(value == [.init(tag: 3, multiple: true)])
        }
        #expect(batcher.nextDeadline == nil)
    }

    @Test func nackedDeliveriesDoNotBreakARun() {
        var batcher = batcher(delivered: 1...5)
        batcher.requestAck(1, now: 0)
        batcher.settle(2)
        batcher.requestAck(3, now: 0)
        batcher.settle(4)
        // The run ends with a settled tag: the multiple ack stops at the last acked one.
        do {
            let value = batcher.flush(now: 0)
            #expect(value == [.init(tag: 3, multiple: true)])
        }
        #expect(batcher.trackedCount == 1)
    }

    @Test func forceSendsEverythingPending() {
        var batcher = batcher(delivered: 1...6)
        batcher.requestAck(2, now: 0)
        batcher.requestAck(4, now: 0)
        batcher.requestAck(5, now: 0)
        let forced = batcher.flush(now: 0, force: true)
        #expect(
            forced == [
                .init(tag: 2, multiple: false), .init(tag: 4, multiple: false), .init(tag: 5, multiple: false),
            ])
        #expect(batcher.pendingCount == 0)
    }

    @Test func unknownAndRepeatedAcksAreRefused() {
        var batcher = batcher(delivered: 1...2)
        do {
            let value = batcher.requestAck(7, now: 0)
            #expect(!value)
        }
        do {
            let value = batcher.requestAck(1, now: 0)
            #expect(value)
        }
        do {
            let value = batcher.requestAck(1, now: 0)
            #expect(!value)
        }
        _ = batcher.flush(now: 0)
        do {
            let value = batcher.requestAck(1, now: 0)
            #expect(!value)
        }
    }

    @Test func tagsWithGapsAreFound() {
        var batcher = AckBatcher(maxDelayNanoseconds: Self.delay)
        for tag: UInt64 in [3, 4, 9, 10, 20] { _ = batcher.delivered(tag) }
        do {
            let value = batcher.requestAck(9, now: 0)
            #expect(value)
        }
        do {
            let value = batcher.requestAck(3, now: 0)
            #expect(value)
        }
        do {
            let value = batcher.requestAck(4, now: 0)
            #expect(value)
        }
        do {
            let value = batcher.flush(now: 0)
            #expect(value == [.init(tag: 9, multiple: true)])
        }
        do {
            let value = batcher.requestAck(5, now: 0)
            #expect(!value)
        }
    }

    @Test func resetForgetsTheChannel() {
        var batcher = batcher(delivered: 1...3)
        batcher.requestAck(1, now: 0)
        batcher.reset()
        do {
            let value = batcher.flush(now: 0, force: true)
            #expect(value.isEmpty)
        }
        _ = batcher.delivered(1)  // a new channel numbers from 1 again
        batcher.requestAck(1, now: 0)
        do {
            let value = batcher.flush(now: 0)
            #expect(value == [.init(tag: 1, multiple: false)])
        }
    }

    /// Random deliveries, acks, nacks and flushes against a model of the broker's unacked set:
    /// a frame never settles a delivery the worker has not answered, never names a tag the broker
    /// no longer has, and every requested ack reaches the broker by the end.
    @Test func randomRunsMatchTheBrokersBookkeeping() {
        var random = SplitMix64(state: 0xACC0)
        for _ in 0..<300 {
            var batcher = AckBatcher(maxDelayNanoseconds: 50)
            var brokerUnacked = Set<UInt64>()
            var open: [UInt64] = []
            var requested = Set<UInt64>()
            var nextTag: UInt64 = 1
            var now: UInt64 = 0
            var frames = 0
            var acked = 0

            func apply(_ acks: [AckBatcher.Ack]) {
                for ack in acks {
                    frames += 1
                    #expect(brokerUnacked.contains(ack.tag), "acked a tag the broker does not have")
                    let covered = ack.multiple ? brokerUnacked.filter { $0 <= ack.tag } : [ack.tag]
                    for tag in covered {
                        #expect(requested.contains(tag), "settled a delivery that was not acked")
                        brokerUnacked.remove(tag)
                        requested.remove(tag)
                        acked += 1
                    }
                }
            }

            for _ in 0..<200 {
                now += UInt64.random(in: 0...20, using: &random)
                switch Int.random(in: 0..<10, using: &random) {
                case 0...3:
                    _ = batcher.delivered(nextTag)
                    brokerUnacked.insert(nextTag)
                    open.append(nextTag)
                    nextTag += 1
                case 4...6 where !open.isEmpty:
                    // Mostly the oldest finish first, sometimes a later one.
                    let index =
                        Int.random(in: 0..<10, using: &random) < 7 ? 0 : Int.random(in: 0..<open.count, using: &random)
                    let tag = open.remove(at: index)
                    do {
                        let value = batcher.requestAck(tag, now: now)
                        #expect(value)
                    }
                    requested.insert(tag)
                case 7 where !open.isEmpty:
                    let tag = open.remove(at: Int.random(in: 0..<open.count, using: &random))
                    brokerUnacked.remove(tag)  // the nack frame went out
                    batcher.settle(tag)
                default:
                    apply(batcher.flush(now: now))
                }
            }
            apply(batcher.flush(now: now, force: true))
            #expect(requested.isEmpty, "requested acks never sent")
            #expect(batcher.pendingCount == 0)
            #expect(brokerUnacked == Set(open))
            #expect(frames <= acked)
        }
    }
}
