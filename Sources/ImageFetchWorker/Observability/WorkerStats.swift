import Foundation

/// Counters for the periodic summary line and the in-flight gauges. Thread-safe.
public final class WorkerStats: Sendable {
    /// A snapshot of the counters.
    public struct Snapshot: Sendable, Equatable {
        public var received = 0
        public var succeeded = 0
        public var failed = 0
        public var retried = 0
        public var deadLettered = 0
        public var handedBack = 0
        public var inFlight = 0
        public var waiting = 0
        public var failuresByCode: [String: Int] = [:]
    }

    private let state = NSLockedValue(Snapshot())

    public init() {}

    public var snapshot: Snapshot { state.withLock { $0 } }

    func received() { state.withLock { $0.received += 1; $0.waiting += 1 } }
    func admitted() { state.withLock { $0.waiting -= 1; $0.inFlight += 1 } }
    func skippedAdmission() { state.withLock { $0.waiting -= 1 } }
    func finished() { state.withLock { $0.inFlight -= 1 } }
    func succeeded() { state.withLock { $0.succeeded += 1 } }
    func failed(_ code: JobError.Code) {
        state.withLock {
            $0.failed += 1
            $0.failuresByCode[code.rawValue, default: 0] += 1
        }
    }
    func retried() { state.withLock { $0.retried += 1 } }
    func deadLettered() { state.withLock { $0.deadLettered += 1 } }
    func handedBack(_ count: Int = 1) { state.withLock { $0.handedBack += count } }
}

/// A value behind a lock.
final class NSLockedValue<Value>: @unchecked Sendable {
    // @unchecked Sendable: `value` is only touched inside `lock`.
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) { self.value = value }

    func withLock<T>(_ body: (inout Value) throws -> T) rethrows -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
