// BMP, TIFF and ISOBMFF (HEIC, AVIF): formats whose data is found through offsets, which must
// point inside the body.

extension ImageSniffer {
    // MARK: BMP

    /// The pixel data from `bfOffBits` lies inside the body: the rows of an uncompressed bitmap
    /// (each padded to four bytes), an RLE stream up to its end-of-bitmap code, or the embedded
    /// JPEG or PNG of `biSizeImage` bytes, itself walked to its end.
    static func walkBMP(_ v: ByteView) throws(SniffStop) {
        let pixelsAt = Int(try v.u32le(10))
        let headerSize = try v.u32le(14)
        let width: Int, height: Int, bitsPerPixel: Int, compression: UInt32
        if headerSize == 12 {
            width = Int(try v.u16le(18))
            height = Int(try v.u16le(20))
            bitsPerPixel = Int(try v.u16le(24))
            compression = 0
        } else {
            width = Int(Int32(bitPattern: try v.u32le(18)))
            height = abs(Int(Int32(bitPattern: try v.u32le(22))))
            bitsPerPixel = Int(try v.u16le(28))
            compression = headerSize >= 20 ? try v.u32le(30) : 0
        }
        switch compression {
        case 0, 3, 6:
            // BI_RGB, BI_BITFIELDS, BI_ALPHABITFIELDS: rows of whole 32-bit words.
            guard [1, 2, 4, 8, 16, 24, 32].contains(bitsPerPixel) else { throw .invalid("bad BMP bits per pixel") }
            let (bits, overflow1) = bitsPerPixel.multipliedReportingOverflow(by: width)
            let rowBytes = (bits + 31) / 32 * 4
            let (size, overflow2) = rowBytes.multipliedReportingOverflow(by: height)
            guard !overflow1, !overflow2 else { throw .needMore }
            try v.require(pixelsAt, size)
        case 1, 2:
            try walkBMPRunLengths(v, from: pixelsAt, fourBit: compression == 2, rows: height)
        case 4, 5:
            // BI_JPEG, BI_PNG: an embedded file of biSizeImage bytes, walked as any other, or
            // any bytes of that size (a page of HTML) would pass for the image.
            let size = Int(try v.u32le(34))
            guard size > 0 else { throw .invalid("bad BMP image size") }
            try v.require(pixelsAt, size)
            // OS/2 2.x's 64-byte header says RLE24 with 4, a stream this walk does not read.
            if compression == 4 && headerSize == 64 { return }
            let embedded = ByteView(UnsafeRawBufferPointer(rebasing: v.bytes[pixelsAt..<(pixelsAt + size)]))
            if compression == 4 { try walkJPEG(embedded) } else { try walkPNG(embedded) }
        default:
            throw .invalid("unknown BMP compression")
        }
    }

    /// An RLE8 or RLE4 stream up to its end-of-bitmap code (`00 01`), or up to the end of its
    /// last row. Each step reads at least two bytes, so the walk ends within the body.
    private static func walkBMPRunLengths(_ v: ByteView, from start: Int, fourBit: Bool, rows: Int) throws(SniffStop) {
        var position = start
        var row = 0
        while row < rows {
            let count = Int(try v.u8(position))
            let code = Int(try v.u8(position + 1))
            position += 2
            guard count == 0 else { continue }  // a run: count pixels of one value
            switch code {
            case 0: row += 1  // end of line
            case 1: return  // end of bitmap
            case 2:
                try v.require(position, 2)  // delta: right, down
                row += Int(v.bytes[position + 1])
                position += 2
            default:
                // Absolute mode: `code` pixels, then padding to a 16-bit boundary.
                let bytes = fourBit ? (code + 1) / 2 : code
                let padded = bytes + (bytes & 1)
                try v.require(position, padded)
                position += padded
            }
        }
    }

    // MARK: TIFF

    /// The most IFDs followed in the chain from IFD0.
    static let maxTIFFDirectories = 64

    /// Every IFD of the chain from IFD0 lies inside the body, with every value stored outside its
    /// entry, and so does every strip or tile (offset and byte count). An IFD without strip or
    /// tile offsets holds no image and is refused, as libtiff refuses it.
    static func walkTIFF(_ v: ByteView) throws(SniffStop) {
        var reads = 0
        try walkTIFF(v, reads: &reads)
    }

    /// ``walkTIFF(_:)``, counting the IFD entries and array elements it reads.
    static func walkTIFF(_ v: ByteView, reads: inout Int) throws(SniffStop) {
        let bigEndian = try v.u8(0) == 0x4D
        let big = (bigEndian ? try v.u16be(2) : try v.u16le(2)) == 43
        let r = TIFFReader(v: v, bigEndian: bigEndian, big: big)
        let entrySize = big ? 20 : 12
        let inline = big ? 8 : 4
        var next = try r.word(big ? 8 : 4)
        var isFirst = true
        // The file decides what each IFD points at. IFD0 costs at most about its body; the later
        // ones share a budget of the body's size and are not walked past it, and an IFD seen
        // before ends the chain (libtiff stops there too), so the walk stays linear.
        var visited: [UInt64] = []
        let budget = reads + v.count
        for _ in 0..<maxTIFFDirectories {
            guard next != 0, !visited.contains(next) else { return }
            visited.append(next)
            guard next <= UInt64(Int.max / 2) else { throw .needMore }
            let ifd = Int(next)
            let entries = Int(big ? min(try r.u64(ifd), UInt64(Int32.max)) : UInt64(try r.u16(ifd)))
            let first = ifd + (big ? 8 : 2)
            try v.require(first, entries * entrySize + inline)
            guard isFirst || reads + entries <= budget else { return }
            var offsets: (type: UInt16, count: Int, at: Int)?
            var counts: (type: UInt16, count: Int, at: Int)?
            var tiled = false
            // For libtiff's estimate of a single uncompressed strip: the first value of each tag.
            var layout = UncompressedLayout()
            for index in 0..<entries {
                reads += 1
                let entry = first + entrySize * index
                let tag = try r.u16(entry)
                let type = try r.u16(entry + 2)
                let count = try r.word(entry + 4)
                let typeSize: UInt64
                switch type {
                case 1, 2, 6, 7: typeSize = 1
                case 3, 8: typeSize = 2
                case 4, 9, 11, 13: typeSize = 4
                case 5, 10, 12, 16, 17, 18: typeSize = 8
                default: continue  // an unknown type: libtiff ignores the entry
                }
                let (bytes, overflow) = count.multipliedReportingOverflow(by: typeSize)
                guard !overflow, bytes <= UInt64(Int.max / 2) else { throw .needMore }
                var valueAt = entry + (big ? 12 : 8)
                if bytes > UInt64(inline) {
                    let at = try r.word(valueAt)
                    guard at <= UInt64(Int.max / 2) else { throw .needMore }
                    valueAt = Int(at)
                    try v.require(valueAt, Int(bytes))
                }
                switch tag {
                case 273, 324:  // StripOffsets, TileOffsets
                    offsets = (type, Int(count), valueAt)
                    tiled = tag == 324
                case 279, 325: counts = (type, Int(count), valueAt)  // StripByteCounts, TileByteCounts
                case 256, 257, 258, 259, 277, 284:
                    guard count >= 1, type == 3 || type == 4 || type == 16 else { break }
                    let value = try tiffArrayElement(r, type, at: valueAt, 0)
                    layout.set(tag: tag, Int(min(value, UInt64(Int.max))))
                default: break
                }
            }
            // IFD0 is the image; a later IFD (a thumbnail, a page) is checked where it has strips.
            guard let offsets, offsets.count > 0 else {
                if isFirst { throw .invalid("TIFF IFD0 has no strip or tile offsets") }
                next = try r.word(first + entries * entrySize)
                isFirst = false
                continue
            }
            guard isFirst || reads + offsets.count <= budget else { return }
            // libtiff refuses an image of several strips or tiles without their byte counts (but
            // for one strip per plane of a planar image, and old-style JPEG, whose counts it never
            // checks), pads a short list of counts with 0, and fails to read a strip whose count
            // is 0: the walk could not see where it ends.
            let countsNeeded = isFirst && offsets.count > 1 && layout.compression != 6
            if countsNeeded, counts == nil, !(layout.planar == 2 && offsets.count == layout.samples) {
                throw .invalid("TIFF strip without a byte count")
            }
            isFirst = false
            for index in 0..<offsets.count {
                reads += 1
                let offset = try tiffArrayElement(r, offsets.type, at: offsets.at, index)
                var length: UInt64 = 0
                if let counts, index < counts.count {
                    length = try tiffArrayElement(r, counts.type, at: counts.at, index)
                }
                // Offset and count both 0: a strip left out (a plane Pillow and libtiff skip).
                if countsNeeded, counts != nil, length == 0, offset != 0 {
                    throw .invalid("TIFF strip without a byte count")
                }
                var (end, overflow) = offset.addingReportingOverflow(length)
                let bogus = overflow || end > UInt64(v.count) || length == 0
                if bogus, offsets.count == 1, !tiled, let size = layout.stripSize {
                    // libtiff takes a single uncompressed strip's byte count that is missing, 0 or
                    // runs past the file as bogus and computes it from the image's size instead.
                    (end, overflow) = offset.addingReportingOverflow(UInt64(size))
                }
                guard !overflow, end <= UInt64(v.count) else { throw .needMore }
            }
            next = try r.word(first + entries * entrySize)
        }
        // The IFDs past the ones walked are not checked, but the chain must go on inside the
        // body: a file of more pages cut after the last one walked is cut.
        guard next != 0, !visited.contains(next) else { return }
        guard next <= UInt64(Int.max / 2) else { throw .needMore }
        try v.require(Int(next), big ? 8 : 2)
    }

    /// What libtiff needs to compute an uncompressed image's size: width, height, the first bits
    /// per sample, samples per pixel, compression; and the planar configuration, which decides
    /// whether several strips may go without byte counts.
    private struct UncompressedLayout {
        var width = 0, height = 0, bits = 1, samples = 1, compression = 1, planar = 1

        mutating func set(tag: UInt16, _ value: Int) {
            switch tag {
            case 256: width = value
            case 257: height = value
            case 258: bits = value
            case 259: compression = value
            case 284: planar = value
            default: samples = value
            }
        }

        /// The bytes of the whole image as one uncompressed strip; nil when compressed or too big.
        /// Every step reports its overflow: a LONG tag can set each factor to 2³² − 1.
        var stripSize: Int? {
            guard compression == 1 else { return nil }
            let (bitsPerPixel, o1) = bits.multipliedReportingOverflow(by: samples)
            let (bitsPerRow, o2) = width.multipliedReportingOverflow(by: bitsPerPixel)
            let (padded, o3) = bitsPerRow.addingReportingOverflow(7)
            let (size, o4) = (padded / 8).multipliedReportingOverflow(by: height)
            return o1 || o2 || o3 || o4 ? nil : size
        }
    }

    /// The `index`th SHORT, LONG or LONG8 of the array at `at`.
    private static func tiffArrayElement(
        _ r: TIFFReader, _ type: UInt16, at: Int, _ index: Int
    ) throws(SniffStop) -> UInt64 {
        switch type {
        case 3: return UInt64(try r.u16(at + 2 * index))
        case 4, 13: return UInt64(try r.u32(at + 4 * index))
        case 16, 18: return try r.u64(at + 8 * index)
        default: throw .invalid("bad TIFF offset type")
        }
    }

    // MARK: ISOBMFF

    /// The top-level boxes follow one another to the end of the body, none running past it; and
    /// every extent `iloc` places in the file (construction method 0) or in `idat` (method 1)
    /// lies inside it: the primary item's data, its grid's tiles, its thumbnails.
    static func walkISOBMFF(_ v: ByteView) throws(SniffStop) {
        var position = 0
        var meta: Box?
        while position < v.count {
            let box = try readBox(v, at: position, parentEnd: Int.max)
            let end = box.end == Int.max ? v.count : box.end
            guard end <= v.count else { throw .needMore }
            if box.type == fourCC("meta"), meta == nil {
                meta = Box(type: box.type, start: box.start, payload: box.payload, end: end)
            }
            position = end
        }
        guard let meta else { throw .invalid("ISOBMFF has no meta box") }
        let from = meta.payload + 4
        guard let iloc = try findChild(v, type: fourCC("iloc"), from: from, to: meta.end) else {
            throw .invalid("ISOBMFF has no item locations")
        }
        let idat = try findChild(v, type: fourCC("idat"), from: from, to: meta.end)
        try checkItemLocations(v, iloc: iloc, idat: idat)
    }

    /// Every extent of every item in `iloc` inside the file or inside `idat`.
    private static func checkItemLocations(_ v: ByteView, iloc: Box, idat: Box?) throws(SniffStop) {
        let version = try v.u8(iloc.payload)
        guard version <= 2 else { throw .invalid("unknown iloc version") }
        let sizes = try v.u8(iloc.payload + 4)
        let sizes2 = try v.u8(iloc.payload + 5)
        let offsetSize = Int(sizes >> 4), lengthSize = Int(sizes & 0x0F)
        let baseSize = Int(sizes2 >> 4), indexSize = version == 0 ? 0 : Int(sizes2 & 0x0F)
        var position = iloc.payload + 6
        let count = version < 2 ? Int(try v.u16be(position)) : Int(try v.u32be(position))
        position += version < 2 ? 2 : 4
        for _ in 0..<count {
            guard position < iloc.end else { throw .invalid("bad iloc box") }
            position += version < 2 ? 2 : 4  // item ID
            var method = 0
            if version >= 1 {
                method = Int(try v.u16be(position) & 0x0F)
                position += 2
            }
            position += 2  // data reference index
            let base = try v.uintBE(position, size: baseSize)
            position += baseSize
            let extents = Int(try v.u16be(position))
            position += 2
            // Extents without offset or length fields are the whole file: nothing to check, and
            // no field to move the walk forward.
            guard indexSize + offsetSize + lengthSize > 0 else { continue }
            for _ in 0..<extents {
                guard position < iloc.end else { throw .invalid("bad iloc box") }
                position += indexSize
                let offset = try v.uintBE(position, size: offsetSize)
                let length = try v.uintBE(position + offsetSize, size: lengthSize)
                position += offsetSize + lengthSize
                let (start, overflow1) = base.addingReportingOverflow(offset)
                let (end, overflow2) = start.addingReportingOverflow(length)
                guard !overflow1, !overflow2 else { throw .invalid("bad iloc extent") }
                switch method {
                case 0:
                    // A length of 0 means "to the end of the file".
                    guard end <= UInt64(v.count), start <= UInt64(v.count) else { throw .needMore }
                case 1:
                    guard let idat, end <= UInt64(idat.end - idat.payload) else {
                        throw .invalid("iloc extent outside idat")
                    }
                default:
                    break  // from another item: checked where that item is
                }
            }
        }
        guard position <= iloc.end else { throw .invalid("bad iloc box") }
    }
}
