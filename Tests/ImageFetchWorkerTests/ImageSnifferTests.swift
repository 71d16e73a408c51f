import Testing

@testable import ImageFetchWorker

// MARK: - Sample builders: valid minimal files, byte by byte

/// Builds small but well-formed image files for the tests.
fileprivate enum Samples {
    static func be16(_ v: Int) -> [UInt8] { [UInt8(truncatingIfNeeded: v >> 8), UInt8(truncatingIfNeeded: v)] }
    static func le16(_ v: Int) -> [UInt8] { [UInt8(truncatingIfNeeded: v), UInt8(truncatingIfNeeded: v >> 8)] }
    static func be32(_ v: Int) -> [UInt8] { be16(v >> 16) + be16(v) }
    static func le32(_ v: Int) -> [UInt8] { le16(v) + le16(v >> 16) }
    static func le24(_ v: Int) -> [UInt8] { Array(le32(v).prefix(3)) }
    static func ascii(_ s: String) -> [UInt8] { Array(s.utf8) }

    static let crcTable: [UInt32] = (0..<256).map { n -> UInt32 in
        var c = UInt32(n)
        for _ in 0..<8 { c = c & 1 == 1 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
        return c
    }

    static func crc32(_ bytes: [UInt8]) -> UInt32 {
        var c: UInt32 = 0xFFFF_FFFF
        for b in bytes { c = crcTable[Int((c ^ UInt32(b)) & 0xFF)] ^ (c >> 8) }
        return c ^ 0xFFFF_FFFF
    }

    static func adler32(_ bytes: [UInt8]) -> UInt32 {
        var a: UInt32 = 1
        var b: UInt32 = 0
        for x in bytes {
            a = (a + UInt32(x)) % 65521
            b = (b + a) % 65521
        }
        return b << 16 | a
    }

    static func pngChunk(_ type: String, _ data: [UInt8]) -> [UInt8] {
        let typed = ascii(type) + data
        return be32(data.count) + typed + be32(Int(crc32(typed)))
    }

    /// A real grayscale PNG: IHDR, one stored-deflate IDAT with correct Adler-32, IEND, correct CRCs.
    static func png(width: Int, height: Int) -> [UInt8] {
        var raw: [UInt8] = []
        for _ in 0..<height { raw += [0] + [UInt8](repeating: 0x80, count: width) }  // filter 0 + pixels
        precondition(raw.count < 65_535)
        let zlib: [UInt8] = [0x78, 0x01, 0x01] + le16(raw.count) + le16(~raw.count & 0xFFFF) + raw
            + be32(Int(adler32(raw)))
        let ihdr = be32(width) + be32(height) + [8, 0, 0, 0, 0]  // 8-bit gray, deflate, no filter, no interlace
        return [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + pngChunk("IHDR", ihdr) + pngChunk("IDAT", zlib)
            + pngChunk("IEND", [])
    }

    static func jpegSegment(_ marker: UInt8, _ payload: [UInt8]) -> [UInt8] {
        [0xFF, marker] + be16(payload.count + 2) + payload
    }

    /// A baseline JPEG: SOI, APP0 JFIF, DQT, SOF0 (3 components), DHT, SOS, entropy bytes, EOI.
    /// `beforeFrame` is inserted between DQT and SOF; `sof` picks the frame marker.
    static func jpeg(width: Int, height: Int, sof: UInt8 = 0xC0, beforeFrame: [UInt8] = []) -> [UInt8] {
        let app0 = jpegSegment(0xE0, ascii("JFIF") + [0, 1, 1, 0] + be16(1) + be16(1) + [0, 0])
        let dqt = jpegSegment(0xDB, [0x00] + [UInt8](repeating: 1, count: 64))
        let frame = jpegSegment(sof, [8] + be16(height) + be16(width) + [3, 1, 0x22, 0, 2, 0x11, 1, 3, 0x11, 1])
        let dht = jpegSegment(0xC4, [0x00] + [1] + [UInt8](repeating: 0, count: 15) + [0])
        let sos = jpegSegment(0xDA, [3, 1, 0x00, 2, 0x11, 3, 0x11, 0, 0x3F, 0])
        return [0xFF, 0xD8] + app0 + dqt + beforeFrame + frame + dht + sos + [0x00, 0xFF, 0x00, 0x12] + [0xFF, 0xD9]
    }

    /// A real 1×1 GIF87a/89a (two-colour palette, one LZW-coded pixel), with the screen size given.
    static func gif(width: Int, height: Int, version: String = "89a") -> [UInt8] {
        ascii("GIF" + version) + le16(width) + le16(height) + [0x80, 0, 0] + [0xFF, 0xFF, 0xFF, 0, 0, 0]
            + [0x2C] + le16(0) + le16(0) + le16(1) + le16(1) + [0] + [2, 2, 0x44, 0x01, 0] + [0x3B]
    }

    static func riff(_ chunks: [UInt8]) -> [UInt8] {
        ascii("RIFF") + le32(chunks.count + 4) + ascii("WEBP") + chunks
    }

    static func riffChunk(_ type: String, _ data: [UInt8]) -> [UInt8] {
        ascii(type) + le32(data.count) + data + (data.count % 2 == 1 ? [0] : [])
    }

    static func vp8Chunk(width: Int, height: Int) -> [UInt8] {
        // Frame tag: key frame, version 0, shown, first partition 16 bytes; start code; sizes with scale.
        let tag: [UInt8] = [0x10 | (16 & 7) << 5, UInt8((16 >> 3) & 0xFF), 0]
        let data = tag + [0x9D, 0x01, 0x2A] + le16(width | 1 << 14) + le16(height | 2 << 14)
            + [UInt8](repeating: 0, count: 16)
        return riffChunk("VP8 ", data)
    }

    static func webpLossy(width: Int, height: Int) -> [UInt8] { riff(vp8Chunk(width: width, height: height)) }

    static func webpLossless(width: Int, height: Int) -> [UInt8] {
        let bits = (width - 1) | (height - 1) << 14 | 1 << 28  // alpha hint, version 0
        return riff(riffChunk("VP8L", [0x2F] + le32(bits) + [0, 0, 0]))
    }

    static func webpExtended(width: Int, height: Int) -> [UInt8] {
        let vp8x = riffChunk("VP8X", [0x10, 0, 0, 0] + le24(width - 1) + le24(height - 1))
        return riff(vp8x + riffChunk("ALPH", [0, 0]) + vp8Chunk(width: width, height: height))
    }

    /// A 24-bit BMP with a BITMAPCOREHEADER (12 bytes).
    static func bmpCore(width: Int, height: Int) -> [UInt8] {
        let rowBytes = (width * 3 + 3) / 4 * 4
        let pixels = [UInt8](repeating: 0x7F, count: rowBytes * height)
        let header = le32(12) + le16(width) + le16(height) + le16(1) + le16(24)
        return ascii("BM") + le32(14 + header.count + pixels.count) + [0, 0, 0, 0] + le32(14 + header.count)
            + header + pixels
    }

    /// A 24-bit BMP with a BITMAPINFOHEADER (40 bytes); a negative height is a top-down bitmap.
    static func bmpInfo(width: Int, height: Int) -> [UInt8] {
        let rowBytes = (width * 3 + 3) / 4 * 4
        let pixels = [UInt8](repeating: 0x7F, count: rowBytes * abs(height))
        let header = le32(40) + le32(width) + le32(height) + le16(1) + le16(24) + le32(0) + le32(pixels.count)
            + le32(2835) + le32(2835) + le32(0) + le32(0)
        return ascii("BM") + le32(14 + header.count + pixels.count) + [0, 0, 0, 0] + le32(14 + header.count)
            + header + pixels
    }

    /// An 8-bit grayscale, uncompressed, single-strip TIFF. Dimensions are SHORT or LONG; the IFD
    /// comes after the pixels when `ifdLast`.
    static func tiff(width: Int, height: Int, bigEndian: Bool, longDimensions: Bool, ifdLast: Bool) -> [UInt8] {
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

    static func box(_ type: String, _ payload: [UInt8]) -> [UInt8] { be32(payload.count + 8) + ascii(type) + payload }
    static func fullBox(_ type: String, _ payload: [UInt8]) -> [UInt8] { box(type, [0, 0, 0, 0] + payload) }

    static func ftyp(major: String, compatible: [String]) -> [UInt8] {
        box("ftyp", ascii(major) + be32(0) + compatible.flatMap { ascii($0) })
    }

    /// An ISOBMFF still image: ftyp, meta (hdlr, pitm, iinf, iloc, iprp with ipco and ipma), mdat.
    /// ipco holds a thumbnail-sized `ispe` before the primary one, to check the largest wins.
    static func heif(
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
        let iloc = fullBox("iloc", [0x44, 0x00] + be16(1) + be16(1) + be16(0) + be16(1) + be32(0) + be32(4))
        let config = box(codec == "av01" ? "av1C" : "hvcC", [0x81, 0, 0, 0])
        let thumb = fullBox("ispe", be32(16) + be32(12))
        let ispe = fullBox("ispe", be32(width) + be32(height))
        let pixi = fullBox("pixi", [3, 8, 8, 8])
        let ipco = box("ipco", thumb + config + ispe + pixi)
        let ipma = fullBox("ipma", be32(1) + be16(1) + [3, 0x82, 0x03, 0x04])
        let iprp = box("iprp", ipco + ipma)
        let metaPayload = [0, 0, 0, 0] + hdlr + pitm + iinf + iloc + iprp
        let ftypBox = ftyp(major: major, compatible: compatible)
        if metaSizeZero {
            return ftypBox + beforeMeta + be32(0) + ascii("meta") + metaPayload
        }
        return ftypBox + beforeMeta + box("meta", metaPayload) + box("mdat", [1, 2, 3, 4])
    }

    static func avif(width: Int, height: Int) -> [UInt8] {
        heif(major: "avif", compatible: ["avif", "mif1", "miaf"], codec: "av01", width: width, height: height)
    }

    static func heic(width: Int, height: Int) -> [UInt8] {
        heif(major: "heic", compatible: ["mif1", "heic"], codec: "hvc1", width: width, height: height)
    }

    /// Every sample with the answer expected for it.
    static let all: [(name: String, bytes: [UInt8], info: ImageInfo)] = [
        ("png 1x1", png(width: 1, height: 1), ImageInfo(format: .png, width: 1, height: 1)),
        ("png 7x3", png(width: 7, height: 3), ImageInfo(format: .png, width: 7, height: 3)),
        ("jpeg baseline", jpeg(width: 640, height: 480), ImageInfo(format: .jpeg, width: 640, height: 480)),
        (
            "jpeg progressive, fill bytes, TEM, RST, APP1",
            jpeg(
                width: 1, height: 65_535, sof: 0xC2,
                beforeFrame: jpegSegment(0xE1, ascii("Exif\0\0") + [UInt8](repeating: 0xFF, count: 300))
                    + [0xFF, 0x01, 0xFF, 0xD0, 0xFF, 0xFF, 0xFF]
            ),
            ImageInfo(format: .jpeg, width: 1, height: 65_535)
        ),
        (
            "jpeg with DHT/DAC/JPG before the frame",
            jpeg(
                width: 300, height: 200,
                beforeFrame: jpegSegment(0xC4, [0x08, 0x00, 0x09, 0x00, 0x07, 0x03])
                    + jpegSegment(0xCC, [0x08, 0x00, 0x09, 0x00, 0x07, 0x03])
                    + jpegSegment(0xC8, [0x08, 0x00, 0x09, 0x00, 0x07, 0x03])
            ),
            ImageInfo(format: .jpeg, width: 300, height: 200)
        ),
        ("gif89a 1x1", gif(width: 1, height: 1), ImageInfo(format: .gif, width: 1, height: 1)),
        ("gif87a", gif(width: 300, height: 65_535, version: "87a"), ImageInfo(format: .gif, width: 300, height: 65_535)),
        ("webp lossy", webpLossy(width: 400, height: 301), ImageInfo(format: .webp, width: 400, height: 301)),
        ("webp lossless", webpLossless(width: 16_384, height: 3), ImageInfo(format: .webp, width: 16_384, height: 3)),
        ("webp extended", webpExtended(width: 20_000, height: 1), ImageInfo(format: .webp, width: 20_000, height: 1)),
        ("bmp core", bmpCore(width: 3, height: 2), ImageInfo(format: .bmp, width: 3, height: 2)),
        ("bmp info bottom-up", bmpInfo(width: 5, height: 4), ImageInfo(format: .bmp, width: 5, height: 4)),
        ("bmp info top-down", bmpInfo(width: 2, height: -7), ImageInfo(format: .bmp, width: 2, height: 7)),
        (
            "tiff LE short", tiff(width: 4, height: 3, bigEndian: false, longDimensions: false, ifdLast: false),
            ImageInfo(format: .tiff, width: 4, height: 3)
        ),
        (
            "tiff BE long, IFD last", tiff(width: 6, height: 5, bigEndian: true, longDimensions: true, ifdLast: true),
            ImageInfo(format: .tiff, width: 6, height: 5)
        ),
        (
            "tiff BE short", tiff(width: 2, height: 9, bigEndian: true, longDimensions: false, ifdLast: false),
            ImageInfo(format: .tiff, width: 2, height: 9)
        ),
        ("avif", avif(width: 1920, height: 1080), ImageInfo(format: .avif, width: 1920, height: 1080)),
        ("heic", heic(width: 4032, height: 3024), ImageInfo(format: .heic, width: 4032, height: 3024)),
        (
            "heic as mif1 with heic compatible",
            heif(major: "mif1", compatible: ["mif1", "heic"], codec: "hvc1", width: 100, height: 50),
            ImageInfo(format: .heic, width: 100, height: 50)
        ),
        (
            "avif, free box with 64-bit size, meta of size 0",
            heif(
                major: "avif", compatible: ["mif1"], codec: "av01", width: 64, height: 48,
                beforeMeta: be32(1) + ascii("free") + be32(0) + be32(20) + [1, 2, 3, 4], metaSizeZero: true
            ),
            ImageInfo(format: .avif, width: 64, height: 48)
        ),
    ]
}

/// A small deterministic generator (SplitMix64), so failures reproduce.
fileprivate struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// Inspects the first `length` bytes from a buffer of exactly that size.
fileprivate func inspectPrefix(_ bytes: [UInt8], _ length: Int, isComplete: Bool) -> ImageInspection {
    Array(bytes.prefix(length)).withUnsafeBytes { ImageSniffer.inspect($0, isComplete: isComplete) }
}

/// The answers must hold whatever the input: a complete body never needs more data, and an image
/// always has positive dimensions.
fileprivate func checkInvariants(_ bytes: [UInt8]) {
    let partial = bytes.withUnsafeBytes { ImageSniffer.inspect($0, isComplete: false) }
    let complete = ImageSniffer.inspect(bytes)
    #expect(complete != .needMoreData)
    if case .image(let info) = complete {
        #expect(info.width > 0 && info.height > 0)
        #expect(partial == complete)
    }
    if case .image = partial { #expect(partial == complete) }
    if case .notAnImage = partial { #expect(partial == complete) }
}

// MARK: - Tests

@Suite struct ImageSnifferTests {
    @Test(arguments: Samples.all.indices)
    func recognisesSample(_ index: Int) {
        let sample = Samples.all[index]
        #expect(ImageSniffer.inspect(sample.bytes) == .image(sample.info), "\(sample.name)")
        let partial = sample.bytes.withUnsafeBytes { ImageSniffer.inspect($0, isComplete: false) }
        #expect(partial == .image(sample.info), "\(sample.name)")
    }

    @Test(arguments: Samples.all.indices)
    func everyPrefixNeedsMoreDataOrDecidesForGood(_ index: Int) {
        let sample = Samples.all[index]
        let expected = ImageInspection.image(sample.info)
        var decided = false
        for length in 0...sample.bytes.count {
            let partial = inspectPrefix(sample.bytes, length, isComplete: false)
            let complete = inspectPrefix(sample.bytes, length, isComplete: true)
            if decided {
                #expect(partial == expected, "\(sample.name) prefix \(length)")
            } else if partial == expected {
                decided = true
            } else {
                #expect(partial == .needMoreData, "\(sample.name) prefix \(length)")
            }
            #expect(complete != .needMoreData, "\(sample.name) prefix \(length)")
            if partial == .needMoreData {
                guard case .notAnImage(let reason) = complete else {
                    Issue.record("\(sample.name) prefix \(length): \(complete)")
                    continue
                }
                #expect(!reason.isEmpty && reason.utf8.count < 80)
            } else {
                #expect(complete == expected, "\(sample.name) prefix \(length)")
            }
        }
        #expect(decided, "\(sample.name)")
    }

    @Test func formatNamesAndTypes() {
        #expect(ImageFormat.allCases.map(\.fileExtension) == ["jpg", "png", "gif", "webp", "bmp", "tif", "avif", "heic"])
        #expect(ImageFormat.tiff.mimeType == "image/tiff")
        #expect(ImageFormat.jpeg.mimeType == "image/jpeg")
        #expect(ImageFormat.avif.mimeType == "image/avif")
        #expect(ImageFormat.heic.mimeType == "image/heic")
        #expect(ImageFormat.webp.rawValue == "webp")
    }

    @Test func htmlIsNotAnImage() {
        let html = Array("<!DOCTYPE html><html><head><title>404</title></head><body>Not found</body></html>".utf8)
        guard case .notAnImage(let reason) = ImageSniffer.inspect(html) else {
            Issue.record("HTML was taken for an image")
            return
        }
        #expect(!reason.isEmpty)
        // Decided from the first byte, without waiting for more.
        #expect(inspectPrefix(html, 1, isComplete: false) != .needMoreData)
        #expect(ImageSniffer.inspect(Array(" \n<html>".utf8)) != .needMoreData)
        #expect(ImageSniffer.inspect(Array("{\"error\": \"nope\"}".utf8)) != .needMoreData)
    }

    @Test func emptyBody() {
        #expect(ImageSniffer.inspect([]) == .notAnImage(reason: "empty body"))
        #expect(inspectPrefix([], 0, isComplete: false) == .needMoreData)
    }

    @Test func zeroDimensionsAreNotAnImage() {
        let bodies = [
            Samples.png(width: 0, height: 0),
            Samples.jpeg(width: 10, height: 0),
            Samples.gif(width: 0, height: 5),
            Samples.webpLossy(width: 0, height: 5),
            Samples.bmpInfo(width: 0, height: 1),
            Samples.tiff(width: 0, height: 3, bigEndian: false, longDimensions: false, ifdLast: false),
            Samples.avif(width: 0, height: 10),
        ]
        for body in bodies {
            guard case .notAnImage = ImageSniffer.inspect(body) else {
                Issue.record("zero dimension accepted: \(ImageSniffer.inspect(body))")
                continue
            }
        }
    }

    @Test func malformedHeadersAreNotAnImage() {
        var badIHDR = Samples.png(width: 2, height: 2)
        badIHDR[11] = 12
        let jpegWithoutFrame: [UInt8] = [0xFF, 0xD8] + Samples.jpegSegment(0xE0, [1, 2, 3]) + [0xFF, 0xD9]
        let jpegScanFirst: [UInt8] = [0xFF, 0xD8] + Samples.jpegSegment(0xDA, [1, 2, 3]) + [0xFF, 0xD9]
        let jpegJunk: [UInt8] = [0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x04, 0x00, 0x00, 0x12, 0x34]
        let jpegShortLength: [UInt8] = [0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x01, 0x00, 0x00]
        let mp4 = Samples.ftyp(major: "isom", compatible: ["isom", "mp41"]) + Samples.box("moov", [])
        let heifWithoutMeta = Samples.ftyp(major: "heic", compatible: ["mif1"]) + Samples.box("mdat", [0, 0])
        let badBoxSize = Samples.ftyp(major: "avif", compatible: []) + Samples.be32(4) + Array("meta".utf8)
        let hugeBox = Samples.ftyp(major: "avif", compatible: []) + Samples.be32(1) + Array("free".utf8)
            + [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]
        let tinyLargeSize = Samples.ftyp(major: "avif", compatible: []) + Samples.be32(1) + Array("free".utf8)
            + Samples.be32(0) + Samples.be32(8)
        var riffAVI = Samples.webpLossy(width: 5, height: 5)
        riffAVI.replaceSubrange(8..<12, with: Array("AVI ".utf8))
        let bmpText = Array("BM is a band, their website is at example dot com".utf8)
        let bigTIFF: [UInt8] = [0x49, 0x49, 0x2B, 0x00, 0x08, 0x00, 0x00, 0x00]
        var tiffNoDimensions = Samples.tiff(width: 3, height: 3, bigEndian: false, longDimensions: false, ifdLast: false)
        tiffNoDimensions[10] = 0x99  // tag 256 → 0x199
        tiffNoDimensions[22] = 0x99  // tag 257 → 0x199
        var tiffRational = Samples.tiff(width: 3, height: 3, bigEndian: false, longDimensions: false, ifdLast: false)
        tiffRational[12] = 5
        let bodies: [(String, [UInt8])] = [
            ("bad IHDR", badIHDR), ("jpeg without frame", jpegWithoutFrame), ("jpeg scan first", jpegScanFirst),
            ("jpeg junk", jpegJunk), ("jpeg short length", jpegShortLength), ("mp4", mp4),
            ("heif without meta", heifWithoutMeta), ("bad box size", badBoxSize), ("huge box", hugeBox),
            ("tiny large size", tinyLargeSize), ("RIFF AVI", riffAVI), ("bmp text", bmpText), ("BigTIFF", bigTIFF),
            ("tiff without dimensions", tiffNoDimensions), ("tiff rational", tiffRational),
        ]
        for (name, body) in bodies {
            guard case .notAnImage(let reason) = ImageSniffer.inspect(body) else {
                Issue.record("\(name): \(ImageSniffer.inspect(body))")
                continue
            }
            #expect(!reason.isEmpty && reason.utf8.count < 80, "\(name)")
            checkInvariants(body)
        }
    }

    @Test func jpegWithManyStandaloneMarkersIsBounded() {
        var body: [UInt8] = [0xFF, 0xD8]
        for _ in 0..<10_000 { body += [0xFF, 0xD0] }
        body += Samples.jpegSegment(0xC0, [8] + Samples.be16(1) + Samples.be16(1) + [1, 1, 0x11, 0])
        guard case .notAnImage = ImageSniffer.inspect(body) else {
            Issue.record("an unbounded marker walk")
            return
        }
    }

    @Test func mutatedSamplesNeverCrash() {
        var rng = SplitMix64(state: 0x1234_5678)
        let samples = Samples.all.map(\.bytes)
        for round in 0..<4000 {
            var bytes = samples[Int(rng.next() % UInt64(samples.count))]
            switch round % 5 {
            case 0:  // flip a few bytes
                for _ in 0..<(1 + Int(rng.next() % 8)) where !bytes.isEmpty {
                    bytes[Int(rng.next() % UInt64(bytes.count))] = UInt8(truncatingIfNeeded: rng.next())
                }
            case 1:  // set a 16- or 32-bit field to an extreme value
                let at = Int(rng.next() % UInt64(max(1, bytes.count)))
                let extreme: [UInt8] = [[0xFF, 0xFF, 0xFF, 0xFF], [0, 0, 0, 0], [0, 0, 0, 1], [0x80, 0, 0, 0]][round % 4]
                for i in 0..<4 where at + i < bytes.count { bytes[at + i] = extreme[i] }
            case 2:  // truncate
                bytes = Array(bytes.prefix(Int(rng.next() % UInt64(bytes.count + 1))))
            case 3:  // insert or delete a run
                let at = Int(rng.next() % UInt64(bytes.count + 1))
                if rng.next() % 2 == 0 {
                    bytes.insert(contentsOf: (0..<Int(rng.next() % 16)).map { _ in UInt8(truncatingIfNeeded: rng.next()) }, at: at)
                } else {
                    bytes.removeSubrange(at..<min(bytes.count, at + Int(rng.next() % 16)))
                }
            default:  // random bytes behind a real signature start
                let head = Array(bytes.prefix(Int(rng.next() % 16)))
                bytes = head + (0..<Int(rng.next() % 200)).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
            }
            checkInvariants(bytes)
            let cut = Int(rng.next() % UInt64(bytes.count + 1))
            checkInvariants(Array(bytes.prefix(cut)))
        }
    }

    @Test func randomBytesNeverCrash() {
        var rng = SplitMix64(state: 42)
        for _ in 0..<2000 {
            let first = [0xFF, 0x89, 0x47, 0x52, 0x42, 0x49, 0x4D, 0x00][Int(rng.next() % 8)] as UInt8
            let bytes = [first] + (0..<Int(rng.next() % 64)).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
            checkInvariants(bytes)
        }
    }
}
