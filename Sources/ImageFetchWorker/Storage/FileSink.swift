import Dispatch
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Stores bodies as files under a root folder: `<root>/<key>`, where the key is the job's sanitised
/// `key` when usable, else the content-addressed `<sha256[0..2]>/<sha256>.<ext>`.
///
/// Each body is written to a temporary file in the destination folder, optionally fsynced, then
/// renamed onto its final name, and the folder is fsynced, so a reader never sees a partial file and
/// a stored file survives a crash once the completion has been called. An existing file with the
/// same key is replaced.
///
/// With fsync, the work runs on one of a few serial queues of the sink's own, picked by a hash of
/// the key, so fsync never blocks the caller's queue and two writes of the same key are ordered.
/// Without fsync a write only copies into the page cache, so it runs on the caller's thread: one
/// thread hand-off less per job. Two writes of the same key then race, and
/// the last rename wins, as it would for two jobs whose store calls came in the other order.
public final class FileSink: ImageSink {
    /// The root folder, absolute and with symbolic links resolved.
    package let root: String
    /// Whether files and folders are fsynced before completion.
    package let fsync: Bool
    /// Whether ``store(_:completion:)`` writes on the caller's thread instead of a lane.
    package let writesInline: Bool
    private let lanes: [DispatchQueue]
    /// Content-addressed files found to hold their bytes, so that a repeat needs only a `stat`.
    private let verified = Mutex(VerifiedFiles(capacity: 4_096))

    /// Creates the sink, creating `root` (and its parents) if needed and resolving it to an
    /// absolute path.
    ///
    /// - Parameters:
    ///   - root: the root folder, `storage.path`.
    ///   - fsync: `storage.fsync`: fsync each file and its folder before completing.
    ///   - lanes: how many serial queues do the writing; at least one is used.
    ///   - writesInline: write on the caller's thread; default: when `fsync` is off.
    /// - Throws: ``StartupError`` when the root cannot be created or resolved, or is not a
    ///   writable directory.
    public init(root: String, fsync: Bool, lanes: Int = 4, writesInline: Bool? = nil) throws(StartupError) {
        guard !root.isEmpty else { throw StartupError("the storage root is empty") }
        if let failure = FileSink.makeDirectories(root, fsyncParents: false) {
            throw StartupError("cannot create the storage root: \(failure.text)")
        }
        guard let resolved = realpath(root, nil) else {
            throw StartupError("cannot resolve the storage root: \(Errno.current.text)")
        }
        self.root = String(cString: resolved)
        free(resolved)
        // An existing root passes the mkdir: refuse here what would fail every store later.
        var info = stat()
        guard stat(self.root, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR else {
            throw StartupError("the storage root is not a directory")
        }
        guard access(self.root, W_OK | X_OK) == 0 else {
            throw StartupError("the storage root is not writable: \(Errno.current.text)")
        }
        self.fsync = fsync
        self.writesInline = writesInline ?? !fsync
        self.lanes = (0..<max(1, lanes)).map { DispatchQueue(label: "image-fetch-worker.file-sink.\($0)") }
    }

    /// Writes the body, then calls `completion`: on the caller's thread when ``writesInline``,
    /// else on one of the sink's lanes.
    public func store(
        _ request: StorageRequest,
        completion: @escaping @Sendable (Result<StoredObject, StorageError>) -> Void
    ) {
        let (key, contentAddressed) = request.resolved
        if writesInline {
            completion(store(request, key: key, contentAddressed: contentAddressed))
            return
        }
        let lane = lanes[Int(FileSink.fnv1a(key) % UInt64(lanes.count))]
        lane.async { [self] in
            completion(store(request, key: key, contentAddressed: contentAddressed))
        }
    }

    /// Stores one body at `<root>/<key>`, unless its content address is already there.
    private func store(
        _ request: StorageRequest, key: String, contentAddressed: Bool
    ) -> Result<StoredObject, StorageError> {
        // The digest becomes a path when there is no usable key hint: accept only hex there.
        if contentAddressed, !StorageKey.isDigest(request.sha256) {
            return .failure(StorageError("the sha256 is not lowercase hex"))
        }
        let path = root + "/" + key
        // A content address names its bytes: when the file is already there (a redelivery, or
        // the same image from another URL) with these bytes, it is not written again. Its bytes
        // are compared, not only its size: whatever else is there (written by hand, or before
        // keys were kept out of this namespace) is replaced, so a result never points at
        // another body. Files only ever appear under their final name complete (temporary
        // file + rename). A file this process already found right, and unchanged since (same
        // inode, size and times), needs only the `stat`.
        // Remembered by key (shorter than the path, the root being the same), and looked up once
        // on the usual path, a repeat: each String hash of it costs about 500 instructions.
        if contentAddressed, let identity = FileIdentity(path: path), identity.size == request.body.count {
            let known = verified.withLock { $0.holds(key, as: identity) }
            if known || FileSink.fileHolds(request.body, at: path) {
                if !known { verified.withLock { $0.remember(key, as: identity) } }
                return .success(StoredObject(location: "file://" + path, wrote: false))
            }
        }
        return FileSink.write(request.body, key: key, path: path, fsync: fsync)
    }

    // MARK: - Writing

    /// Whether the file at `path` holds exactly `body` (read in 64 KiB chunks; false on any error).
    /// Every job whose image is already stored comes through here, so the chunk is neither zeroed
    /// nor kept, and the bytes are compared with `memcmp`: `elementsEqual` on the slices cost about
    /// 6 instructions a byte (75,000 a png32 message, callgrind).
    fileprivate static func fileHolds(_ body: [UInt8], at path: String) -> Bool {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return false }
        defer { _ = close(fd) }
        return withUnsafeTemporaryAllocation(byteCount: min(max(body.count, 1), 65_536), alignment: 16) { chunk in
            body.withUnsafeBytes { expected in
                var offset = 0
                var interruptions = 0
                while true {
                    let count = read(fd, chunk.baseAddress, chunk.count)
                    if count < 0, Errno.current.code == EINTR, interruptions < maxAttempts {
                        interruptions += 1
                        continue
                    }
                    guard count >= 0 else { return false }
                    if count == 0 { return offset == body.count }
                    guard offset + count <= body.count, let base = expected.baseAddress, let got = chunk.baseAddress,
                        memcmp(base + offset, got, count) == 0
                    else { return false }
                    offset += count
                }
            }
        }
    }

    /// Writes `body` to `path` (`<root>/<key>`) atomically.
    fileprivate static func write(
        _ body: [UInt8],
        key: String,
        path: String,
        fsync: Bool
    ) -> Result<StoredObject, StorageError> {
        let folder: String
        let name: Substring
        // Split on the byte: a "/" followed by a combining mark is one Character with it.
        if let slash = path.utf8.lastIndex(of: UInt8(ascii: "/")) {
            folder = String(path[..<slash])
            name = path[path.utf8.index(after: slash)...]
        } else {
            folder = "."
            name = Substring(path)
        }

        func failure(_ what: String, _ errno: Errno) -> Result<StoredObject, StorageError> {
            // A key whose folder is a file, whose name is a folder, or that is too long fails the
            // same way next time; a full disk or a permission may be fixed meanwhile.
            let permanent = errno.code == ENOTDIR || errno.code == EISDIR || errno.code == ENAMETOOLONG
            return .failure(StorageError("\(what) \(key): \(errno.text)", retryable: !permanent))
        }

        // Open a fresh temporary file next to the destination, creating folders on first use.
        var opened = openTemporary(in: folder, name: name)
        if case .failure(let error) = opened, error.code == ENOENT {
            if let mkdirFailure = makeDirectories(folder, fsyncParents: fsync) {
                return failure("cannot create the folder for", mkdirFailure)
            }
            opened = openTemporary(in: folder, name: name)
        }
        let fd: Int32
        let temporary: String
        switch opened {
        case .success(let result):
            (fd, temporary) = result
        case .failure(let error):
            return failure("cannot create a temporary file for", error)
        }

        if let error = writeAll(fd, body) {
            _ = close(fd)
            _ = unlink(temporary)
            return failure("cannot write", error)
        }
        if fsync, let error = retryingEINTR({ posixFsync(fd) }) {
            _ = close(fd)
            _ = unlink(temporary)
            return failure("cannot fsync", error)
        }
        if close(fd) != 0, Errno.current.code != EINTR {
            let error = Errno.current
            _ = unlink(temporary)
            return failure("cannot close", error)
        }
        if rename(temporary, path) != 0 {
            let error = Errno.current
            _ = unlink(temporary)
            return failure("cannot rename into", error)
        }
        if fsync, let error = fsyncDirectory(folder) {
            return failure("cannot fsync the folder of", error)
        }
        return .success(StoredObject(location: "file://" + path))
    }

    /// The most attempts at a unique temporary name, and at a call interrupted by a signal.
    fileprivate static let maxAttempts = 16

    /// Opens `<folder>/.<name>.<random>.tmp` with `O_CREAT|O_EXCL|O_WRONLY|O_CLOEXEC`, mode 0644.
    fileprivate static func openTemporary(in folder: String, name: Substring) -> Result<(Int32, String), Errno> {
        // Keep the temporary name within NAME_MAX even for a 255-byte final name.
        let stem = name.utf8.count > 200 ? String(decoding: name.utf8.prefix(200), as: UTF8.self) : String(name)
        var last = Errno(code: EEXIST)
        for _ in 0..<maxAttempts {
            let suffix = String(UInt64.random(in: .min ... .max), radix: 16)
            let temporary = "\(folder)/.\(stem).\(suffix).tmp"
            let fd = open(temporary, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0o644)
            if fd >= 0 { return .success((fd, temporary)) }
            last = Errno.current
            guard last.code == EEXIST || last.code == EINTR else { break }
        }
        return .failure(last)
    }

    /// Writes every byte, resuming after partial writes and interruptions.
    fileprivate static func writeAll(_ fd: Int32, _ body: [UInt8]) -> Errno? {
        body.withUnsafeBytes { buffer -> Errno? in
            guard let base = buffer.baseAddress else { return nil }
            var written = 0
            var interruptions = 0
            // Every pass either makes progress or counts an interruption: bounded.
            while written < buffer.count {
                let result = posixWrite(fd, base + written, buffer.count - written)
                if result > 0 {
                    written += result
                    interruptions = 0
                } else if result < 0, Errno.current.code == EINTR, interruptions < maxAttempts {
                    interruptions += 1
                } else if result == 0 {
                    return Errno(code: EIO)
                } else {
                    return Errno.current
                }
            }
            return nil
        }
    }

    /// Creates `path` and any missing parents (`mkdir -p`), mode 0755. With `fsyncParents`, the
    /// parent of each folder created is fsynced so that the new entry is durable.
    fileprivate static func makeDirectories(_ path: String, fsyncParents: Bool) -> Errno? {
        var prefix = path.utf8.first == UInt8(ascii: "/") ? "" : "."
        // Split on the byte, as the file system does (see ``write(_:key:path:fsync:)``).
        let segments = path.utf8.split(separator: UInt8(ascii: "/"))
        for segment in segments {
            let parent = prefix.isEmpty ? "/" : prefix
            prefix += "/" + Substring(segment)
            if mkdir(prefix, 0o755) == 0 {
                if fsyncParents, let error = fsyncDirectory(parent) { return error }
            } else if Errno.current.code != EEXIST {
                return Errno.current
            }
        }
        return nil
    }

    /// Opens a folder read-only and fsyncs it, so that entries added to it are durable.
    fileprivate static func fsyncDirectory(_ path: String) -> Errno? {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return Errno.current }
        defer { _ = close(fd) }
        return retryingEINTR { posixFsync(fd) }
    }

    /// Runs a call that returns -1 and sets errno on failure, retrying a few times on EINTR.
    fileprivate static func retryingEINTR(_ call: () -> Int32) -> Errno? {
        for _ in 0..<maxAttempts {
            if call() == 0 { return nil }
            if Errno.current.code != EINTR { return Errno.current }
        }
        return Errno(code: EINTR)
    }

    /// FNV-1a over the key's UTF-8: a stable, cheap spread of keys over the lanes.
    fileprivate static func fnv1a(_ key: String) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in key.utf8 {
            hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3
        }
        return hash
    }
}

/// An errno value and its text (file-private: other parts of the module may have their own).
fileprivate struct Errno: Error, Equatable {
    var code: Int32

    static var current: Errno { Errno(code: errno) }

    /// The system's text for the code, such as "Permission denied".
    var text: String { String(cString: strerror(code)) }
}

// `FileSink` has members named `fsync` and `write`; these reach the C functions unambiguously.
@inline(__always)
private func posixFsync(_ fd: Int32) -> Int32 { fsync(fd) }
@inline(__always)
private func posixWrite(_ fd: Int32, _ buffer: UnsafeRawPointer, _ count: Int) -> Int { write(fd, buffer, count) }
