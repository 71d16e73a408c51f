import Dispatch

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Holds back the wake-ups that one block of completions causes, and performs them together when
/// the block ends.
///
/// The fetch loop hands the transfers that finish in one of its turns to the work queue in one
/// block. Finishing each job releases its permit (`semaphore.signal()`, which wakes the admission
/// queue) and hands its result to the channel queue (`queue.async`, which wakes that queue's
/// thread). Done job by job, each of those wakes a sleeping thread that does one job's worth of
/// work and sleeps again; on a small machine the wake-ups cost more than the work. Inside
/// ``run(_:)`` the same calls made through ``signal(_:)`` and ``async(on:_:)`` are gathered, and at
/// the end of the block every permit is released back to back and each queue gets one block with
/// all its work: one wake-up per block instead of one per job.
///
/// Outside ``run(_:)`` (the admission queue, a storage lane, the S3 sink's queue) both act at once.
/// Nothing is reordered: the permits and the blocks for a queue keep their order, and they leave
/// microseconds later, when the block's other jobs are done.
///
/// The batch of the running block is found through a thread-specific pointer, so the code that
/// finishes a job needs no extra parameter; a batch is only ever touched by the thread that runs
/// its block.
final class CompletionBatch {
    private var signals: [(semaphore: DispatchSemaphore, count: Int)] = []
    private var blocks: [(queue: DispatchQueue, work: [@Sendable () -> Void])] = []

    private init() {}

    /// Runs `body` with a batch that gathers the calls to ``signal(_:)`` and ``async(on:_:)``,
    /// then performs them. Nested calls run inside the outer batch.
    static func run(_ body: () -> Void) {
        if current != nil { return body() }
        let batch = CompletionBatch()
        pthread_setspecific(key, Unmanaged.passUnretained(batch).toOpaque())
        body()
        pthread_setspecific(key, nil)
        batch.flush()
    }

    /// `semaphore.signal()`, at the end of the running batch if there is one.
    static func signal(_ semaphore: DispatchSemaphore) {
        guard let batch = current else {
            semaphore.signal()
            return
        }
        if let index = batch.signals.firstIndex(where: { $0.semaphore === semaphore }) {
            batch.signals[index].count += 1
        } else {
            batch.signals.append((semaphore, 1))
        }
    }

    /// `queue.async(execute: work)`, gathered with the other work for `queue` into one block at
    /// the end of the running batch if there is one.
    static func async(on queue: DispatchQueue, _ work: @escaping @Sendable () -> Void) {
        guard let batch = current else { return queue.async(execute: work) }
        if let index = batch.blocks.firstIndex(where: { $0.queue === queue }) {
            batch.blocks[index].work.append(work)
        } else {
            batch.blocks.append((queue, [work]))
        }
    }

    /// The batch of the block running on this thread, if any.
    static var current: CompletionBatch? {
        pthread_getspecific(key).map { Unmanaged<CompletionBatch>.fromOpaque($0).takeUnretainedValue() }
    }

    private func flush() {
        for (semaphore, count) in signals {
            for _ in 0..<count { semaphore.signal() }
        }
        for (queue, work) in blocks {
            if work.count == 1 {
                queue.async(execute: work[0])
            } else {
                queue.async { for item in work { item() } }
            }
        }
    }

    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        let status = pthread_key_create(&key, nil)
        precondition(status == 0, "pthread_key_create failed (\(status))")
        return key
    }()
}
