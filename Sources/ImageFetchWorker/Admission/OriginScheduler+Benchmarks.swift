import NIOCore

/// One admission round on a scheduler whose single origin has a full window waiting, for the
/// allocation gate (Benchmarks/, `OriginScheduler.round`): a job arrives, the next one starts, a
/// fetch ends. A round allocates nothing; a copy of the waiting queue (as `next(now:)` once made,
/// for every job) would show as one allocation more per round.
@_spi(Benchmarks) public final class OriginSchedulerRound {
    private var scheduler: OriginScheduler<Int>
    private let origin = Origin(scheme: "https", host: "images.example.com", port: 443)
    private var now: UInt64 = 1_000_000_000
    private var next = 0
    private var running = CircularBuffer<OriginSlot>()

    /// `concurrency` jobs running and twice as many waiting, as at slow1024's steady state.
    @_spi(Benchmarks) public init(concurrency: Int) {
        let limiter = OriginLimiter.Settings(minLimit: 1, maxLimit: concurrency, initialLimit: concurrency)
        scheduler = OriginScheduler(settings: .init(limiter: limiter, window: 2 * concurrency))
        running.reserveCapacity(2 * concurrency)
        for _ in 0..<(3 * concurrency) { arrive() }
        while let start = scheduler.next(now: now) { running.append(start.slot) }
    }

    /// A job arrives, the oldest running fetch ends, and the next waiting job starts.
    @_spi(Benchmarks) public func run() {
        arrive()
        now += 100_000
        let done = running.removeFirst()
        _ = scheduler.finished(
            done,
            outcome: .response(
                status: 200, latencyNanoseconds: 50_000_000,
                durationNanoseconds: 100_000_000, retryAfterSeconds: nil),
            now: now)
        if let start = scheduler.next(now: now) { running.append(start.slot) }
    }

    private func arrive() {
        next += 1
        _ = scheduler.enqueue(next, origin: origin, now: now)
    }
}
