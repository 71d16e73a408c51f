/// Small but well-formed image files, built byte by byte, for the tests and the benchmarks:
/// one of each format the sniffer knows (PNG with real CRCs, JPEG, GIF, WebP lossy/lossless/extended,
/// BMP, TIFF, AVIF, HEIC), with the dimensions asked for.
public enum ImageSamples {
    public static func be16(_ v: Int) -> [UInt8] { [UInt8(truncatingIfNeeded: v >> 8), UInt8(truncatingIfNeeded: v)] }
    public static func le16(_ v: Int) -> [UInt8] { [UInt8(truncatingIfNeeded: v), UInt8(truncatingIfNeeded: v >> 8)] }
    public static func be32(_ v: Int) -> [UInt8] { be16(v >> 16) + be16(v) }
    public static func le32(_ v: Int) -> [UInt8] { le16(v) + le16(v >> 16) }
    public static func le24(_ v: Int) -> [UInt8] { Array(le32(v).prefix(3)) }
    public static func ascii(_ s: String) -> [UInt8] { Array(s.utf8) }

    public static let crcTable: [UInt32] = (0..<256).map { n -> UInt32 in
        var c = UInt32(n)
        for _ in 0..<8 { c = c & 1 == 1 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
        return c
    }

    public static func crc32(_ bytes: [UInt8]) -> UInt32 {
        var c: UInt32 = 0xFFFF_FFFF
        for b in bytes { c = crcTable[Int((c ^ UInt32(b)) & 0xFF)] ^ (c >> 8) }
        return c ^ 0xFFFF_FFFF
    }

    public static func adler32(_ bytes: [UInt8]) -> UInt32 {
        var a: UInt32 = 1
        var b: UInt32 = 0
        for x in bytes {
            a = (a + UInt32(x)) % 65521
            b = (b + a) % 65521
        }
        return b << 16 | a
    }

    public static func pngChunk(_ type: String, _ data: [UInt8]) -> [UInt8] {
        let typed = ascii(type) + data
        return be32(data.count) + typed + be32(Int(crc32(typed)))
    }

    /// A real grayscale PNG: IHDR, one stored-deflate IDAT with correct Adler-32, IEND, correct CRCs.
    public static func png(width: Int, height: Int) -> [UInt8] {
        var raw: [UInt8] = []
        for _ in 0..<height { raw += [0] + [UInt8](repeating: 0x80, count: width) }  // filter 0 + pixels
        precondition(raw.count < 65_535)
        let zlib: [UInt8] =
            [0x78, 0x01, 0x01] + le16(raw.count) + le16(~raw.count & 0xFFFF) + raw
            + be32(Int(adler32(raw)))
        let ihdr = be32(width) + be32(height) + [8, 0, 0, 0, 0]  // 8-bit gray, deflate, no filter, no interlace
        return [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + pngChunk("IHDR", ihdr) + pngChunk("IDAT", zlib)
            + pngChunk("IEND", [])
    }

    public static func jpegSegment(_ marker: UInt8, _ payload: [UInt8]) -> [UInt8] {
        [0xFF, marker] + be16(payload.count + 2) + payload
    }

    /// A baseline JPEG: SOI, APP0 JFIF, DQT, SOF0 (3 components), DHT, SOS, entropy bytes, EOI.
    /// `beforeFrame` is inserted between DQT and SOF; `sof` picks the frame marker.
    public static func jpeg(width: Int, height: Int, sof: UInt8 = 0xC0, beforeFrame: [UInt8] = []) -> [UInt8] {
        let app0 = jpegSegment(0xE0, ascii("JFIF") + [0, 1, 1, 0] + be16(1) + be16(1) + [0, 0])
        let dqt = jpegSegment(0xDB, [0x00] + [UInt8](repeating: 1, count: 64))
        let frame = jpegSegment(sof, [8] + be16(height) + be16(width) + [3, 1, 0x22, 0, 2, 0x11, 1, 3, 0x11, 1])
        let dht = jpegSegment(0xC4, [0x00] + [1] + [UInt8](repeating: 0, count: 15) + [0])
        let sos = jpegSegment(0xDA, [3, 1, 0x00, 2, 0x11, 3, 0x11, 0, 0x3F, 0])
        return [0xFF, 0xD8] + app0 + dqt + beforeFrame + frame + dht + sos + [0x00, 0xFF, 0x00, 0x12] + [0xFF, 0xD9]
    }

    /// A real 1×1 GIF87a/89a (two-colour palette, one LZW-coded pixel), with the screen size given.
    public static func gif(width: Int, height: Int, version: String = "89a") -> [UInt8] {
        ascii("GIF" + version) + le16(width) + le16(height) + [0x80, 0, 0] + [0xFF, 0xFF, 0xFF, 0, 0, 0]
            + [0x2C] + le16(0) + le16(0) + le16(1) + le16(1) + [0] + [2, 2, 0x44, 0x01, 0] + [0x3B]
    }

    public static func riff(_ chunks: [UInt8]) -> [UInt8] {
        ascii("RIFF") + le32(chunks.count + 4) + ascii("WEBP") + chunks
    }

    public static func riffChunk(_ type: String, _ data: [UInt8]) -> [UInt8] {
        ascii(type) + le32(data.count) + data + (data.count % 2 == 1 ? [0] : [])
    }

    public static func vp8Chunk(width: Int, height: Int) -> [UInt8] {
        // Frame tag: key frame, version 0, shown, first partition 16 bytes; start code; sizes with scale.
        let tag: [UInt8] = [0x10 | (16 & 7) << 5, UInt8((16 >> 3) & 0xFF), 0]
        let data =
            tag + [0x9D, 0x01, 0x2A] + le16(width | 1 << 14) + le16(height | 2 << 14)
            + [UInt8](repeating: 0, count: 16)
        return riffChunk("VP8 ", data)
    }

    public static func webpLossy(width: Int, height: Int) -> [UInt8] { riff(vp8Chunk(width: width, height: height)) }

    public static func webpLossless(width: Int, height: Int) -> [UInt8] {
        let bits = (width - 1) | (height - 1) << 14 | 1 << 28  // alpha hint, version 0
        return riff(riffChunk("VP8L", [0x2F] + le32(bits) + [0, 0, 0]))
    }

    public static func webpExtended(width: Int, height: Int) -> [UInt8] {
        let vp8x = riffChunk("VP8X", [0x10, 0, 0, 0] + le24(width - 1) + le24(height - 1))
        return riff(vp8x + riffChunk("ALPH", [0, 0]) + vp8Chunk(width: width, height: height))
    }

    /// A 24-bit BMP with a BITMAPCOREHEADER (12 bytes).
    public static func bmpCore(width: Int, height: Int) -> [UInt8] {
        let rowBytes = (width * 3 + 3) / 4 * 4
        let pixels = [UInt8](repeating: 0x7F, count: rowBytes * height)
        let header = le32(12) + le16(width) + le16(height) + le16(1) + le16(24)
        return ascii("BM") + le32(14 + header.count + pixels.count) + [0, 0, 0, 0] + le32(14 + header.count)
            + header + pixels
    }

    /// A 24-bit BMP with a BITMAPINFOHEADER (40 bytes); a negative height is a top-down bitmap.
    public static func bmpInfo(width: Int, height: Int) -> [UInt8] {
        let rowBytes = (width * 3 + 3) / 4 * 4
        let pixels = [UInt8](repeating: 0x7F, count: rowBytes * abs(height))
        let header =
            le32(40) + le32(width) + le32(height) + le16(1) + le16(24) + le32(0) + le32(pixels.count)
            + le32(2835) + le32(2835) + le32(0) + le32(0)
        return ascii("BM") + le32(14 + header.count + pixels.count) + [0, 0, 0, 0] + le32(14 + header.count)
            + header + pixels
    }

    /// An 8-bit grayscale, uncompressed, single-strip TIFF. Dimensions are SHORT or LONG; the IFD
    /// comes after the pixels when `ifdLast`.
    public static func tiff(width: Int, height: Int, bigEndian: Bool, longDimensions: Bool, ifdLast: Bool) -> [UInt8] {
        let u16 = bigEndian ? be16 : le16
        let u32 = bigEndian ? be32 : le32
        let pixels = [UInt8](repeating: 0x40, count: width * height)
        let entryCount = 9
        let ifdSize = 2 + 12 * entryCount + 4
        let ifdOffset = ifdLast ? 8 + pixels.count : 8
        let pixelOffset = ifdLast ? 8 : 8 + ifdSize
        func entry(_ tag: Int, _ type: Int, _ value: Int) -> [UInt8] {
            // SHORT values are left-justified in the 4-byte value field.
            u16(tag) + u16(type) + u32(1) + (type == 3 ? u16(value) + [0, 0] : u32(value))
        }
        let dimType = longDimensions ? 4 : 3
        var ifd = u16(entryCount)
        ifd += entry(256, dimType, width) + entry(257, dimType, height) + entry(258, 3, 8) + entry(259, 3, 1)
        ifd += entry(262, 3, 1) + entry(273, 4, pixelOffset) + entry(277, 3, 1) + entry(278, 3, height)
        ifd += entry(279, 4, pixels.count) + u32(0)
        let header = (bigEndian ? ascii("MM") : ascii("II")) + u16(42) + u32(ifdOffset)
        return header + (ifdLast ? pixels + ifd : ifd + pixels)
    }

    public static func box(_ type: String, _ payload: [UInt8]) -> [UInt8] {
        be32(payload.count + 8) + ascii(type) + payload
    }
    public static func fullBox(_ type: String, _ payload: [UInt8]) -> [UInt8] { box(type, [0, 0, 0, 0] + payload) }

    public static func ftyp(major: String, compatible: [String]) -> [UInt8] {
        box("ftyp", ascii(major) + be32(0) + compatible.flatMap { ascii($0) })
    }

    /// An ISOBMFF still image: ftyp, meta (hdlr, pitm, iinf, iloc, iprp with ipco and ipma), mdat.
    /// ipco holds a thumbnail-sized `ispe` before the primary one, to check the largest wins.
    public static func heif(
        major: String,
        compatible: [String],
        codec: String,
        width: Int,
        height: Int,
        beforeMeta: [UInt8] = [],
        metaSizeZero: Bool = false
    ) -> [UInt8] {
        let hdlr = fullBox("hdlr", be32(0) + ascii("pict") + [UInt8](repeating: 0, count: 12) + [0])
        let pitm = fullBox("pitm", be16(1))
        let infe = box("infe", [2, 0, 0, 0] + be16(1) + be16(0) + ascii(codec) + [0])
        let iinf = fullBox("iinf", be16(1) + infe)
        // The item's data: the payload of the `mdat` that follows `meta` (the first bytes of the file
        // when `meta` runs to the end), so that a file cut inside `mdat` has an extent outside it.
        func iloc(_ offset: Int) -> [UInt8] {
            fullBox("iloc", [0x44, 0x00] + be16(1) + be16(1) + be16(0) + be16(1) + be32(offset) + be32(4))
        }
        let config = box(codec == "av01" ? "av1C" : "hvcC", [0x81, 0, 0, 0])
        let thumb = fullBox("ispe", be32(16) + be32(12))
        let ispe = fullBox("ispe", be32(width) + be32(height))
        let pixi = fullBox("pixi", [3, 8, 8, 8])
        let ipco = box("ipco", thumb + config + ispe + pixi)
        let ipma = fullBox("ipma", be32(1) + be16(1) + [3, 0x82, 0x03, 0x04])
        let iprp = box("iprp", ipco + ipma)
        let ftypBox = ftyp(major: major, compatible: compatible)
        if metaSizeZero {
            return ftypBox + beforeMeta + be32(0) + ascii("meta") + [0, 0, 0, 0] + hdlr + pitm + iinf + iloc(0) + iprp
        }
        let metaSize = 8 + 4 + hdlr.count + pitm.count + iinf.count + iloc(0).count + iprp.count
        let mdatPayload = ftypBox.count + beforeMeta.count + metaSize + 8
        let metaPayload = [0, 0, 0, 0] + hdlr + pitm + iinf + iloc(mdatPayload) + iprp
        return ftypBox + beforeMeta + box("meta", metaPayload) + box("mdat", [1, 2, 3, 4])
    }

    public static func avif(width: Int, height: Int) -> [UInt8] {
        heif(major: "avif", compatible: ["avif", "mif1", "miaf"], codec: "av01", width: width, height: height)
    }

    public static func heic(width: Int, height: Int) -> [UInt8] {
        heif(major: "heic", compatible: ["mif1", "heic"], codec: "hvc1", width: width, height: height)
    }
}
