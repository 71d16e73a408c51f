#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Reads a stream line by line in large chunks, with a bound on a line's length: a line over
/// ``maxBytes`` is skipped to its end without being kept, so a hostile file costs one chunk of
/// memory, never a line's worth.
///
/// Lines are numbered from 1 and end at LF; a CR before the LF is dropped. The last line may
/// have no LF. Not thread-safe: one reader, one caller.
package struct LineReader {
    /// One line of the stream.
    package enum Line: Equatable {
        /// The line's bytes, without its end.
        case text(number: Int, bytes: [UInt8])
        /// A line longer than ``LineReader/maxBytes``; `length` is at least that (the whole
        /// length, end excluded, when it was read to its end).
        case oversized(number: Int, length: Int)

        /// The line's number, from 1.
        package var number: Int {
            switch self {
            case .text(let number, _), .oversized(let number, _): number
            }
        }
    }

    package let maxBytes: Int
    /// Reads into the buffer and returns the count: 0 at the end, negative on an error.
    private let read: (UnsafeMutableRawBufferPointer) -> Int
    private var buffer: [UInt8]
    private var start = 0
    private var end = 0
    private var atEnd = false
    private var number = 0
    /// The errno of a failed read, if one failed (then the stream ends there).
    package private(set) var readError: Int32?

    package init(maxBytes: Int, chunkBytes: Int = 256 * 1024, read: @escaping (UnsafeMutableRawBufferPointer) -> Int) {
        self.maxBytes = maxBytes
        self.read = read
        self.buffer = [UInt8](repeating: 0, count: max(chunkBytes, 16))
    }

    /// A reader of a file descriptor (not closed by the reader).
    package init(fileDescriptor: Int32, maxBytes: Int) {
        self.init(maxBytes: maxBytes) { buffer in
            while true {
                #if canImport(Glibc)
                let count = Glibc.read(fileDescriptor, buffer.baseAddress, buffer.count)
                #else
                let count = Darwin.read(fileDescriptor, buffer.baseAddress, buffer.count)
                #endif
                if count < 0, errno == EINTR { continue }
                return count
            }
        }
    }

    /// Lines read so far (the number of the last one returned).
    package var linesRead: Int { number }

    /// The next line, or nil at the end of the stream.
    package mutating func next() -> Line? {
        var skipped = 0  // bytes of an oversized line already dropped
        while true {
            if let newline = buffer[start..<end].firstIndex(of: UInt8(ascii: "\n")) {
                defer { start = newline + 1 }
                return line(upTo: newline, skipped: skipped)
            }
            if atEnd {
                // After a failed read the bytes before it are no whole line: a job cut there must
                // not be read as one (nor counted done, and skipped by a resume).
                guard readError == nil, start < end || skipped > 0 else { return nil }
                defer { start = end }
                return line(upTo: end, skipped: skipped)
            }
            // No end of line in what is buffered: a line over the limit is dropped as it comes;
            // otherwise the partial line moves to the front and the buffer grows if it must.
            if end - start > maxBytes + 1 {
                skipped += end - start
                start = 0
                end = 0
            } else if start > 0 {
                buffer.withUnsafeMutableBufferPointer { pointer in
                    let base = pointer.baseAddress!
                    base.update(from: base + start, count: end - start)
                }
                end -= start
                start = 0
            }
            if end == buffer.count {
                buffer.append(contentsOf: [UInt8](repeating: 0, count: buffer.count))
            }
            let count = buffer.withUnsafeMutableBytes { raw in
                read(UnsafeMutableRawBufferPointer(rebasing: raw[end...]))
            }
            if count <= 0 {
                if count < 0 { readError = errno }
                atEnd = true
            } else {
                end += count
            }
        }
    }

    /// The line from `start` to `lineEnd` (its LF, or the end of the stream), after `skipped`
    /// bytes of it were dropped.
    private mutating func line(upTo lineEnd: Int, skipped: Int) -> Line {
        number += 1
        let last = lineEnd > start && buffer[lineEnd - 1] == UInt8(ascii: "\r") ? lineEnd - 1 : lineEnd
        let length = skipped + last - start
        if skipped > 0 || length > maxBytes { return .oversized(number: number, length: length) }
        return .text(number: number, bytes: Array(buffer[start..<last]))
    }
}
