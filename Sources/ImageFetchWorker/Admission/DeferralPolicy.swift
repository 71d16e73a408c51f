/// How long a deferred job waits in a delay queue, and when it has waited enough. Pure.
///
/// Deferral is the scheduler's, not the job's doing: it never uses an attempt. It backs off along
/// ``delays`` and stops at ``budgetSeconds`` of accumulated deferral, past which the job fails
/// with `origin_busy`.
package struct DeferralPolicy: Sendable, Equatable {
    /// The delay queues' delays, ascending and unique.
    package var delays: [Int]
    package var budgetSeconds: Double

    package init(delays: [Int], budgetSeconds: Double) {
        let sorted = Array(Set(delays.filter { $0 > 0 })).sorted()
        self.delays = sorted.isEmpty ? [1] : sorted
        self.budgetSeconds = budgetSeconds
    }

    package init(_ configuration: WorkerConfiguration.Scheduler) {
        self.init(delays: configuration.deferDelays, budgetSeconds: configuration.deferBudget)
    }

    package enum Decision: Equatable, Sendable {
        /// Republish to the delay queue of this many seconds.
        case wait(seconds: Int)
        /// The budget is spent: the job fails.
        case exhausted
    }

    /// The decision for a job deferred `count` times before, for `spentSeconds` in all, whose
    /// origin is paused for `atLeastSeconds` (nil if not paused).
    package func decide(count: Int, spentSeconds: Double, atLeastSeconds: Double?) -> Decision {
        var delay = delays[min(max(count, 0), delays.count - 1)]
        if let atLeastSeconds, Double(delay) < atLeastSeconds {
            delay = delays.first { Double($0) >= atLeastSeconds } ?? delays[delays.count - 1]
        }
        guard spentSeconds + Double(delay) <= budgetSeconds else { return .exhausted }
        return .wait(seconds: delay)
    }
}
