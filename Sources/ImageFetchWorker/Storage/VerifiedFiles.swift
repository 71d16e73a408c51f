#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// What `stat` says about a file: enough to tell that it is still the very file whose bytes were
/// compared. A rename onto the path gives another inode; a write in place moves its change time,
/// which no user-space call can set back.
package struct FileIdentity: Hashable, Sendable {
    package var device: UInt64
    package var inode: UInt64
    package var size: Int
    package var modified: timespec
    package var changed: timespec

    package init(device: UInt64, inode: UInt64, size: Int, modified: timespec, changed: timespec) {
        (self.device, self.inode, self.size, self.modified, self.changed) = (device, inode, size, modified, changed)
    }

    /// The regular file at `path`, or nil when there is none.
    package init?(path: String) {
        var info = stat()
        guard stat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { return nil }
        self.init(
            device: UInt64(info.st_dev), inode: UInt64(info.st_ino), size: Int(info.st_size),
            modified: info.st_mtim, changed: info.st_ctim)
    }

    package static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.device == rhs.device && lhs.inode == rhs.inode && lhs.size == rhs.size
            && lhs.modified.tv_sec == rhs.modified.tv_sec && lhs.modified.tv_nsec == rhs.modified.tv_nsec
            && lhs.changed.tv_sec == rhs.changed.tv_sec && lhs.changed.tv_nsec == rhs.changed.tv_nsec
    }

    package func hash(into hasher: inout Hasher) {
        hasher.combine(device)
        hasher.combine(inode)
        hasher.combine(changed.tv_nsec)
    }
}

/// The content-addressed files whose bytes this process has compared (or written), by key:
/// while a file's identity is unchanged, the next job with the same content needs only a `stat`,
/// not a read of the whole file (issue 33: the read-back cost png32, where every job stores the
/// same image, about 7 % CPU a message). Bounded: the oldest entry goes first.
package struct VerifiedFiles {
    private var identities: [String: FileIdentity] = [:]
    private var order: [String] = []
    private var next = 0
    package let capacity: Int

    package init(capacity: Int) {
        self.capacity = max(1, capacity)
    }

    package var count: Int { identities.count }

    /// Whether `identity` is what the file at `key` had when its bytes were last found right.
    package func holds(_ key: String, as identity: FileIdentity) -> Bool {
        identities[key] == identity
    }

    /// Remembers that the file at `key`, as `identity`, holds the bytes of its name.
    package mutating func remember(_ key: String, as identity: FileIdentity) {
        if identities.updateValue(identity, forKey: key) != nil { return }
        if order.count < capacity {
            order.append(key)
        } else {
            identities[order[next]] = nil
            order[next] = key
            next = (next + 1) % capacity
        }
    }
}
