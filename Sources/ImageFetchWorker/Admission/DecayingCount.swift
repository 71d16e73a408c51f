#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A count of events that decays exponentially: its value is about the events of the last `tau`.
struct DecayingCount: Sendable {
    private var count = 0.0
    private var at: UInt64 = 0

    func value(now: UInt64, tau: UInt64) -> Double {
        guard count > 0, now > at else { return count }
        return count * Self.decay(now &- at, tau: tau)
    }

    mutating func add(now: UInt64, tau: UInt64) {
        count = value(now: now, tau: tau) + 1
        at = max(at, now)
    }

    private static func decay(_ elapsed: UInt64, tau: UInt64) -> Double {
        exp(-Double(elapsed) / Double(max(tau, 1)))
    }
}
