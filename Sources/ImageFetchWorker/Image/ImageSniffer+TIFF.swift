// TIFF and BigTIFF, and the EXIF orientation, which is a TIFF structure inside JPEG, PNG and WebP.

extension ImageSniffer {
    /// The most IFD0 entries looked at before giving up.
    static let maxTIFFEntries = 1024

    /// Tags of IFD0 the sniffer reads.
    private enum TIFFTag {
        static let width: UInt16 = 256
        static let height: UInt16 = 257
        static let orientation: UInt16 = 274
    }

    /// Byte order and offset size of a TIFF (classic: 32-bit offsets) or BigTIFF (64-bit).
    struct TIFFReader {
        let v: ByteView
        let bigEndian: Bool
        let big: Bool

        func u16(_ o: Int) throws(SniffStop) -> UInt16 { bigEndian ? try v.u16be(o) : try v.u16le(o) }
        func u32(_ o: Int) throws(SniffStop) -> UInt32 { bigEndian ? try v.u32be(o) : try v.u32le(o) }
        func u64(_ o: Int) throws(SniffStop) -> UInt64 { bigEndian ? try v.u64be(o) : try v.u64le(o) }
        /// An offset or count field: 32 bits in TIFF, 64 in BigTIFF.
        func word(_ o: Int) throws(SniffStop) -> UInt64 { big ? try u64(o) : UInt64(try u32(o)) }
    }

    static func parseTIFF(_ v: ByteView) throws(SniffStop) -> ImageInfo {
        let order = try v.u8(0)
        let bigEndian = order == 0x4D
        guard try v.u8(1) == order else { throw .invalid("not a TIFF signature") }
        let version = bigEndian ? try v.u16be(2) : try v.u16le(2)
        let big: Bool
        switch version {
        case 42: big = false
        case 43: big = true
        default: throw .invalid("not a TIFF signature")
        }
        let r = TIFFReader(v: v, bigEndian: bigEndian, big: big)
        if big {
            // BigTIFF: offset size 8, then a reserved zero, then the 64-bit IFD offset.
            guard try r.u16(4) == 8, try r.u16(6) == 0 else { throw .invalid("bad BigTIFF header") }
        }
        let ifdOffset = try r.word(big ? 8 : 4)
        guard ifdOffset >= (big ? 16 : 8), ifdOffset <= UInt64(Int.max / 2) else {
            throw .invalid("bad TIFF IFD offset")
        }
        let ifd = Int(ifdOffset)
        let entries = big ? try r.u64(ifd) : UInt64(try r.u16(ifd))
        guard entries > 0, entries <= UInt64(maxTIFFEntries) else { throw .invalid("bad TIFF IFD entry count") }
        let entrySize = big ? 20 : 12
        let first = ifd + (big ? 8 : 2)

        var width: Int?
        var height: Int?
        var orientation: Int?
        for index in 0..<Int(entries) {
            let entry = first + entrySize * index
            let tag = try r.u16(entry)
            let type = try r.u16(entry + 2)
            let count = try r.word(entry + 4)
            let valueAt = entry + (big ? 12 : 8)
            switch tag {
            case TIFFTag.width, TIFFTag.height:
                let value: UInt64
                switch type {
                case 3: value = UInt64(try r.u16(valueAt))  // SHORT, left-justified in the value field
                case 4: value = UInt64(try r.u32(valueAt))  // LONG
                case 16 where big: value = try r.u64(valueAt)  // LONG8
                default: throw .invalid("bad TIFF dimension type")
                }
                guard count >= 1 else { throw .invalid("bad TIFF dimension count") }
                guard value <= UInt64(UInt32.max) else { throw .invalid("bad TIFF dimensions") }
                if tag == TIFFTag.width { width = width ?? Int(value) } else { height = height ?? Int(value) }
            case TIFFTag.orientation where type == 3 && count >= 1 && orientation == nil:
                let value = Int(try r.u16(valueAt))
                if (1...8).contains(value) { orientation = value }
            default:
                break
            }
        }
        guard let width, let height else { throw .invalid("TIFF IFD0 has no dimensions") }
        var info = ImageInfo(format: .tiff, width: width, height: height)
        info.orientation = orientation
        return info
    }

    /// The orientation (1…8) in the IFD0 of the EXIF TIFF structure at `tiffAt`, which must end by
    /// `end`; nil when there is none or the structure is broken (EXIF is optional: decoders ignore it).
    static func exifOrientation(_ v: ByteView, tiffAt start: Int, end: Int) -> Int? {
        guard start >= 0, end <= v.count, start + 8 <= end else { return nil }
        let bigEndian: Bool
        switch (v.bytes[start], v.bytes[start + 1]) {
        case (0x4D, 0x4D): bigEndian = true
        case (0x49, 0x49): bigEndian = false
        default: return nil
        }
        let r = TIFFReader(v: v, bigEndian: bigEndian, big: false)
        func inside(_ o: Int, _ n: Int) -> Bool { o >= start && o <= end - n }
        guard (try? r.u16(start + 2)) == 42, let offset = try? r.u32(start + 4), offset <= UInt32(Int32.max) else {
            return nil
        }
        let ifd = start + Int(offset)
        guard inside(ifd, 2), let entries = try? r.u16(ifd) else { return nil }
        for index in 0..<min(Int(entries), maxTIFFEntries) {
            let entry = ifd + 2 + 12 * index
            guard inside(entry, 12), let tag = try? r.u16(entry) else { return nil }
            guard tag == TIFFTag.orientation else { continue }
            guard (try? r.u16(entry + 2)) == 3, let value = try? r.u16(entry + 8), (1...8).contains(value) else {
                return nil
            }
            return Int(value)
        }
        return nil
    }

    /// The EXIF orientation code of a HEIF rotation (`irot`, quarter turns anticlockwise) followed
    /// by a mirroring (`imir`: 0 exchanges top and bottom, 1 left and right, as libheif and libavif
    /// read it).
    static func orientation(quarterTurnsAnticlockwise turns: Int, mirrorAxis: Int?) -> Int {
        // As (mirror first, then quarter turns clockwise), the form EXIF codes are defined in.
        var clockwise = (4 - turns % 4) % 4
        var mirrored = false
        if let mirrorAxis {
            mirrored = true
            // A flip after a turn of r is the flip before a turn of -r; a vertical flip is a
            // horizontal flip and a half turn.
            clockwise = mirrorAxis == 1 ? (4 - clockwise) % 4 : (6 - clockwise) % 4
        }
        // EXIF: 1 none, 6 quarter clockwise, 3 half, 8 quarter anticlockwise; mirrored first:
        // 2 none, 7 quarter clockwise, 4 half, 5 quarter anticlockwise.
        return mirrored ? [2, 7, 4, 5][clockwise] : [1, 6, 3, 8][clockwise]
    }
}
