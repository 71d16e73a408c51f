#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Testing
@testable import ImageFetchWorker

@Suite struct MallocRetentionTests {
    @Test(arguments: [
        [:],
        ["GLIBC_TUNABLES": "glibc.malloc.tcache_count=0"],
        ["GLIBC_TUNABLES": "glibc.malloc.mmap_threshold_x=1"],
    ])
    func withoutTheseTunablesEverythingIsLeftToTheWorker(environment: [String: String]) {
        let left = MallocRetention.leftToWorker(environment: environment)
        #expect(left.thresholds)
        #expect(left.arenas)
    }

    @Test(arguments: ["glibc.malloc.mmap_threshold=131072", "glibc.malloc.trim_threshold=0"])
    func anOperatorsThresholdStands(tunables: String) {
        let left = MallocRetention.leftToWorker(environment: ["GLIBC_TUNABLES": tunables])
        #expect(!left.thresholds, "both thresholds are left to the operator")
        #expect(left.arenas, "the arena count is still the worker's")
    }

    @Test func anOperatorsArenaCountStands() {
        let left = MallocRetention.leftToWorker(environment: ["GLIBC_TUNABLES": "glibc.malloc.arena_max=8"])
        #expect(left.thresholds)
        #expect(!left.arenas)
    }

    @Test func anOperatorWhoSetsBothKeepsBoth() {
        let environment = ["GLIBC_TUNABLES": "glibc.malloc.arena_max=2:glibc.malloc.trim_threshold=1048576"]
        #expect(MallocRetention.apply(environment: environment) == .leftToTunables)
    }

    #if canImport(Glibc)
    /// Whether malloc is glibc's: AddressSanitizer (the build in docs/benchmarks.md, "Leaks and
    /// memory errors") brings an allocator of its own, which ignores mallopt.
    static let mallocIsGlibcs = dlsym(nil, "__asan_init") == nil  // nil: RTLD_DEFAULT

    @Test(.disabled(if: mallocIsGlibcs, "only under a sanitizer's allocator"))
    func anotherAllocatorIsReportedAsUnsupported() {
        #expect(MallocRetention.apply(environment: [:]) == .unsupported)
    }

    /// Freed blocks are reused instead of being faulted in again: eight 1 MiB blocks, freed and
    /// allocated again, touch no new pages. With glibc's defaults the 8 MiB free at the top of the
    /// heap pass the trim threshold and go back to the kernel, and the second round faults them in.
    @Test(.enabled(if: mallocIsGlibcs, "needs glibc's malloc"))
    func freedBlocksAreReusedWithoutPageFaults() {
        #expect(MallocRetention.apply(environment: [:]) == .applied)
        let size = 1 << 20
        // RUSAGE_THREAD (1, Linux): Swift's Glibc module does not import it.
        let thisThread = __rusage_who_t(1)
        func round() -> Int {
            var before = rusage()
            getrusage(thisThread, &before)
            let blocks = (0..<8).map { _ in malloc(size)! }
            for block in blocks { memset(block, 1, size) }
            for block in blocks.reversed() { free(block) }
            var after = rusage()
            getrusage(thisThread, &after)
            return after.ru_minflt - before.ru_minflt
        }
        _ = round()
        let faults = round()
        #expect(faults < 256, "8 MiB is 2,048 pages; \(faults) were faulted in again")
    }
    #endif
}
