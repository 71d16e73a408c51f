/// Whether the broker is late with a publisher confirm: the oldest unanswered publish has waited
/// longer than `amqp.confirm_timeout` while the connection was not blocked.
///
/// Without it, a broker that keeps the connection alive (heartbeats flow) but never confirms holds
/// every job that published a result in the prefetch window for good, and the worker stalls. A
/// blocked connection is not read by the broker, so its confirms wait for the unblock; the wait
/// counts again from then. Pure: the session feeds it the clock.
struct ConfirmWatch: Sendable, Equatable {
    /// Nanoseconds a confirm may take; 0 turns the watch off.
    let timeoutNanoseconds: UInt64
    /// When the connection was last unblocked: a wait counts from the later of this and the publish.
    /// Whether it is blocked now is the session's one copy of that state (`BrokerSession.isBlocked`).
    private var unblockedAt: UInt64 = 0

    init(timeoutSeconds: Double) {
        timeoutNanoseconds = timeoutSeconds > 0 ? UInt64(timeoutSeconds * 1e9) : 0
    }

    /// The broker unblocked the connection at `now`.
    mutating func unblocked(at now: UInt64) {
        unblockedAt = now
    }

    /// Whether the publish made at `oldestPublishedAt` (nil: none is unanswered) is overdue at `now`.
    func isOverdue(oldestPublishedAt: UInt64?, now: UInt64, blocked: Bool) -> Bool {
        guard timeoutNanoseconds > 0, !blocked, let oldestPublishedAt else { return false }
        let since = max(oldestPublishedAt, unblockedAt)
        return now > since && now - since >= timeoutNanoseconds
    }
}
