/// Recognises an image format and reads its size, and what else the headers tell, without decoding.
///
/// The sniffer is meant to be called again and again on a growing prefix while a body downloads:
/// it dispatches on the first byte, and every format parser reads only what it needs, so a call
/// that cannot decide yet costs a few bounds checks. Every read is bounds-checked, every loop
/// either has a fixed upper bound or moves forward through the body, and no input makes it trap.
/// docs/image-formats.md describes each format's rules and how they agree with real decoders.
///
/// - JPEG: `FF D8 FF`, then the segments are walked to the first frame header (SOF0…SOF15, except
///   DHT `C4`, JPG `C8` and DAC `CC`), skipping what libjpeg skips between segments (stray bytes,
///   fill bytes, `FF 00`) and standalone markers. The first `Exif` APP1 gives the orientation.
/// - PNG: the signature and a valid `IHDR` (CRC, bit depth and colour type, methods), then the
///   chunks up to the first `IDAT`: `acTL` (APNG frames) and `eXIf`.
/// - GIF: `GIF87a`/`GIF89a`, the logical screen and the first image descriptor; for a whole body,
///   every block, so as to count the frames and grow the canvas for frames beyond the screen.
/// - WebP: `RIFF….WEBP` with a first chunk `VP8 `, `VP8L` or `VP8X` (canvas size); for a whole
///   extended file, the `ANMF` frames and the `EXIF` orientation.
/// - BMP: `BM`, then a BITMAPCOREHEADER (12 bytes) or a larger info header; a negative height
///   (top-down bitmap) counts by its magnitude.
/// - TIFF and BigTIFF: `II`/`MM` with version 42 or 43, then tags 256, 257 and 274 of IFD0.
/// - AVIF and HEIC: an ISOBMFF `ftyp` whose major brand, or else its first recognised compatible
///   brand, is ours; then the primary item (`pitm`), its type (`iinf`), its properties (`ipma` →
///   `ipco`: `ispe`, `clap`, `irot`, `imir`) and, for a `grid`, the grid from the item's data
///   (`iloc`, in `idat` or at a file offset).
public enum ImageSniffer {
    /// Inspects a prefix of a body (`isComplete: false`) or a whole body (`isComplete: true`).
    ///
    /// With a prefix it answers ``ImageInspection/needMoreData`` until it can decide; with the
    /// whole body it never does. Once a prefix gives `.notAnImage`, so does the whole body; once it
    /// gives `.image`, the whole body gives an image that agrees with it
    /// (``ImageInfo/isConsistent(withWhole:)``): the same format and size, and the facts that need
    /// the whole body (the frames of a GIF or animated WebP, a WebP's orientation) filled in.
    package static func inspect(_ bytes: UnsafeRawBufferPointer, isComplete: Bool) -> ImageInspection {
        switch sniff(bytes, isComplete: isComplete) {
        case .decided(let inspection): inspection
        case .cutHeader(let family, _): .notAnImage(reason: "truncated \(family) header")
        }
    }

    /// What a whole body is, for the checks that give a result.
    package enum Whole: Sendable, Equatable {
        case image(ImageInfo)
        case notAnImage(reason: String)
        /// The body carries a format's whole signature, checked, and ends inside its headers: a
        /// cut file, not another kind of body.
        case cut(reason: String)
    }

    /// Inspects a whole body, telling a cut image from a body that is none.
    package static func inspectWhole(_ bytes: UnsafeRawBufferPointer) -> Whole {
        switch sniff(bytes, isComplete: true) {
        case .decided(.image(let info)): .image(info)
        case .decided(.notAnImage(let reason)): .notAnImage(reason: reason)
        case .decided(.needMoreData): .notAnImage(reason: "truncated header")  // never for a whole body
        case .cutHeader(let family, signed: true): .cut(reason: "the body ends in the \(family) headers")
        case .cutHeader(let family, signed: false): .notAnImage(reason: "truncated \(family) header")
        }
    }

    private enum Sniffed {
        case decided(ImageInspection)
        /// A whole body ended before the headers did; `signed` when it holds the family's whole
        /// signature (``Family/signatureLength(_:)``).
        case cutHeader(family: String, signed: Bool)
    }

    private static func sniff(_ bytes: UnsafeRawBufferPointer, isComplete: Bool) -> Sniffed {
        guard let first = bytes.first else {
            return .decided(isComplete ? .notAnImage(reason: "empty body") : .needMoreData)
        }
        let view = ByteView(bytes)
        // Names the format being parsed, for the reason given when a whole body is too short.
        let family: Family
        do throws(SniffStop) {
            let info: ImageInfo
            switch first {
            case 0xFF:
                family = .jpeg
                info = try parseJPEG(view)
            case 0x89:
                family = .png
                info = try parsePNG(view)
            case UInt8(ascii: "G"):
                family = .gif
                info = try parseGIF(view, isComplete: isComplete)
            case UInt8(ascii: "R"):
                family = .webp
                info = try parseWebP(view, isComplete: isComplete)
            case UInt8(ascii: "B"):
                family = .bmp
                info = try parseBMP(view)
            case UInt8(ascii: "I"), UInt8(ascii: "M"):
                family = .tiff
                info = try parseTIFF(view)
            case 0x00:
                // AVIF or HEIC is only known once the brands are read.
                family = .isobmff
                info = try parseISOBMFF(view)
            default:
                return .decided(.notAnImage(reason: "unrecognised signature"))
            }
            guard info.width > 0, info.height > 0 else {
                return .decided(.notAnImage(reason: "\(info.format.rawValue) has a zero dimension"))
            }
            return .decided(.image(info))
        } catch {
            switch error {
            case .needMore:
                guard isComplete else { return .decided(.needMoreData) }
                return .cutHeader(family: family.rawValue, signed: bytes.count >= family.signatureLength(view))
            case .invalid(let reason):
                return .decided(.notAnImage(reason: reason))
            }
        }
    }

    /// The format family that a body's first byte picks, named as results name it.
    private enum Family: String {
        case jpeg = "JPEG", png = "PNG", gif = "GIF", webp = "WebP", bmp = "BMP", tiff = "TIFF"
        case isobmff = "ISOBMFF"

        /// The leading bytes that the family's parser checks before it reads anything else, so
        /// that a parser that ran out of bytes after them has seen its format's signature: JPEG
        /// `FF D8 FF`, the PNG signature, `GIF87a`/`GIF89a`, `RIFF….WEBP`, a TIFF byte order and
        /// version, a BMP `BM` and its info header's size, an ISOBMFF `ftyp` box with a brand of
        /// ours.
        func signatureLength(_ view: ByteView) -> Int {
            switch self {
            case .jpeg: 3
            case .png: 8
            case .gif: 6
            case .webp: 12
            case .bmp: 18
            case .tiff: 4
            case .isobmff: (try? view.u32be(0)).map { max(16, Int($0)) } ?? Int.max
            }
        }
    }

    /// Inspects a whole body: the same as `inspect(_:isComplete: true)`.
    public static func inspect(_ bytes: [UInt8]) -> ImageInspection {
        bytes.withUnsafeBytes { inspect($0, isComplete: true) }
    }
}

// MARK: - Reading

extension ImageSniffer {
    /// Why a parser stopped without an answer.
    enum SniffStop: Error {
        /// A read went past the bytes available.
        case needMore
        /// The bytes cannot be a valid image of the format; the reason is short and names no URL.
        case invalid(String)
    }

    /// Bounds-checked, big- and little-endian reads over a borrowed buffer. Reads past the end throw
    /// ``SniffStop/needMore``.
    struct ByteView {
        let bytes: UnsafeRawBufferPointer

        init(_ bytes: UnsafeRawBufferPointer) {
            self.bytes = bytes
        }

        var count: Int { bytes.count }

        @inline(__always)
        func has(_ offset: Int, _ length: Int) -> Bool {
            offset >= 0 && length >= 0 && length <= bytes.count && offset <= bytes.count - length
        }

        @inline(__always)
        func require(_ offset: Int, _ length: Int) throws(SniffStop) {
            guard has(offset, length) else { throw .needMore }
        }

        @inline(__always)
        func u8(_ offset: Int) throws(SniffStop) -> UInt8 {
            try require(offset, 1)
            return bytes[offset]
        }

        func u16be(_ offset: Int) throws(SniffStop) -> UInt16 {
            try require(offset, 2)
            return UInt16(bytes[offset]) << 8 | UInt16(bytes[offset + 1])
        }

        func u16le(_ offset: Int) throws(SniffStop) -> UInt16 {
            try require(offset, 2)
            return UInt16(bytes[offset + 1]) << 8 | UInt16(bytes[offset])
        }

        func u24le(_ offset: Int) throws(SniffStop) -> UInt32 {
            try require(offset, 3)
            return UInt32(bytes[offset + 2]) << 16 | UInt32(bytes[offset + 1]) << 8 | UInt32(bytes[offset])
        }

        func u32be(_ offset: Int) throws(SniffStop) -> UInt32 {
            try require(offset, 4)
            return UInt32(bytes[offset]) << 24 | UInt32(bytes[offset + 1]) << 16
                | UInt32(bytes[offset + 2]) << 8 | UInt32(bytes[offset + 3])
        }

        func u32le(_ offset: Int) throws(SniffStop) -> UInt32 {
            try require(offset, 4)
            return UInt32(bytes[offset + 3]) << 24 | UInt32(bytes[offset + 2]) << 16
                | UInt32(bytes[offset + 1]) << 8 | UInt32(bytes[offset])
        }

        func u64be(_ offset: Int) throws(SniffStop) -> UInt64 {
            try require(offset, 8)
            return UInt64(try u32be(offset)) << 32 | UInt64(try u32be(offset + 4))
        }

        func u64le(_ offset: Int) throws(SniffStop) -> UInt64 {
            try require(offset, 8)
            return UInt64(try u32le(offset + 4)) << 32 | UInt64(try u32le(offset))
        }

        /// A big- or little-endian unsigned integer of 0, 4 or 8 bytes (ISOBMFF `iloc` fields).
        func uintBE(_ offset: Int, size: Int) throws(SniffStop) -> UInt64 {
            switch size {
            case 0: return 0
            case 4: return UInt64(try u32be(offset))
            case 8: return try u64be(offset)
            default: throw .invalid("bad ISOBMFF field size")
            }
        }

        /// Checks `literal` at `offset` byte by byte, so that a mismatch in the bytes already present
        /// is reported at once and a missing byte only asks for more.
        func expect(_ literal: [UInt8], at offset: Int, else reason: String) throws(SniffStop) {
            for (i, expected) in literal.enumerated() {
                guard try u8(offset + i) == expected else { throw .invalid(reason) }
            }
        }
    }

    /// A four-character code as a big-endian integer.
    @inline(__always)
    static func fourCC(_ a: UInt8, _ b: UInt8, _ c: UInt8, _ d: UInt8) -> UInt32 {
        UInt32(a) << 24 | UInt32(b) << 16 | UInt32(c) << 8 | UInt32(d)
    }

    /// A four-character code from four ASCII characters.
    static func fourCC(_ s: StaticString) -> UInt32 {
        precondition(s.utf8CodeUnitCount == 4 && s.hasPointerRepresentation)
        let p = s.utf8Start
        return fourCC(p[0], p[1], p[2], p[3])
    }
}
