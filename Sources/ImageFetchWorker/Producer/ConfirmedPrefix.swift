/// The longest run of lines, from the first, that an interrupted `publish --jsonl` need not send
/// again: every line up to ``through`` was confirmed by the broker, or needed no publish (blank,
/// invalid, or skipped on resume). It is what the progress file records.
///
/// Lines are presented in increasing order (``passed(_:)`` or ``sent(_:)``), and their confirms
/// come in any order (``settled(_:confirmed:)``). A line the broker did not confirm freezes the
/// prefix below it for good: that line, and any after it, are sent again on resume.
///
/// Pure, no I/O; the caller serialises access (the confirms come on the broker's queue).
package struct ConfirmedPrefix: Sendable {
    /// Every line up to this one is done; 0 before any.
    package private(set) var through: Int
    /// A line was not confirmed: ``through`` no longer moves.
    package private(set) var isStalled = false
    /// Lines in order after ``through``, from `head`: sent and waiting, or done behind one waiting.
    private var lines: [(number: Int, done: Bool)] = []
    private var head = 0

    /// Starts after `line` (the resume point, or 0).
    package init(after line: Int = 0) {
        through = line
    }

    /// `line` needs no publish.
    package mutating func passed(_ line: Int) {
        guard !isStalled else { return }
        if head == lines.count {
            through = line
        } else {
            lines.append((line, true))
        }
    }

    /// `line` was published and waits for its confirm.
    package mutating func sent(_ line: Int) {
        guard !isStalled else { return }
        lines.append((line, false))
    }

    /// The broker's answer for `line`, which was ``sent(_:)``.
    package mutating func settled(_ line: Int, confirmed: Bool) {
        guard !isStalled else { return }
        guard confirmed else {
            isStalled = true
            lines = []
            head = 0
            return
        }
        // Line numbers increase along `lines`: a binary search finds it.
        var low = head
        var high = lines.count
        while low < high {
            let middle = (low + high) / 2
            if lines[middle].number < line { low = middle + 1 } else { high = middle }
        }
        guard low < lines.count, lines[low].number == line else { return }
        lines[low].done = true
        while head < lines.count, lines[head].done {
            through = lines[head].number
            head += 1
        }
        if head == lines.count {
            lines.removeAll(keepingCapacity: true)
            head = 0
        } else if head >= 4096, head * 2 >= lines.count {
            lines.removeFirst(head)
            head = 0
        }
    }

    /// Lines sent and not yet settled, or done behind one that is.
    package var pendingCount: Int { lines.count - head }
}
