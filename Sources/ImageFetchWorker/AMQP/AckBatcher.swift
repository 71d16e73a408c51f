/// Turns the acks of one channel into as few `basic.ack` frames as possible.
///
/// The broker numbers deliveries on a channel in order, and `basic.ack` with `multiple` settles
/// every outstanding delivery up to a tag. So when the oldest deliveries are all done, one frame
/// acks the whole run. The batcher keeps the channel's delivery tags in order with their state,
/// collects the acks asked for since the last ``flush(now:force:)``, and answers with frames:
/// - a run at the front whose deliveries are all acked or already settled (nacked) becomes one
///   `multiple` ack up to its last acked tag;
/// - an ack behind a delivery still being worked on waits up to `maxDelayNanoseconds` for the run
///   to reach it, then goes out on its own, so a slow job never holds finished ones back for long
///   (they would count against the prefetch and be redelivered after a crash).
///
/// Pure state, no I/O; the channel queue owns it and sends the frames. Reset it with the channel.
struct AckBatcher {
    /// One frame to send.
    struct Ack: Equatable {
        var tag: UInt64
        var multiple: Bool
    }

    private enum State: Equatable {
        /// Delivered, not yet answered.
        case open
        /// Acked by the worker, frame not yet sent; the time it was asked for.
        case requested(at: UInt64)
        /// The broker knows its fate already (nacked, rejected, or acked on its own).
        case settled
    }

    /// How long an ack behind an open delivery may wait for a batch.
    let maxDelayNanoseconds: UInt64

    private var tags: [UInt64] = []
    private var states: [State] = []
    private var head = 0
    /// Acks asked for and not yet sent.
    private(set) var pendingCount = 0
    /// A time no later than the oldest pending request; may be stale (older), never newer.
    private var oldestRequest: UInt64?

    init(maxDelayNanoseconds: UInt64) {
        self.maxDelayNanoseconds = maxDelayNanoseconds
    }

    /// Deliveries tracked: delivered and not yet acked on the wire or settled.
    var trackedCount: Int { tags.count - head }

    /// A delivery arrived. False, with nothing recorded, when its tag is zero or does not
    /// increase: the broker broke the protocol, and the channel's tags can no longer be trusted.
    mutating func delivered(_ tag: UInt64) -> Bool {
        guard tag > 0, tags.last.map({ tag > $0 }) ?? true else { return false }
        tags.append(tag)
        states.append(.open)
        return true
    }

    /// The worker acks a delivery; the frame goes out at a later flush. False for an unknown tag.
    @discardableResult
    mutating func requestAck(_ tag: UInt64, now: UInt64) -> Bool {
        guard let index = index(of: tag), states[index] == .open else { return false }
        states[index] = .requested(at: now)
        pendingCount += 1
        oldestRequest = min(oldestRequest ?? now, now)
        return true
    }

    /// The delivery was nacked or rejected (its frame already sent): it no longer blocks a run.
    mutating func settle(_ tag: UInt64) {
        guard let index = index(of: tag) else { return }
        if case .requested = states[index] { pendingCount -= 1 }
        states[index] = .settled
        compact()
    }

    /// The frames to send now. `force` sends every pending ack (before closing the channel).
    mutating func flush(now: UInt64, force: Bool = false) -> [Ack] {
        guard pendingCount > 0 else { return [] }
        var acks: [Ack] = []
        // The front run: everything answered, so one multiple ack covers its acked deliveries.
        var lastRequested: UInt64?
        var runCount = 0
        while head < tags.count, states[head] != .open {
            if case .requested = states[head] {
                lastRequested = tags[head]
                runCount += 1
            }
            head += 1
        }
        if let lastRequested {
            acks.append(Ack(tag: lastRequested, multiple: runCount > 1))
            pendingCount -= runCount
        }
        // Acks behind an open delivery: sent one by one once they have waited long enough.
        if pendingCount == 0 {
            oldestRequest = nil
        } else if let oldest = oldestRequest, force || now &- oldest >= maxDelayNanoseconds {
            var stillOldest: UInt64?
            for index in head..<tags.count {
                guard case .requested(let at) = states[index] else { continue }
                if force || now &- at >= maxDelayNanoseconds {
                    acks.append(Ack(tag: tags[index], multiple: false))
                    states[index] = .settled
                    pendingCount -= 1
                } else {
                    stillOldest = min(stillOldest ?? at, at)
                }
            }
            oldestRequest = stillOldest
        }
        compact()
        return acks
    }

    /// When the next flush has acks to send that wait for time alone, if any.
    var nextDeadline: UInt64? {
        guard pendingCount > 0, let oldestRequest else { return nil }
        return oldestRequest &+ maxDelayNanoseconds
    }

    /// Forgets everything: the channel is gone, and its tags with it.
    mutating func reset() {
        tags.removeAll(keepingCapacity: true)
        states.removeAll(keepingCapacity: true)
        head = 0
        pendingCount = 0
        oldestRequest = nil
    }

    private func index(of tag: UInt64) -> Int? {
        // Tags are consecutive in practice, so try the direct offset before searching.
        guard head < tags.count, tag >= tags[head], let last = tags.last, tag <= last else { return nil }
        let offset = tag - tags[head]
        if offset < UInt64(tags.count - head), tags[head + Int(offset)] == tag { return head + Int(offset) }
        var low = head
        var high = tags.count - 1
        while low <= high {
            let middle = (low + high) / 2
            if tags[middle] == tag { return middle }
            if tags[middle] < tag { low = middle + 1 } else { high = middle - 1 }
        }
        return nil
    }

    private mutating func compact() {
        while head < tags.count, states[head] == .settled { head += 1 }
        if head == tags.count {
            tags.removeAll(keepingCapacity: true)
            states.removeAll(keepingCapacity: true)
            head = 0
        } else if head > 1024, head * 2 > tags.count {
            tags.removeFirst(head)
            states.removeFirst(head)
            head = 0
        }
    }
}
