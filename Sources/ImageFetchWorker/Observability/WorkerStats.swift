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
    /// Where the same events go as Prometheus metrics.
    package let metrics: WorkerMetrics

    package init(metrics: WorkerMetrics) {
        self.metrics = metrics
    }

    package var snapshot: Snapshot { state.withLock { $0 } }

    func received() {
        let waiting = state.withLock { $0.received += 1; $0.waiting += 1; return $0.waiting }
        metrics.jobsReceived.increment()
        metrics.waiting.record(waiting)
    }

    func admitted() {
        let (waiting, inFlight) = state.withLock { $0.waiting -= 1; $0.inFlight += 1; return ($0.waiting, $0.inFlight) }
        metrics.waiting.record(waiting)
        metrics.inFlight.record(inFlight)
    }

    func skippedAdmission(_ count: Int = 1) {
        let waiting = state.withLock { $0.waiting -= count; return $0.waiting }
        metrics.waiting.record(waiting)
    }

    func finished() {
        let inFlight = state.withLock { $0.inFlight -= 1; return $0.inFlight }
        metrics.inFlight.record(inFlight)
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
