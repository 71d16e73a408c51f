/// Recognises an image format and reads its width and height from the header, without decoding.
///
/// The sniffer is meant to be called again and again on a growing prefix while a body downloads:
/// it dispatches on the first byte, and every format parser reads only the few bytes it needs, so a
/// call that cannot decide yet costs a handful of bounds checks (JPEG walks its segment headers,
/// TIFF its first IFD, AVIF/HEIC the boxes before `meta`). Every read is bounds-checked, every
/// loop has a fixed upper bound, and no input makes it trap.
///
/// Recognised signatures:
/// - JPEG: `FF D8 FF`, then the segments are walked to the first frame header (SOF0…SOF15, except
///   DHT `C4`, JPG `C8` and DAC `CC`). Fill bytes and standalone markers are skipped; bytes between
///   segments that are not a marker make it `notAnImage`.
/// - PNG: the 8-byte signature, then the `IHDR` chunk.
/// - GIF: `GIF87a` or `GIF89a`, then the logical screen descriptor.
/// - WebP: `RIFF….WEBP` with a first chunk `VP8 `, `VP8L` or `VP8X` (canvas size).
/// - BMP: `BM`, then a BITMAPCOREHEADER (12 bytes) or a larger info header; a negative height
///   (top-down bitmap) counts by its magnitude.
/// - TIFF: `II*\0` or `MM\0*`, then tags 256 (width) and 257 (height) of IFD0, SHORT or LONG.
/// - AVIF and HEIC: an ISOBMFF `ftyp` box whose major brand, or else its first recognised
///   compatible brand, is `avif`/`avis` or one of `heic`, `heix`, `heim`, `heis`, `hevc`, `hevx`,
///   `hevm`, `hevs`; the size is read from the `ispe` properties in `meta`→`iprp`→`ipco`. When
///   there are several `ispe` boxes (thumbnails, tiles, alpha planes) the one with the largest area
///   is taken, the first of equals: the primary image, or the grid that tiles it, is the largest.
///   An `ispe` with a zero dimension makes the file `notAnImage`. Rotation (`irot`) is not applied.
public enum ImageSniffer {
    /// Inspects a prefix of a body (`isComplete: false`) or a whole body (`isComplete: true`).
    ///
    /// With a prefix it answers ``ImageInspection/needMoreData`` until it can decide; with the
    /// whole body it never does. Once a prefix gives `.image` or `.notAnImage`, every longer prefix
    /// of the same body gives the same answer.
    public static func inspect(_ bytes: UnsafeRawBufferPointer, isComplete: Bool) -> ImageInspection {
        guard let first = bytes.first else {
            return isComplete ? .notAnImage(reason: "empty body") : .needMoreData
        }
        let view = ByteView(bytes)
        // Names the format being parsed, for the reason given when a whole body is too short.
        let family: String
        do throws(SniffStop) {
            let info: ImageInfo
            switch first {
            case 0xFF:
                family = "JPEG"
                info = try parseJPEG(view)
            case 0x89:
                family = "PNG"
                info = try parsePNG(view)
            case UInt8(ascii: "G"):
                family = "GIF"
                info = try parseGIF(view)
            case UInt8(ascii: "R"):
                family = "WebP"
                info = try parseWebP(view)
            case UInt8(ascii: "B"):
                family = "BMP"
                info = try parseBMP(view)
            case UInt8(ascii: "I"), UInt8(ascii: "M"):
                family = "TIFF"
                info = try parseTIFF(view)
            case 0x00:
                // AVIF or HEIC is only known once the brands are read.
                family = "ISOBMFF"
                info = try parseISOBMFF(view)
            default:
                return .notAnImage(reason: "unrecognised signature")
            }
            guard info.width > 0, info.height > 0 else {
                return .notAnImage(reason: "\(info.format.rawValue) has a zero dimension")
            }
            return .image(info)
        } catch {
            switch error {
            case .needMore:
                if isComplete {
                    return .notAnImage(reason: "truncated \(family) header")
                }
                return .needMoreData
            case .invalid(let reason):
                return .notAnImage(reason: reason)
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

// MARK: - Simple formats

extension ImageSniffer {
    private static let pngSignature: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
    private static let ihdr: [UInt8] = Array("IHDR".utf8)
    private static let gif8: [UInt8] = Array("GIF8".utf8)
    private static let riff: [UInt8] = Array("RIFF".utf8)
    private static let webp: [UInt8] = Array("WEBP".utf8)
    private static let vp8StartCode: [UInt8] = [0x9D, 0x01, 0x2A]
    private static let tiffLE: [UInt8] = [0x49, 0x49, 0x2A, 0x00]
    private static let tiffBE: [UInt8] = [0x4D, 0x4D, 0x00, 0x2A]
    static let ftypType: [UInt8] = Array("ftyp".utf8)

    static func parsePNG(_ v: ByteView) throws(SniffStop) -> ImageInfo {
        try v.expect(pngSignature, at: 0, else: "not a PNG signature")
        let length = try v.u32be(8)
        try v.expect(ihdr, at: 12, else: "PNG does not start with IHDR")
        guard length == 13 else { throw .invalid("bad PNG IHDR length") }
        let width = try v.u32be(16)
        let height = try v.u32be(20)
        guard width <= Int32.max, height <= Int32.max else { throw .invalid("bad PNG dimensions") }
        return ImageInfo(format: .png, width: Int(width), height: Int(height))
    }

    static func parseGIF(_ v: ByteView) throws(SniffStop) -> ImageInfo {
        try v.expect(gif8, at: 0, else: "not a GIF signature")
        let version = try v.u8(4)
        guard version == UInt8(ascii: "7") || version == UInt8(ascii: "9") else {
            throw .invalid("unknown GIF version")
        }
        guard try v.u8(5) == UInt8(ascii: "a") else { throw .invalid("unknown GIF version") }
        let width = try v.u16le(6)
        let height = try v.u16le(8)
        return ImageInfo(format: .gif, width: Int(width), height: Int(height))
    }

    static func parseWebP(_ v: ByteView) throws(SniffStop) -> ImageInfo {
        try v.expect(riff, at: 0, else: "not a RIFF signature")
        try v.expect(webp, at: 8, else: "RIFF file is not WebP")
        let chunk = try v.u32be(12)
        switch chunk {
        case fourCC("VP8 "):
            // Frame tag (3 bytes, bit 0 clear on a key frame), start code, 14-bit sizes + 2-bit scale.
            guard try v.u8(20) & 0x01 == 0 else { throw .invalid("WebP VP8 does not start with a key frame") }
            try v.expect(vp8StartCode, at: 23, else: "bad WebP VP8 start code")
            let width = try v.u16le(26) & 0x3FFF
            let height = try v.u16le(28) & 0x3FFF
            return ImageInfo(format: .webp, width: Int(width), height: Int(height))
        case fourCC("VP8L"):
            guard try v.u8(20) == 0x2F else { throw .invalid("bad WebP VP8L signature") }
            let bits = try v.u32le(21)
            guard bits >> 29 == 0 else { throw .invalid("unknown WebP VP8L version") }
            let width = (bits & 0x3FFF) + 1
            let height = ((bits >> 14) & 0x3FFF) + 1
            return ImageInfo(format: .webp, width: Int(width), height: Int(height))
        case fourCC("VP8X"):
            let width = try v.u24le(24) + 1
            let height = try v.u24le(27) + 1
            return ImageInfo(format: .webp, width: Int(width), height: Int(height))
        default:
            throw .invalid("unsupported WebP chunk")
        }
    }

    static func parseBMP(_ v: ByteView) throws(SniffStop) -> ImageInfo {
        try v.expect([0x42, 0x4D], at: 0, else: "not a BMP signature")
        let headerSize = try v.u32le(14)
        switch headerSize {
        case 12:
            // BITMAPCOREHEADER: unsigned 16-bit width and height, then planes.
            let width = try v.u16le(18)
            let height = try v.u16le(20)
            guard try v.u16le(22) == 1 else { throw .invalid("bad BMP plane count") }
            return ImageInfo(format: .bmp, width: Int(width), height: Int(height))
        case 16, 40, 52, 56, 64, 108, 124:
            // BITMAPINFOHEADER and its successors (and OS/2 2.x): signed 32-bit width and height.
            let width = Int(Int32(bitPattern: try v.u32le(18)))
            let height = Int(Int32(bitPattern: try v.u32le(22)))
            guard try v.u16le(26) == 1 else { throw .invalid("bad BMP plane count") }
            guard width >= 0 else { throw .invalid("negative BMP width") }
            return ImageInfo(format: .bmp, width: width, height: abs(height))
        default:
            throw .invalid("unknown BMP header size")
        }
    }

    /// The most IFD0 entries looked at before giving up.
    static let maxTIFFEntries = 1024

    static func parseTIFF(_ v: ByteView) throws(SniffStop) -> ImageInfo {
        let bigEndian = try v.u8(0) == 0x4D
        try v.expect(bigEndian ? tiffBE : tiffLE, at: 0, else: "not a TIFF signature")
        func u16(_ o: Int) throws(SniffStop) -> UInt16 { bigEndian ? try v.u16be(o) : try v.u16le(o) }
        func u32(_ o: Int) throws(SniffStop) -> UInt32 { bigEndian ? try v.u32be(o) : try v.u32le(o) }

        let ifd = Int(try u32(4))
        guard ifd >= 8 else { throw .invalid("bad TIFF IFD offset") }
        let entries = Int(try u16(ifd))
        guard entries > 0, entries <= maxTIFFEntries else { throw .invalid("bad TIFF IFD entry count") }
        var width: Int?
        var height: Int?
        for index in 0..<entries {
            let entry = ifd + 2 + 12 * index
            let tag = try u16(entry)
            guard tag == 256 || tag == 257 else { continue }
            let value: Int
            switch try u16(entry + 2) {
            case 3: value = Int(try u16(entry + 8))  // SHORT, left-justified in the value field
            case 4: value = Int(try u32(entry + 8))  // LONG
            default: throw .invalid("bad TIFF dimension type")
            }
            guard try u32(entry + 4) >= 1 else { throw .invalid("bad TIFF dimension count") }
            if tag == 256 { width = width ?? value } else { height = height ?? value }
            if let width, let height {
                return ImageInfo(format: .tiff, width: width, height: height)
            }
        }
        throw .invalid("TIFF IFD0 has no dimensions")
    }
}
