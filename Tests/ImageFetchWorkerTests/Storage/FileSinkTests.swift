import Testing

@testable import ImageFetchWorker

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A fresh folder under the system's temporary folder, removed by `remove()`.
fileprivate struct TemporaryFolder {
    let path: String

    init() {
        var template = Array("/tmp/file-sink-tests.XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { buffer in
            buffer.baseAddress.flatMap { mkdtemp($0) }.map { String(cString: $0) }
        }
        guard let made else { preconditionFailure("mkdtemp failed") }
        path = made
    }

    func remove() {
        _ = removeTree(path)
    }

    private func removeTree(_ path: String) -> Bool {
        for name in list(path) {
            let child = path + "/" + name
            if unlink(child) != 0 { _ = removeTree(child) }
        }
        return rmdir(path) == 0
    }
}

/// Every name in a folder, except `.` and `..`.
fileprivate func list(_ path: String) -> [String] {
    guard let dir = opendir(path) else { return [] }
    defer { closedir(dir) }
    var names: [String] = []
    while let entry = readdir(dir) {
        let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
            String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
        }
        if name != "." && name != ".." { names.append(name) }
    }
    return names
}

/// Every file path under a folder, relative to it.
fileprivate func listTree(_ root: String, _ relative: String = "") -> [String] {
    let folder = relative.isEmpty ? root : root + "/" + relative
    return list(folder).flatMap { name -> [String] in
        let child = relative.isEmpty ? name : relative + "/" + name
        var info = stat()
        guard stat(root + "/" + child, &info) == 0 else { return [] }
        return (info.st_mode & S_IFMT) == S_IFDIR ? listTree(root, child) : [child]
    }
}

fileprivate func readFile(_ path: String) -> [UInt8]? {
    let fd = open(path, O_RDONLY)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var result: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65_536)
    for _ in 0..<10_000 {
        let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard n > 0 else { return n == 0 ? result : nil }
        result += buffer[0..<n]
    }
    return nil
}

fileprivate extension ImageSink {
    /// Stores and waits for the completion.
    func store(_ request: StorageRequest) async -> Result<StoredObject, StorageError> {
        await withCheckedContinuation { continuation in
            store(request) { continuation.resume(returning: $0) }
        }
    }
}

@Suite struct FileSinkTests {
    static let sha = "5e" + String(repeating: "a1", count: 31)
    static let body: [UInt8] = (0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }

    func request(key: String?, body: [UInt8] = FileSinkTests.body, sha256: String = FileSinkTests.sha) -> StorageRequest
    {
        StorageRequest(
            body: body, sha256: sha256, info: ImageInfo(format: .png, width: 1, height: 1),
            keyHint: key, jobID: "job-1", sourceURL: "https://example.com/a.png"
        )
    }

    @Test(arguments: [true, false])
    func storesContentAddressed(fsync: Bool) async throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let sink = try FileSink(root: folder.path + "/images", fsync: fsync)
        let stored = try await sink.store(request(key: nil)).get()
        let expectedPath = sink.root + "/5e/\(Self.sha).png"
        #expect(stored.location == "file://" + expectedPath)
        #expect(sink.root.hasPrefix("/"))
        #expect(readFile(expectedPath) == Self.body)
        #expect(listTree(folder.path) == ["images/5e/\(Self.sha).png"])
    }

    @Test func anExistingContentAddressedFileIsNotWrittenAgain() async throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let sink = try FileSink(root: folder.path, fsync: false)
        let written = try await sink.store(request(key: nil)).get()
        #expect(written.wrote)
        let path = try #require(written.location).dropFirst("file://".count)
        var first = stat()
        #expect(stat(String(path), &first) == 0)
        let again = try await sink.store(request(key: nil)).get()
        var second = stat()
        #expect(stat(String(path), &second) == 0)
        #expect(again.location == "file://" + path)
        #expect(!again.wrote, "the result's stored: nothing was written")
        #expect(first.st_ino == second.st_ino, "a rewrite renames a new inode into place")

        // A truncated file under the name (not written by the sink) is replaced.
        #expect(truncate(String(path), 10) == 0)
        #expect(try await sink.store(request(key: nil)).get().wrote)
        #expect(readFile(String(path)) == Self.body)
        // A job with its own key always writes.
        #expect(try await sink.store(request(key: "mine/a.png")).get().wrote)
        #expect(try await sink.store(request(key: "mine/a.png")).get().wrote)
    }

    /// The sink splits a key into folders by its bytes, as the file system does: a segment that
    /// starts with a combining mark is a folder of its own, and a key that climbs out of the root
    /// by its bytes falls back to the content address.
    @Test func keysAreSplitByTheirBytes() async throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let sink = try FileSink(root: folder.path + "/images", fsync: false)
        let odd = try await sink.store(request(key: "a/\u{301}b/c.png")).get()
        #expect(odd.location == "file://" + sink.root + "/a/\u{301}b/c.png")
        let climbing = try await sink.store(request(key: "../\u{301}out/x.png")).get()
        #expect(climbing.location == "file://" + sink.root + "/5e/\(Self.sha).png")
        let tree = listTree(folder.path)
        #expect(tree.allSatisfy { $0.hasPrefix("images/") }, "\(tree)")
    }

    /// A key whose folder is a file, or whose name is a folder, fails the same way every time:
    /// going through every retry queue first only delays the result.
    @Test func aKeyThatCollidesWithAnotherKeysFileOrFolderIsNotRetried() async throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let sink = try FileSink(root: folder.path + "/images", fsync: false)
        _ = try await sink.store(request(key: "a")).get()
        _ = try await sink.store(request(key: "c/d")).get()
        for key in ["a/b", "c"] {
            guard case .failure(let error) = await sink.store(request(key: key)) else {
                Issue.record("\(key) was stored")
                continue
            }
            #expect(!error.retryable, "\(key): \(error.message)")
        }
    }

    /// A keyed job must not plant bytes at another image's content address: the image that owns
    /// the address, stored later without a key, must get a location that holds its own bytes.
    @Test func aKeyedJobCannotPlantBytesAtAnotherImagesContentAddress() async throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let sink = try FileSink(root: folder.path, fsync: false)
        let victimAddress = "5e/\(Self.sha).png"
        let planted = [UInt8](repeating: 0x42, count: Self.body.count)  // same size, other bytes
        let otherSha = "77" + String(repeating: "0b", count: 31)
        let keyed = try await sink.store(request(key: victimAddress, body: planted, sha256: otherSha)).get()
        #expect(keyed.location != "file://" + sink.root + "/" + victimAddress)
        let keptItsOwn = readFile(String(try #require(keyed.location).dropFirst("file://".count))) == planted
        #expect(keptItsOwn)

        let victim = try await sink.store(request(key: nil)).get()
        #expect(victim.location == "file://" + sink.root + "/" + victimAddress)
        let holdsItsOwnBytes = readFile(sink.root + "/" + victimAddress) == Self.body
        #expect(holdsItsOwnBytes)
    }

    /// Bytes already at a content address that are not the image's (written by hand, or by a
    /// version that let keys into that namespace) are replaced, not trusted for their size.
    @Test func sameSizeOtherBytesAtTheContentAddressAreReplaced() async throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let sink = try FileSink(root: folder.path, fsync: false)
        let path = sink.root + "/5e/\(Self.sha).png"
        #expect(mkdir(sink.root + "/5e", 0o755) == 0)
        let fd = open(path, O_CREAT | O_WRONLY, 0o644)
        #expect(fd >= 0)
        let planted = [UInt8](repeating: 0x42, count: Self.body.count)
        #expect(planted.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) } == planted.count)
        close(fd)

        let stored = try await sink.store(request(key: nil)).get()
        #expect(stored.location == "file://" + path)
        #expect(stored.wrote)
        let replaced = readFile(path) == Self.body
        #expect(replaced)
    }

    /// A repeat of a content address this sink has compared is trusted on `stat` alone, but only
    /// while the file is the same: replaced by a rename, or written over in place, it is compared
    /// (and repaired) again.
    @Test func aVerifiedContentAddressChangedBehindTheSinkIsComparedAgain() async throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let sink = try FileSink(root: folder.path, fsync: false)
        let path = sink.root + "/5e/\(Self.sha).png"
        _ = try await sink.store(request(key: nil)).get()  // written
        _ = try await sink.store(request(key: nil)).get()  // compared, remembered
        let other = [UInt8](repeating: 0x42, count: Self.body.count)

        // Another file renamed onto the path: another inode.
        let temporary = sink.root + "/5e/planted"
        let fd = open(temporary, O_CREAT | O_WRONLY, 0o644)
        #expect(other.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) } == other.count)
        close(fd)
        #expect(rename(temporary, path) == 0)
        _ = try await sink.store(request(key: nil)).get()
        #expect(readFile(path) == Self.body)

        // The same inode written over in place (its times set apart, as the clock's tick is coarse).
        _ = try await sink.store(request(key: nil)).get()
        let inPlace = open(path, O_WRONLY)
        #expect(other.withUnsafeBytes { pwrite(inPlace, $0.baseAddress, $0.count, 0) } == other.count)
        var times = [timespec(tv_sec: 1_000_000, tv_nsec: 0), timespec(tv_sec: 1_000_000, tv_nsec: 0)]
        #expect(futimens(inPlace, &times) == 0)
        close(inPlace)
        _ = try await sink.store(request(key: nil)).get()
        #expect(readFile(path) == Self.body)
    }

    @Test func verifiedFilesForgetTheOldestBeyondTheirCapacity() {
        var files = VerifiedFiles(capacity: 2)
        let identity = FileIdentity(device: 1, inode: 2, size: 3, modified: timespec(), changed: timespec())
        files.remember("/a", as: identity)
        files.remember("/b", as: identity)
        files.remember("/a", as: identity)  // known: no new place taken
        files.remember("/c", as: identity)
        #expect(files.count == 2)
        #expect(!files.holds("/a", as: identity))
        #expect(files.holds("/b", as: identity) && files.holds("/c", as: identity))
        var other = identity
        other.inode = 9
        #expect(!files.holds("/b", as: other))
    }

    @Test(arguments: [true, false])
    func storesUnderSanitisedKey(fsync: Bool) async throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let sink = try FileSink(root: folder.path, fsync: fsync, lanes: 2)
        let stored = try await sink.store(request(key: "/cats/2024/tabby.png")).get()
        #expect(stored.location == "file://\(sink.root)/cats/2024/tabby.png")
        #expect(readFile(sink.root + "/cats/2024/tabby.png") == Self.body)

        // Storing again replaces the file; a hostile key falls back to the content address.
        _ = try await sink.store(request(key: "cats/2024/tabby.png", body: [1, 2, 3])).get()
        #expect(readFile(sink.root + "/cats/2024/tabby.png") == [1, 2, 3])
        let hostile = try await sink.store(request(key: "../../escape.png")).get()
        #expect(hostile.location == "file://\(sink.root)/5e/\(Self.sha).png")
        #expect(listTree(folder.path).sorted() == ["5e/\(Self.sha).png", "cats/2024/tabby.png"])
    }

    @Test func emptyBodyAndRelativeRoot() async throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let saved = getcwd(nil, 0)
        defer {
            if let saved {
                _ = chdir(saved)
                free(saved)
            }
        }
        #expect(chdir(folder.path) == 0)
        let sink = try FileSink(root: "./data/images", fsync: true)
        #expect(sink.root.hasPrefix("/") && sink.root.hasSuffix("/data/images"))
        let stored = try await sink.store(request(key: "empty", body: [])).get()
        #expect(stored.location == "file://\(sink.root)/empty")
        #expect(readFile(sink.root + "/empty") == [])
    }

    @Test func manyConcurrentStoresLeaveNoTemporaryFiles() async throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let sink = try FileSink(root: folder.path, fsync: false, lanes: 3)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for i in 0..<40 {
                group.addTask {
                    _ = try await sink.store(self.request(key: "k/\(i % 10)", body: [UInt8(i)])).get()
                }
            }
            try await group.waitForAll()
        }
        let files = listTree(folder.path)
        #expect(files.sorted() == (0..<10).map { "k/\($0)" })
        #expect(!files.contains { $0.hasSuffix(".tmp") })
    }

    @Test func zeroLanesMeansOne() async throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let sink = try FileSink(root: folder.path, fsync: false, lanes: 0)
        _ = try await sink.store(request(key: "one")).get()
        #expect(readFile(sink.root + "/one") == Self.body)
    }

    /// An empty regular file `plain` in `folder`.
    private func plainFile(in folder: TemporaryFolder) -> String {
        let file = folder.path + "/plain"
        let fd = open(file, O_CREAT | O_WRONLY, 0o644)
        #expect(fd >= 0)
        close(fd)
        return file
    }

    /// A storage root that is a regular file used to start the worker, and every store failed
    /// (issue 33): it stops the start instead, with one line.
    @Test func aRootThatIsARegularFileStopsTheStart() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let file = plainFile(in: folder)
        #expect(throws: StartupError("the storage root is not a directory")) {
            _ = try FileSink(root: file, fsync: false)
        }
    }

    @Test func rootUnderARegularFileFails() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let file = plainFile(in: folder)
        #expect {
            _ = try FileSink(root: file + "/images", fsync: true)
        } throws: { error in
            // A start-up failure, not a job's: no result code, nothing to retry.
            guard let error = error as? StartupError else { return false }
            return error.description.hasPrefix("cannot create the storage root")
                && !error.description.contains(folder.path)
        }
    }

    @Test func unwritableKeyFailsAndCleansUp() async throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let sink = try FileSink(root: folder.path, fsync: true)
        _ = try await sink.store(request(key: "blocker", body: [0])).get()
        // "blocker" is a file, so "blocker/x.png" cannot be created.
        let result = await sink.store(request(key: "blocker/x.png"))
        guard case .failure(let error) = result else {
            Issue.record("stored under a regular file: \(result)")
            return
        }
        #expect(JobError(error).code == .storageFailed)
        #expect(error.message.contains("blocker/x.png"))
        #expect(!error.message.contains(folder.path))
        #expect(!error.message.contains("example.com"))
        #expect(listTree(folder.path) == ["blocker"])

        // A folder where the file should go: the rename fails and the temporary file is removed.
        #expect(mkdir(folder.path + "/taken", 0o755) == 0)
        #expect(mkdir(folder.path + "/taken/child", 0o755) == 0)
        let renamed = await sink.store(request(key: "taken"))
        guard case .failure(let renameError) = renamed else {
            Issue.record("replaced a folder: \(renamed)")
            return
        }
        #expect(JobError(renameError).code == .storageFailed)
        #expect(listTree(folder.path).sorted() == ["blocker"])
        #expect(list(folder.path).sorted() == ["blocker", "taken"])
    }

    @Test func nonHexDigestIsRefused() async throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let sink = try FileSink(root: folder.path, fsync: false)
        for digest in ["../../x", "", String(repeating: "AB", count: 32), String(repeating: "a", count: 63) + "g"] {
            let result = await sink.store(request(key: nil, sha256: digest))
            guard case .failure(let error) = result else {
                Issue.record("stored under the digest \(digest)")
                continue
            }
            #expect(JobError(error).code == .storageFailed)
        }
        #expect(list(folder.path).isEmpty)
    }

    @Test func noneSinkStoresNothing() async throws {
        let stored = try await NoneSink().store(request(key: "x")).get()
        #expect(stored == StoredObject(location: nil))
    }
}
