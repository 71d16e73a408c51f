/// How many complete response bodies may wait for the completion queue before the fetch loop
/// stops reading new ones: the state behind ``FetchLoop``'s flow control, without I/O.
///
/// At high concurrency many responses can arrive at once (a slow origin answering a whole wave of
/// requests together), and each body read becomes memory that waits until the work queue hashes
/// and stores it. Reading them faster than the work queue takes them buys nothing but memory. So
/// when ``limit`` complete bodies are waiting, a transfer whose body is about to start is paused
/// (libcurl keeps the part it has already read, at most one receive buffer); the rest of its
/// response stays in the kernel's socket buffer, and TCP flow control holds back the origin. When
/// the work queue has taken the backlog down to ``resumeThreshold``, the loop is woken and
/// resumes paused transfers, oldest first, up to the limit again.
///
/// Only complete bodies count: a transfer that is still receiving (a slow or hostile origin)
/// holds no place, so it can never hold up the others. A body counts from the moment its last
/// declared byte arrives (or, without a Content-Length, from the end of its transfer) until its
/// completion starts to run.
///
/// The loop and the completion queue share it behind a lock; each call is a few comparisons.
struct BodyBacklog: Sendable {
    /// Complete bodies allowed to wait before new bodies are paused.
    let limit: Int
    /// The waiting count at or below which the loop is woken to resume paused transfers.
    let resumeThreshold: Int
    /// Complete bodies not yet taken by their completion.
    private(set) var waiting = 0
    /// Transfers paused before their body.
    private(set) var paused = 0
    /// A wake-up was asked for and the loop has not looked at the backlog since.
    private var wakeRequested = false

    /// - Parameter limit: at least 1.
    init(limit: Int) {
        self.limit = max(limit, 1)
        self.resumeThreshold = self.limit / 2
    }

    /// A body that is kept (a 2xx response's) is about to start: true to receive it now, false
    /// to pause the transfer, which ``resumable()`` later gives back.
    mutating func bodyStarting() -> Bool {
        guard waiting >= limit else { return true }
        paused += 1
        return false
    }

    /// A body is complete and will wait for its completion.
    mutating func bodyCompleted() {
        waiting += 1
    }

    /// `count` waiting bodies were taken by their completions; true when the caller must wake the
    /// loop to resume paused transfers (once per refill).
    mutating func bodiesTaken(_ count: Int) -> Bool {
        waiting = max(waiting - count, 0)
        guard paused > 0, !wakeRequested, waiting <= resumeThreshold else { return false }
        wakeRequested = true
        return true
    }

    /// The loop: how many paused transfers to resume now (they count as paused until
    /// ``resumed(_:)``).
    mutating func resumable() -> Int {
        wakeRequested = false
        guard waiting < limit else { return 0 }
        return min(paused, limit - waiting)
    }

    /// The loop resumed `count` paused transfers.
    mutating func resumed(_ count: Int) {
        paused = max(paused - count, 0)
    }

    /// A paused transfer ended without being resumed (timeout, cancel, shutdown).
    mutating func pausedEnded() {
        paused = max(paused - 1, 0)
    }
}
