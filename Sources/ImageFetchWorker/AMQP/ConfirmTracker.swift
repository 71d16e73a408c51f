/// Tracks publisher confirms on one channel: numbers publishes, records `basic.return`s, and turns
/// the broker's `basic.ack` / `basic.nack` (possibly `multiple`) into one outcome per publish.
///
/// Pure state, no I/O; the channel queue owns it.
struct ConfirmTracker<Token> {
    /// How the broker answered one publish.
    enum Outcome: Equatable {
        /// Confirmed and routed to at least one queue.
        case confirmed
        /// The broker nacked it (internal error); it was not stored.
        case nacked
        /// Confirmed but unroutable: it came back in a `basic.return` and was dropped.
        case returned
    }

    /// The sequence number of the next publish (confirm.select starts at 1).
    private(set) var nextSequence: UInt64 = 1
    /// Pending tokens, indexed by `sequence - base`. Entries are nil once answered.
    private var entries: [Entry?] = []
    private var head = 0
    private var base: UInt64 = 1
    private(set) var pendingCount = 0

    private struct Entry {
        var token: Token
        var returned: Bool
        /// When it was published (monotonic nanoseconds), for the confirm timeout.
        var publishedAt: UInt64
    }

    /// When the oldest unanswered publish went out, if one is unanswered. Confirms come in order
    /// of publishing, so the oldest is the one the broker is late with.
    var oldestPublishedAt: UInt64? {
        head < entries.count ? entries[head]?.publishedAt : nil
    }

    /// Records a publish made at `now` (monotonic nanoseconds) and returns its sequence number.
    mutating func published(_ token: Token, at now: UInt64) -> UInt64 {
        let sequence = nextSequence
        nextSequence += 1
        entries.append(Entry(token: token, returned: false, publishedAt: now))
        pendingCount += 1
        return sequence
    }

    /// Takes back the latest publish, which was never sent (it could not be encoded): the broker
    /// numbers only what it receives, so the next publish must have its sequence number.
    mutating func withdrawLast() -> Token? {
        guard entries.count > head, let entry = entries.removeLast() else { return nil }
        nextSequence -= 1
        pendingCount -= 1
        if entries.count == head {
            entries.removeAll(keepingCapacity: true)
            head = 0
        }
        return entry.token
    }

    /// Marks a publish as returned; its confirm follows.
    mutating func returned(sequence: UInt64) {
        guard let index = index(of: sequence), entries[index].isSome else { return }
        entries[index]?.returned = true
    }

    /// Applies a `basic.ack` or `basic.nack` and returns the tokens it answers, in order.
    mutating func confirm(sequence: UInt64, multiple: Bool, ack: Bool) -> [(Token, Outcome)] {
        var answered: [(Token, Outcome)] = []
        if multiple {
            var current = base
            var index = head
            while index < entries.count, current <= sequence {
                if let entry = entries[index] {
                    answered.append((entry.token, ack ? (entry.returned ? .returned : .confirmed) : .nacked))
                    entries[index] = nil
                    pendingCount -= 1
                }
                index += 1
                current += 1
            }
        } else if let index = index(of: sequence), let entry = entries[index] {
            answered.append((entry.token, ack ? (entry.returned ? .returned : .confirmed) : .nacked))
            entries[index] = nil
            pendingCount -= 1
        }
        compact()
        return answered
    }

    /// Forgets everything (the channel is gone) and returns the unanswered tokens.
    mutating func reset() -> [Token] {
        let unanswered = entries[head...].compactMap { $0?.token }
        entries.removeAll(keepingCapacity: true)
        head = 0
        base = 1
        nextSequence = 1
        pendingCount = 0
        return unanswered
    }

    private func index(of sequence: UInt64) -> Int? {
        guard sequence >= base else { return nil }
        let offset = sequence - base
        guard offset < UInt64(entries.count - head) else { return nil }
        return head + Int(offset)
    }

    private mutating func compact() {
        while head < entries.count, !entries[head].isSome {
            head += 1
            base += 1
        }
        if head == entries.count {
            entries.removeAll(keepingCapacity: true)
            head = 0
        } else if head > 1024, head * 2 > entries.count {
            entries.removeFirst(head)
            head = 0
        }
    }
}

extension Optional {
    fileprivate var isSome: Bool {
        if case .some = self { return true }
        return false
    }
}
