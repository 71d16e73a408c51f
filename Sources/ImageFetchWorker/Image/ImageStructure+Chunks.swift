// PNG, GIF and WebP: formats made of a run of chunks or blocks, walked to their end.

extension ImageSniffer {
    /// Every chunk from `IHDR` to `IEND`, each with its length inside the body, a name of four
    /// letters and a matching CRC-32 (libpng refuses a bad CRC in a critical chunk; Pillow in any
    /// chunk it reads). `IEND` before any `IDAT` is refused.
    static func walkPNG(_ v: ByteView) throws(SniffStop) {
        guard try v.u64be(0) == 0x8950_4E47_0D0A_1A0A else { throw .invalid("not a PNG signature") }
        var position = 8
        var sawImageData = false
        while true {
            let length = Int(try v.u32be(position))
            guard length <= Int(Int32.max) else { throw .invalid("bad PNG chunk length") }
            let type = try v.u32be(position + 4)
            guard isChunkName(type) else { throw .invalid("bad PNG chunk name") }
            try v.require(position, 12 + length)
            let crc = crc32Sliced(v, from: position + 4, count: 4 + length)
            guard crc == (try v.u32be(position + 8 + length)) else { throw .invalid("bad PNG chunk CRC") }
            switch type {
            case fourCC("IDAT"):
                sawImageData = true
            case fourCC("IEND"):
                guard sawImageData else { throw .invalid("PNG has no image data") }
                return
            default:
                break
            }
            position += 12 + length
        }
    }

    /// Whether each of the four bytes is an ASCII letter, as PNG chunk names must be.
    @inline(__always)
    private static func isChunkName(_ type: UInt32) -> Bool {
        // Clearing bit 5 upper-cases a letter; each byte must then be A…Z.
        let upper = type & 0xDFDF_DFDF
        for shift in stride(from: 0, through: 24, by: 8) {
            let byte = (upper >> UInt32(shift)) & 0xFF
            guard byte >= 0x41 && byte <= 0x5A else { return false }
        }
        return true
    }

    /// The blocks from the logical screen to the trailer: extensions and images, each with its
    /// sub-blocks up to their zero terminator. A byte that starts no block ends the image once a
    /// frame has been read (browsers, following Mozilla, treat it as the trailer), and is refused
    /// before one; the bytes ending before the trailer are a cut file.
    static func walkGIF(_ v: ByteView) throws(SniffStop) {
        try parseGIFHeader(v)
        let packed = try v.u8(10)
        var position = 13
        if packed & 0x80 != 0 { position += 3 << (Int(packed & 0x07) + 1) }  // global colour table
        var frames = 0
        while true {
            switch try v.u8(position) {
            case 0x3B:
                guard frames > 0 else { throw .invalid("GIF has no image") }
                return
            case 0x21:
                _ = try v.u8(position + 1)  // the extension's label
                position = try endOfSubBlocks(v, from: position + 2)
            case 0x2C:
                try v.require(position, 10)
                let flags = v.bytes[position + 9]
                position += 10
                if flags & 0x80 != 0 { position += 3 << (Int(flags & 0x07) + 1) }  // local colour table
                _ = try v.u8(position)  // LZW minimum code size
                position = try endOfSubBlocks(v, from: position + 1)
                frames += 1
            default:
                guard frames > 0 else { throw .invalid("GIF block of unknown type") }
                // A stray byte after a frame ends the image, as browsers have it; but nothing but
                // zeros to the end is a file cut inside its last frame and padded, with no trailer.
                if v.bytes[position...].allSatisfy({ $0 == 0 }) { throw .needMore }
                return
            }
        }
    }

    /// The offset after the data sub-blocks that start at `start`: each a length byte and that
    /// many bytes, ended by a zero length that must be inside the body.
    private static func endOfSubBlocks(_ v: ByteView, from start: Int) throws(SniffStop) -> Int {
        var position = start
        while true {
            let length = Int(try v.u8(position))
            position += 1
            if length == 0 { return position }
            position += length
        }
    }

    /// The RIFF size covers the body (a shorter body is cut), then every chunk inside it, each
    /// padded to an even size and none overrunning it, and at least one with image data of the
    /// kind the header says: frames (`ANMF`) when a `VP8X` header sets its animation flag, else one
    /// image (`VP8 `, `VP8L`), as libwebp requires.
    static func walkWebP(_ v: ByteView) throws(SniffStop) {
        guard try v.u32be(0) == fourCC("RIFF"), try v.u32be(8) == fourCC("WEBP") else {
            throw .invalid("not a WebP signature")
        }
        let riffSize = Int(try v.u32le(4))
        guard riffSize >= 12 else { throw .invalid("bad WebP RIFF size") }
        let end = 8 + riffSize
        try v.require(0, end)
        var animated = false
        if end >= 21, v.bytes.loadUnaligned(fromByteOffset: 12, as: UInt32.self).bigEndian == fourCC("VP8X") {
            animated = try v.u8(20) & 0x02 != 0
        }
        var position = 12
        var sawStill = false
        var sawFrame = false
        while position < end {
            guard position + 8 <= end else { throw .invalid("WebP chunk overruns the RIFF size") }
            let type = v.bytes.loadUnaligned(fromByteOffset: position, as: UInt32.self).bigEndian
            let size = Int(try v.u32le(position + 4))
            let dataEnd = position + 8 + size
            guard dataEnd <= end else { throw .invalid("WebP chunk overruns the RIFF size") }
            switch type {
            case fourCC("VP8 "), fourCC("VP8L"): sawStill = true
            case fourCC("ANMF"): sawFrame = true
            default: break
            }
            // The padding byte of an odd-sized last chunk may be missing; libwebp allows it.
            position = dataEnd + (size & 1)
        }
        guard sawStill || sawFrame else { throw .invalid("WebP has no image data") }
        guard animated ? sawFrame : sawStill else {
            throw .invalid("WebP has no image data of the kind its header says")
        }
    }
}
