import Synchronization

/// The worker's counters: the periodic summary line reads them, and each event is also recorded
/// in ``WorkerMetrics`` for `/metrics`. Thread-safe.
package final class WorkerStats: Sendable {
    /// A snapshot of the counters.
    package struct Snapshot: Sendable, Equatable {
        package var received = 0
        package var succeeded = 0
        package var failed = 0
        package var retried = 0
        package var deadLettered = 0
        package var handedBack = 0
        package var inFlight = 0
        package var waiting = 0
        package var failuresByCode: [String: Int] = [:]
    }

    private let state = Mutex(Snapshot())
    /// The gauges, moved only as the jobs' lifecycles move (``jobMoved(from:to:)``).
    private let waiting = Atomic<Int>(0)
    private let inFlight = Atomic<Int>(0)
    /// Where the same events go as Prometheus metrics.
    package let metrics: WorkerMetrics

    package init(metrics: WorkerMetrics) {
        self.metrics = metrics
    }

    package var snapshot: Snapshot {
        var snapshot = state.withLock { $0 }
        snapshot.waiting = waiting.load(ordering: .relaxed)
        snapshot.inFlight = inFlight.load(ordering: .relaxed)
        return snapshot
    }

    func received() {
        state.withLock { $0.received += 1 }
        metrics.jobsReceived.increment()
    }

    /// The gauge a job counts in, as its runner tells from the job's state: waiting in its
    /// origin's queue, in flight (admitted, until its delivery is settled), or neither.
    package enum JobGauge: Sendable, Equatable {
        case uncounted, waiting, inFlight
    }

    /// A job moved from one gauge to another: the gauges follow the jobs' own state (their
    /// lifecycles), so they cannot drift from what the jobs hold.
    func jobMoved(from old: JobGauge, to new: JobGauge) {
        switch old {
        case .waiting: metrics.waiting.record(waiting.subtract(1, ordering: .relaxed).newValue)
        case .inFlight: metrics.inFlight.record(inFlight.subtract(1, ordering: .relaxed).newValue)
        case .uncounted: break
        }
        switch new {
        case .waiting: metrics.waiting.record(waiting.add(1, ordering: .relaxed).newValue)
        case .inFlight: metrics.inFlight.record(inFlight.add(1, ordering: .relaxed).newValue)
        case .uncounted: break
        }
    }

    func succeeded() {
        state.withLock { $0.succeeded += 1 }
        metrics.result(status: .ok, code: nil)
    }

    /// A refetch that found the image unchanged: a success, counted apart in the metric.
    func notModified() {
        state.withLock { $0.succeeded += 1 }
        metrics.result(status: .notModified, code: nil)
    }

    func failed(_ code: JobError.Code) {
        state.withLock {
            $0.failed += 1
            $0.failuresByCode[code.rawValue, default: 0] += 1
        }
        metrics.result(status: .failed, code: code)
    }

    func retried() {
        state.withLock { $0.retried += 1 }
        metrics.retries.increment()
    }

    func deadLettered() {
        state.withLock { $0.deadLettered += 1 }
        metrics.deadLettered.increment()
    }

    func handedBack(_ count: Int = 1) {
        guard count > 0 else { return }
        state.withLock { $0.handedBack += count }
        metrics.handedBack.increment(by: count)
    }
}
