import CShims

/// Keeps the memory that each job frees for the next job, instead of handing it back to the kernel
/// and faulting it in again.
///
/// Every job allocates and frees the same large blocks: libcurl 7.88 allocates a transfer's receive
/// buffer (`CURLOPT_BUFFERSIZE`, 128 KiB at concurrency 32) when the transfer starts and frees it
/// when it ends, and the body buffer is as large as the image. With glibc's defaults a block of
/// 128 KiB or more is an `mmap` of its own until the first one is freed, and the free top of a heap
/// goes back to the kernel as soon as it passes 128 KiB (or twice the largest block freed so far).
/// Either way the next job's buffer lands on fresh pages, and the kernel faults and zeroes them
/// while libcurl receives into them: 1.4 to 3.1 page faults per 12 KB image at concurrency 32, and
/// 73 per 3 MB JPEG, with the page-table shootdowns that go with them in a threaded process.
///
/// ``apply(environment:)`` raises both thresholds to ``bytes``, so the blocks come from the heap
/// and a freed block stays there for the next allocation of its size. The cost is that up to
/// ``bytes`` of free memory per malloc arena can stay mapped after a burst. The peak changes
/// little, because that memory was in use at the burst's height (docs/benchmarks.md has the
/// figures).
///
/// It also keeps malloc to one arena (``arenas``). glibc gives threads arenas of their own, up to
/// eight per core, and each arena keeps the free memory of its own peak: at concurrency 1,024 the
/// worker had seven, six of them 1.1–2.4 MB and mostly free between bursts. In one arena the
/// threads share that memory: peak RSS at concurrency 1,024 fell by about 5 MB. The price is the
/// arena's lock: CPU per message rose 5–14 % at concurrency 1,024, and did not change measurably
/// at 32 (small blocks still come from each thread's cache without the lock).
///
/// An operator who sets a threshold in `GLIBC_TUNABLES` keeps both thresholds as glibc has them;
/// one who sets `glibc.malloc.arena_max` keeps that arena count. The worker applies the rest.
package enum MallocRetention {
    /// 32 MiB, the largest mmap threshold glibc accepts on 64-bit Linux: a body up to that size
    /// comes from the heap, and a heap keeps up to that much free memory at its top.
    package static let bytes = 32 << 20

    /// One arena for all threads.
    package static let arenas = 1

    /// The `GLIBC_TUNABLES` entries that set the thresholds: if either is set, the worker leaves both.
    static let thresholdTunables = ["glibc.malloc.mmap_threshold", "glibc.malloc.trim_threshold"]

    /// The `GLIBC_TUNABLES` entry that sets the number of arenas.
    static let arenaTunable = "glibc.malloc.arena_max"

    /// What ``apply(environment:)`` did.
    package enum Outcome: Equatable, Sendable {
        /// What the environment leaves to the worker is applied: both thresholds are
        /// ``MallocRetention/bytes`` unless `GLIBC_TUNABLES` sets one, and malloc keeps to
        /// ``MallocRetention/arenas`` arena unless it sets `glibc.malloc.arena_max`.
        case applied
        /// `GLIBC_TUNABLES` sets a threshold and the arena count; the operator's choices stand.
        case leftToTunables
        /// The C library is not glibc, or glibc refused a value.
        case unsupported
    }

    /// Which of its settings the environment leaves to the worker.
    static func leftToWorker(environment: [String: String]) -> (thresholds: Bool, arenas: Bool) {
        guard let tunables = environment["GLIBC_TUNABLES"] else { return (true, true) }
        let names = tunables.split(separator: ":").map { $0.split(separator: "=", maxSplits: 1).first ?? "" }
        return (
            thresholds: !names.contains { name in thresholdTunables.contains { $0 == name } },
            arenas: !names.contains { $0 == arenaTunable }
        )
    }

    /// Raises glibc malloc's mmap and trim thresholds to ``bytes`` and limits it to ``arenas``
    /// arena, each unless `GLIBC_TUNABLES` sets it. Process-wide: call it once at start-up, before
    /// the worker starts threads and allocates.
    @discardableResult
    package static func apply(environment: [String: String]) -> Outcome {
        let left = leftToWorker(environment: environment)
        guard left.thresholds || left.arenas else { return .leftToTunables }
        let status = ifw_malloc_keep_freed(left.thresholds ? bytes : 0, left.arenas ? Int32(arenas) : 0)
        return status == 1 ? .applied : .unsupported
    }
}
