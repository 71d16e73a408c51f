import Foundation
import Testing

@testable import ImageFetchWorker

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

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
    /// Whether malloc is glibc's: AddressSanitizer (the build in docs/reliability.md, "Leaks and
    /// memory errors") brings an allocator of its own, which ignores mallopt (and says so);
    /// ThreadSanitizer's allocator ignores it too, while glibc's mallopt still reports success.
    /// (`dlsym(nil, …)`: RTLD_DEFAULT.)
    static let mallocIsGlibcs = dlsym(nil, "__asan_init") == nil && dlsym(nil, "__tsan_init") == nil
    static let isAddressSanitized = dlsym(nil, "__asan_init") != nil

    /// Set in the child test process that `applyingIt...` starts; the tests that change the
    /// allocator run only there, so the parallel test process keeps glibc's defaults.
    static let isChild = ProcessInfo.processInfo.environment["IFW_MALLOC_RETENTION_CHILD"] == "1"

    /// `apply` changes malloc for the whole process, so it runs in a child: this test binary again,
    /// filtered to the tests below. The child's exit status is its verdict.
    @Test(.enabled(if: !isChild, "the parent of the child process"))
    func applyingItIsTestedInAChildProcess() throws {
        let binary = try #require(CommandLine.arguments.first)
        let log = FileManager.default.temporaryDirectory.appendingPathComponent(
            "ifw-malloc-child-\(UUID().uuidString).log"
        ).path
        defer { try? FileManager.default.removeItem(atPath: log) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        let arguments = [binary, "--testing-library", "swift-testing", "--filter", "MallocRetentionTests/InTheChild"]
        let argv = arguments.map { strdup($0) } + [nil]
        let environment = ProcessInfo.processInfo.environment.merging(["IFW_MALLOC_RETENTION_CHILD": "1"]) { _, new in
            new
        }
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { (argv + envp).forEach { free($0) } }
        var pid: pid_t = 0
        #expect(posix_spawn(&pid, binary, &actions, nil, argv, envp) == 0)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
        let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        #expect(status == 0, "the child test process failed (wait status \(status)):\n\(text.suffix(4000))")
        // The child ran the tests, rather than finding none to run.
        #expect(
            text.contains("freedBlocksAreReusedWithoutPageFaults")
                && text.contains("anotherAllocatorIsReportedAsUnsupported"),
            "the child did not run the tests:\n\(text.suffix(2000))")
    }

    @Suite(
        .enabled(
            if: MallocRetentionTests.isChild, "runs in the child process that applyingItIsTestedInAChildProcess starts")
    )
    struct InTheChild {
        @Test(.enabled(if: MallocRetentionTests.isAddressSanitized, "only under AddressSanitizer's allocator"))
        func anotherAllocatorIsReportedAsUnsupported() {
            #expect(MallocRetention.apply(environment: [:]) == .unsupported)
        }

        /// Freed blocks are reused instead of being faulted in again: eight 1 MiB blocks, freed and
        /// allocated again, touch no new pages. With glibc's defaults the 8 MiB free at the top of the
        /// heap pass the trim threshold and go back to the kernel, and the second round faults them in.
        @Test(.enabled(if: MallocRetentionTests.mallocIsGlibcs, "needs glibc's malloc"))
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
    }
    #endif
}
