// The structure check: whether a whole body, already recognised by `ImageSniffer.inspect`, is
// complete and well formed from its first byte to its format's end marker, without decoding.
//
// One pass over the bytes in memory, no copy and no allocation: every walker reads through the
// same bounds-checked `ByteView` as the sniffer, so a read past the end is `SniffStop.needMore`
// (the body is cut: `truncated`) and a broken field is `SniffStop.invalid` (`corrupt_image`).
// Every loop moves forward by at least one byte per step or has a fixed bound, so the walk ends
// within the body's length. docs/image-formats.md lists what each format's walk checks.

#if canImport(CShims)
import CShims
#endif

/// Why a whole body that starts as an image is not a complete, well-formed one.
package enum StructureProblem: Sendable, Equatable {
    /// The bytes end before the format's end (JPEG EOI, PNG IEND, GIF trailer, the RIFF size, a
    /// box, an offset): the file was cut. The reason is short and names no URL.
    case truncated(reason: String)
    /// A structure is broken: a bad chunk CRC, a marker where none may be, a chunk that overruns
    /// its container. The reason is short and names no URL.
    case corrupt(reason: String)
}

extension ImageSniffer {
    /// Walks the whole body `bytes`, which ``inspect(_:isComplete:)`` recognised as `format`, from
    /// its signature to its end; nil when it is complete and well formed.
    ///
    /// Bytes after the format's end (after JPEG EOI, PNG IEND, the GIF trailer, the RIFF size)
    /// are allowed, as decoders allow them; see docs/image-formats.md, "Bytes after the end".
    package static func checkStructure(_ bytes: UnsafeRawBufferPointer, format: ImageFormat) -> StructureProblem? {
        let view = ByteView(bytes)
        do throws(SniffStop) {
            switch format {
            case .jpeg: try walkJPEG(view)
            case .png: try walkPNG(view)
            case .gif: try walkGIF(view)
            case .webp: try walkWebP(view)
            case .bmp: try walkBMP(view)
            case .tiff: try walkTIFF(view)
            case .avif, .heic: try walkISOBMFF(view)
            }
            return nil
        } catch {
            switch error {
            case .needMore: return .truncated(reason: "\(format.rawValue) ends before its end")
            case .invalid(let reason): return .corrupt(reason: reason)
            }
        }
    }

    /// The TIFF walk's verdict on `bytes` and the IFD entries and array elements it read, for
    /// tests: the walk must stay linear in the body whatever its IFDs point at.
    package static func tiffWalk(_ bytes: [UInt8]) -> (problem: StructureProblem?, reads: Int) {
        var reads = 0
        let problem = bytes.withUnsafeBytes { raw -> StructureProblem? in
            do throws(SniffStop) {
                try walkTIFF(ByteView(raw), reads: &reads)
                return nil
            } catch {
                switch error {
                case .needMore: return .truncated(reason: "tiff ends before its end")
                case .invalid(let reason): return .corrupt(reason: reason)
                }
            }
        }
        return (problem, reads)
    }

    /// ``checkStructure(_:format:)`` on an array, for tests.
    package static func checkStructure(_ bytes: [UInt8], format: ImageFormat) -> StructureProblem? {
        bytes.withUnsafeBytes { checkStructure($0, format: format) }
    }
}

// MARK: - CRC-32, eight bytes a step

extension ImageSniffer {
    /// Eight tables of 256 entries for CRC-32 by slicing-by-8: table 0 is the byte-wise table,
    /// table k advances a byte's contribution by k more bytes. Built once, 8 KiB.
    #if canImport(CShims)
    static let foldAvailable = ifw_crc32_fold_available() != 0
    #endif

    static let crcSlices: [UInt32] = {
        var tables = [UInt32](repeating: 0, count: 8 * 256)
        for n in 0..<256 {
            var c = UInt32(n)
            for _ in 0..<8 { c = c & 1 == 1 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
            tables[n] = c
        }
        for k in 1..<8 {
            for n in 0..<256 {
                let previous = tables[(k - 1) * 256 + n]
                tables[k * 256 + n] = tables[Int(previous & 0xFF)] ^ (previous >> 8)
            }
        }
        return tables
    }()

    /// The CRC-32 of `count` bytes from `start`, which the caller has checked are inside the view.
    /// A PNG's chunks are all checked, so this is the structure check's main cost: slicing-by-8
    /// reads eight bytes per step instead of one (about 1 cycle a byte instead of 4–5).
    static func crc32Sliced(_ v: ByteView, from start: Int, count: Int) -> UInt32 {
        var c: UInt32 = 0xFFFF_FFFF
        guard count > 0, let base = v.bytes.baseAddress else { return 0 }
        var p = base + start
        var left = count
        #if canImport(CShims)
        // Carry-less multiplication folds the whole 16-byte blocks about ten times faster than
        // the tables (crc32_fold.c); the tables take the rest, and everything where it is missing.
        if left >= 64, foldAvailable {
            let whole = left & ~15
            c = ifw_crc32_fold(c, p.assumingMemoryBound(to: UInt8.self), whole)
            p += whole
            left -= whole
        }
        #endif
        crcSlices.withUnsafeBufferPointer { t in
            #if _endian(little)
            while left >= 8 {
                let word = p.loadUnaligned(as: UInt64.self)
                let low = UInt32(truncatingIfNeeded: word) ^ c
                let high = UInt32(truncatingIfNeeded: word >> 32)
                c =
                    t[7 * 256 + Int(low & 0xFF)] ^ t[6 * 256 + Int((low >> 8) & 0xFF)]
                    ^ t[5 * 256 + Int((low >> 16) & 0xFF)] ^ t[4 * 256 + Int(low >> 24)]
                    ^ t[3 * 256 + Int(high & 0xFF)] ^ t[2 * 256 + Int((high >> 8) & 0xFF)]
                    ^ t[1 * 256 + Int((high >> 16) & 0xFF)] ^ t[Int(high >> 24)]
                p += 8
                left -= 8
            }
            #endif
            while left > 0 {
                c = t[Int((c ^ UInt32(p.load(as: UInt8.self))) & 0xFF)] ^ (c >> 8)
                p += 1
                left -= 1
            }
        }
        return c ^ 0xFFFF_FFFF
    }
}
