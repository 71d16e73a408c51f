import Foundation

/// The sidecar file of `publish --jsonl FILE`: the line through which every line of FILE is
/// confirmed (``ConfirmedPrefix``), so that `--resume` starts after it.
///
/// Written whole to a temporary file in the same folder, then renamed over the old one, so a crash
/// leaves the old or the new file, never half of one.
package enum PublishProgress {
    /// The default path: the input's, with `.progress` appended.
    package static func defaultPath(for input: String) -> String { input + ".progress" }

    /// Why a progress file cannot be used.
    package enum Problem: Error, Equatable, CustomStringConvertible {
        case missing(path: String)
        case unreadable(path: String)
        case malformed(path: String)

        package var description: String {
            switch self {
            case .missing(let path):
                "no progress file at \(path): nothing to resume (run without --resume to start from line 1)"
            case .unreadable(let path): "cannot read the progress file \(path)"
            case .malformed(let path): "the progress file \(path) is not one written by publish --jsonl"
            }
        }
    }

    /// The text of the file for `line`.
    package static func encode(confirmedThrough line: Int) -> String {
        "{\"confirmed_through_line\":\(line)}\n"
    }

    /// The line a file's text records.
    package static func decode(_ text: String) -> Int? {
        struct Record: Decodable {
            var confirmed_through_line: Int
        }
        guard let record = try? JSONDecoder().decode(Record.self, from: Data(text.utf8)),
            record.confirmed_through_line >= 0
        else { return nil }
        return record.confirmed_through_line
    }

    /// Reads the line recorded at `path`.
    package static func read(_ path: String) throws(Problem) -> Int {
        guard FileManager.default.fileExists(atPath: path) else { throw .missing(path: path) }
        guard let data = FileManager.default.contents(atPath: path) else { throw .unreadable(path: path) }
        guard data.count < 4096, let line = decode(String(decoding: data, as: UTF8.self)) else {
            throw .malformed(path: path)
        }
        return line
    }

    /// Records `line` at `path`, atomically.
    package static func write(_ line: Int, to path: String) throws {
        let temporary = path + ".tmp"
        try Data(encode(confirmedThrough: line).utf8).write(to: URL(fileURLWithPath: temporary))
        guard rename(temporary, path) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
    }
}
