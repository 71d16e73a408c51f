// PNG, WebP and BMP: formats whose size sits at a fixed place near the start.

extension ImageSniffer {
    private static let pngSignature: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
    private static let ihdr: [UInt8] = Array("IHDR".utf8)
    private static let riff: [UInt8] = Array("RIFF".utf8)
    private static let webp: [UInt8] = Array("WEBP".utf8)
    private static let vp8StartCode: [UInt8] = [0x9D, 0x01, 0x2A]

    /// The most PNG chunks looked at before the first `IDAT`; real files have a handful.
    static let maxPNGChunks = 1024

    /// CRC-32 (ISO 3309, as PNG uses it), table-driven.
    static let crcTable: [UInt32] = (0..<256).map { n -> UInt32 in
        var c = UInt32(n)
        for _ in 0..<8 { c = c & 1 == 1 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
        return c
    }

    static func crc32(_ v: ByteView, from start: Int, count: Int) -> UInt32 {
        var c: UInt32 = 0xFFFF_FFFF
        crcTable.withUnsafeBufferPointer { table in
            for i in start..<(start + count) {
                c = table[Int((c ^ UInt32(v.bytes[i])) & 0xFF)] ^ (c >> 8)
            }
        }
        return c ^ 0xFFFF_FFFF
    }

    static func parsePNG(_ v: ByteView) throws(SniffStop) -> ImageInfo {
        try v.expect(pngSignature, at: 0, else: "not a PNG signature")
        let length = try v.u32be(8)
        try v.expect(ihdr, at: 12, else: "PNG does not start with IHDR")
        guard length == 13 else { throw .invalid("bad PNG IHDR length") }
        try v.require(12, 21)  // type, 13 bytes of data, CRC
        guard crc32(v, from: 12, count: 17) == (try v.u32be(29)) else { throw .invalid("bad PNG IHDR CRC") }
        let width = try v.u32be(16)
        let height = try v.u32be(20)
        guard width <= Int32.max, height <= Int32.max else { throw .invalid("bad PNG dimensions") }
        let depth = try v.u8(24)
        let allowed: Bool
        switch try v.u8(25) {
        case 0: allowed = depth == 1 || depth == 2 || depth == 4 || depth == 8 || depth == 16  // greyscale
        case 3: allowed = depth == 1 || depth == 2 || depth == 4 || depth == 8  // palette
        case 2, 4, 6: allowed = depth == 8 || depth == 16  // RGB, grey + alpha, RGBA
        default: throw .invalid("bad PNG colour type")
        }
        guard allowed else { throw .invalid("bad PNG bit depth for its colour type") }
        guard try v.u8(26) == 0, try v.u8(27) == 0 else { throw .invalid("unknown PNG compression or filter method") }
        guard try v.u8(28) <= 1 else { throw .invalid("unknown PNG interlace method") }

        var info = ImageInfo(format: .png, width: Int(width), height: Int(height))
        var frames = 1
        var position = 33
        for _ in 0..<maxPNGChunks {
            let chunkLength = Int(try v.u32be(position))
            guard chunkLength <= Int(Int32.max) else { throw .invalid("bad PNG chunk length") }
            let type = try v.u32be(position + 4)
            let data = position + 8
            switch type {
            case fourCC("IDAT"):
                info.frames = frames
                info.animated = frames > 1
                return info
            case fourCC("IEND"):
                throw .invalid("PNG has no image data")
            case fourCC("acTL") where chunkLength == 8:
                // An acTL of zero frames is invalid; decoders then show the default image alone.
                frames = max(1, Int(try v.u32be(data)))
            case fourCC("eXIf"):
                try v.require(data, chunkLength)
                info.orientation = exifOrientation(v, tiffAt: data, end: data + chunkLength)
            default:
                break
            }
            position = data + chunkLength + 4
        }
        throw .invalid("too many PNG chunks before the image data")
    }

    private static let gif8: [UInt8] = Array("GIF8".utf8)
    static let exifHeader: [UInt8] = Array("Exif\0\0".utf8)

    static func parseGIFHeader(_ v: ByteView) throws(SniffStop) {
        try v.expect(gif8, at: 0, else: "not a GIF signature")
        let version = try v.u8(4)
        guard version == UInt8(ascii: "7") || version == UInt8(ascii: "9") else {
            throw .invalid("unknown GIF version")
        }
        guard try v.u8(5) == UInt8(ascii: "a") else { throw .invalid("unknown GIF version") }
    }

    static func parseWebP(_ v: ByteView, isComplete: Bool) throws(SniffStop) -> ImageInfo {
        try v.expect(riff, at: 0, else: "not a RIFF signature")
        try v.expect(webp, at: 8, else: "RIFF file is not WebP")
        let chunk = try v.u32be(12)
        var info: ImageInfo
        switch chunk {
        case fourCC("VP8 "):
            // Frame tag (3 bytes, bit 0 clear on a key frame), start code, 14-bit sizes + 2-bit scale.
            guard try v.u8(20) & 0x01 == 0 else { throw .invalid("WebP VP8 does not start with a key frame") }
            try v.expect(vp8StartCode, at: 23, else: "bad WebP VP8 start code")
            let width = try v.u16le(26) & 0x3FFF
            let height = try v.u16le(28) & 0x3FFF
            info = ImageInfo(format: .webp, width: Int(width), height: Int(height))
        case fourCC("VP8L"):
            guard try v.u8(20) == 0x2F else { throw .invalid("bad WebP VP8L signature") }
            let bits = try v.u32le(21)
            guard bits >> 29 == 0 else { throw .invalid("unknown WebP VP8L version") }
            let width = (bits & 0x3FFF) + 1
            let height = ((bits >> 14) & 0x3FFF) + 1
            info = ImageInfo(format: .webp, width: Int(width), height: Int(height))
        case fourCC("VP8X"):
            let flags = try v.u8(20)
            let width = try v.u24le(24) + 1
            let height = try v.u24le(27) + 1
            info = ImageInfo(format: .webp, width: Int(width), height: Int(height))
            let animation = flags & 0x02 != 0
            let exif = flags & 0x08 != 0
            if !animation && !exif {
                info.frames = 1
                info.animated = false
            } else if isComplete {
                walkWebPChunks(v, into: &info, animation: animation)
            }
            return info
        default:
            throw .invalid("unsupported WebP chunk")
        }
        info.frames = 1
        info.animated = false
        return info
    }

    /// Counts the `ANMF` frames and reads the `EXIF` orientation of a whole extended WebP. A chunk
    /// that runs past the body ends the walk, as in a decoder that shows what it has.
    private static func walkWebPChunks(_ v: ByteView, into info: inout ImageInfo, animation: Bool) {
        var frames = 0
        var position = 12
        // Every chunk takes at least 8 bytes, so the walk ends within count / 8 steps.
        while v.has(position, 8) {
            let type = (try? v.u32be(position)) ?? 0
            let size = Int((try? v.u32le(position + 4)) ?? 0)
            let data = position + 8
            if type == fourCC("ANMF") {
                frames += 1
            } else if type == fourCC("EXIF"), v.has(data, size), info.orientation == nil {
                // Some writers keep the JPEG APP1 prefix.
                let skip = (try? v.expect(exifHeader, at: data, else: "")) != nil ? 6 : 0
                info.orientation = exifOrientation(v, tiffAt: data + skip, end: data + size)
            }
            position = data + size + (size & 1)
        }
        // An animated header over no frames is refused by the structure walk; until then the
        // count is unknown, not 0.
        info.frames = animation ? (frames > 0 ? frames : nil) : 1
        info.animated = animation ? frames > 1 : false
    }

    static func parseBMP(_ v: ByteView) throws(SniffStop) -> ImageInfo {
        try v.expect([0x42, 0x4D], at: 0, else: "not a BMP signature")
        let headerSize = try v.u32le(14)
        var info: ImageInfo
        switch headerSize {
        case 12:
            // BITMAPCOREHEADER: unsigned 16-bit width and height, then planes.
            let width = try v.u16le(18)
            let height = try v.u16le(20)
            info = ImageInfo(format: .bmp, width: Int(width), height: Int(height))
        case 16, 40, 52, 56, 64, 108, 124:
            // BITMAPINFOHEADER and its successors (and OS/2 2.x): signed 32-bit width and height.
            let width = Int(Int32(bitPattern: try v.u32le(18)))
            let height = Int(Int32(bitPattern: try v.u32le(22)))
            // The plane count (always 1 by the format) is not checked: Pillow reads the bitmap anyway.
            guard width >= 0 else { throw .invalid("negative BMP width") }
            info = ImageInfo(format: .bmp, width: width, height: abs(height))
        default:
            throw .invalid("unknown BMP header size")
        }
        info.frames = 1
        info.animated = false
        return info
    }
}
