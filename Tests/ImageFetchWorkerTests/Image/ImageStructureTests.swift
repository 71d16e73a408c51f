import ImageSamples
import Testing

@testable import ImageFetchWorker

private typealias S = ImageSamples

/// Files built byte by byte for the structure walk: a progressive JPEG of two scans, and the
/// odd but valid parts of entropy-coded data.
enum StructureSamples {
    /// SOI, DQT, SOF2, then two scans each with its DHT, entropy data holding a stuffed `FF 00`,
    /// a restart marker and fill bytes, then EOI.
    static func progressiveJPEG(width: Int = 64, height: Int = 48) -> [UInt8] {
        let dqt = S.jpegSegment(0xDB, [0x00] + [UInt8](repeating: 1, count: 64))
        let frame = S.jpegSegment(0xC2, [8] + S.be16(height) + S.be16(width) + [1, 1, 0x11, 0])
        let dht = S.jpegSegment(0xC4, [0x00] + [1] + [UInt8](repeating: 0, count: 15) + [0])
        let dcScan = S.jpegSegment(0xDA, [1, 1, 0x00, 0, 0, 0x01])
        let acScan = S.jpegSegment(0xDA, [1, 1, 0x00, 1, 63, 0x00])
        let entropy: [UInt8] = [0x12, 0xFF, 0x00, 0x34, 0xFF, 0xD0, 0x56, 0xFF, 0xFF, 0xD1, 0x78]
        return [0xFF, 0xD8] + dqt + frame + dht + dcScan + entropy + dht + acScan + entropy + [0xFF, 0xD9]
    }

    /// A GIF of `frames` 1×1 frames, each behind a graphic control extension.
    static func animatedGIF(frames: Int) -> [UInt8] {
        var bytes = S.ascii("GIF89a") + S.le16(1) + S.le16(1) + [0x80, 0, 0] + [0xFF, 0xFF, 0xFF, 0, 0, 0]
        bytes += [0x21, 0xFF, 11] + S.ascii("NETSCAPE2.0") + [3, 1, 0, 0, 0]
        let frame: [UInt8] =
            [0x21, 0xF9, 4, 0, 1, 0, 0, 0] + [0x2C] + S.le16(0) + S.le16(0) + S.le16(1)
            + S.le16(1) + [0] + [2, 2, 0x44, 0x01, 0]
        bytes.reserveCapacity(bytes.count + frame.count * frames + 1)
        for _ in 0..<frames { bytes += frame }
        return bytes + [0x3B]
    }

    /// An 8-bit BMP whose pixels are an RLE8 stream: a run, an absolute run, end of line, end of bitmap.
    static func rle8BMP() -> [UInt8] {
        let palette = [UInt8](repeating: 0, count: 4 * 256)
        let pixels: [UInt8] = [1, 7, 0, 3, 1, 2, 3, 0, 0, 0, 4, 9, 0, 1]
        let header =
            S.le32(40) + S.le32(4) + S.le32(2) + S.le16(1) + S.le16(8) + S.le32(1) + S.le32(pixels.count)
            + S.le32(2835) + S.le32(2835) + S.le32(256) + S.le32(0)
        let offset = 14 + header.count + palette.count
        return S.ascii("BM") + S.le32(offset + pixels.count) + [0, 0, 0, 0] + S.le32(offset) + header + palette
            + pixels
    }
}

/// Complete, well-formed samples of every format.
private let wellFormed: [(name: String, bytes: [UInt8], format: ImageFormat)] = [
    ("png", S.png(width: 7, height: 3), .png),
    ("jpeg baseline", S.jpeg(width: 64, height: 48), .jpeg),
    ("jpeg progressive, two scans", StructureSamples.progressiveJPEG(), .jpeg),
    ("gif", S.gif(width: 1, height: 1), .gif),
    ("gif animated", StructureSamples.animatedGIF(frames: 3), .gif),
    ("webp lossy", S.webpLossy(width: 40, height: 30), .webp),
    ("webp lossless", S.webpLossless(width: 40, height: 30), .webp),
    ("webp extended", S.webpExtended(width: 40, height: 30), .webp),
    ("bmp core", S.bmpCore(width: 3, height: 2), .bmp),
    ("bmp info", S.bmpInfo(width: 5, height: -4), .bmp),
    ("bmp rle8", StructureSamples.rle8BMP(), .bmp),
    ("tiff", S.tiff(width: 4, height: 3, bigEndian: false, longDimensions: false, ifdLast: false), .tiff),
    ("tiff ifd last", S.tiff(width: 6, height: 5, bigEndian: true, longDimensions: true, ifdLast: true), .tiff),
    ("avif", S.avif(width: 64, height: 48), .avif),
    ("heic", S.heic(width: 64, height: 48), .heic),
]

@Suite struct ImageStructureTests {
    @Test(arguments: wellFormed.map(\.name))
    func aWellFormedFileIsComplete(_ name: String) throws {
        let sample = try #require(wellFormed.first { $0.name == name })
        guard case .image(let info) = ImageSniffer.inspect(sample.bytes) else {
            Issue.record("\(name) is not an image")
            return
        }
        #expect(info.format == sample.format)
        #expect(ImageSniffer.checkStructure(sample.bytes, format: sample.format) == nil)
    }

    /// Every cut of every sample, at every length, is refused; the sniffer alone accepts many of them.
    @Test(arguments: wellFormed.map(\.name))
    func everyTruncationIsRefused(_ name: String) throws {
        let sample = try #require(wellFormed.first { $0.name == name })
        for length in 1..<sample.bytes.count {
            let cut = Array(sample.bytes.prefix(length))
            #expect(ImageSniffer.checkStructure(cut, format: sample.format) != nil, "\(name) cut at \(length)")
        }
    }

    /// Bytes after the format's end are accepted, as decoders accept them (docs/image-formats.md).
    @Test(arguments: wellFormed.map(\.name))
    func bytesAfterTheEndAreAccepted(_ name: String) throws {
        let sample = try #require(wellFormed.first { $0.name == name })
        guard sample.format != .tiff && sample.format != .bmp && sample.format != .avif && sample.format != .heic else {
            return  // no end marker: nothing follows the data they point to
        }
        let html = S.ascii("<!DOCTYPE html><html><script>alert(1)</script></html>")
        #expect(ImageSniffer.checkStructure(sample.bytes + html, format: sample.format) == nil)
    }

    @Test func aPNGWithAFlippedBitInItsImageDataIsCorrupt() {
        var png = S.png(width: 7, height: 3)
        png[33 + 8 + 3] ^= 0x10  // inside the IDAT data
        #expect(ImageSniffer.checkStructure(png, format: .png) == .corrupt(reason: "bad PNG chunk CRC"))
    }

    @Test func aPNGChunkWithABadNameIsCorrupt() {
        var png = S.png(width: 7, height: 3)
        png[33 + 4] = 0x31  // "1DAT"
        #expect(ImageSniffer.checkStructure(png, format: .png) == .corrupt(reason: "bad PNG chunk name"))
    }

    @Test func jpegMarkersOutOfPlaceAreCorrupt() {
        let jpeg = S.jpeg(width: 8, height: 8)
        let eoi = jpeg.count - 2
        // A second SOI in place of EOI.
        var secondSOI = jpeg
        secondSOI[eoi + 1] = 0xD8
        #expect(ImageSniffer.checkStructure(secondSOI, format: .jpeg) == .corrupt(reason: "JPEG has a second SOI"))
        // EOI right after the frame header's tables, before any scan.
        let noScan =
            [0xFF, 0xD8] + S.jpegSegment(0xDB, [0] + [UInt8](repeating: 1, count: 64))
            + S.jpegSegment(0xC0, [8, 0, 8, 0, 8, 1, 1, 0x11, 0]) + [0xFF, 0xD9]
        #expect(
            ImageSniffer.checkStructure(noScan, format: .jpeg)
                == .corrupt(reason: "JPEG ends before its first scan"))
    }

    @Test func aGIFWithoutItsTrailerIsTruncatedAndAStrayByteAfterAFrameEndsIt() {
        var gif = S.gif(width: 1, height: 1)
        gif.removeLast()
        #expect(ImageSniffer.checkStructure(gif, format: .gif) == .truncated(reason: "gif ends before its end"))
        #expect(ImageSniffer.checkStructure(gif + [0x42], format: .gif) == nil)
        // An extra block terminator before the trailer, as some encoders write.
        #expect(ImageSniffer.checkStructure(gif + [0x00, 0x3B], format: .gif) == nil)
        // Before any frame, a byte that starts no block is refused.
        let screenOnly = Array(gif.prefix(19))
        #expect(
            ImageSniffer.checkStructure(screenOnly + [0x00, 0x3B], format: .gif)
                == .corrupt(reason: "GIF block of unknown type"))
    }

    /// A GIF cut inside its last frame and padded with zeros (a preallocated file): the open
    /// sub-block swallows some zeros, the next is read as its terminator, and the rest is no
    /// block. Taken as a stray byte after a frame, that ended the image: `ok` with no trailer.
    @Test func aGIFWhoseTailIsZerosWithoutATrailerIsTruncated() {
        var gif = Array("GIF89a".utf8) + [10, 0, 10, 0, 0x80, 0, 0] + [UInt8](repeating: 0, count: 6)
        gif += [0x2C, 0, 0, 0, 0, 10, 0, 10, 0, 0]  // the image descriptor
        gif += [0x02, 0x16, 0x8C, 0x2D, 0x99, 0x87, 0x2A]  // a sub-block of 22 bytes, 5 of them here
        for padding in [1, 2, 4096] {
            #expect(
                ImageSniffer.checkStructure(gif + [UInt8](repeating: 0, count: 17 + padding), format: .gif)
                    == .truncated(reason: "gif ends before its end"), "\(padding)")
        }
    }

    @Test func aWebPChunkOverrunningItsRIFFIsCorrupt() {
        var webp = S.webpLossy(width: 40, height: 30)
        webp[16] &+= 2  // the VP8 chunk's size, now past the RIFF size
        #expect(
            ImageSniffer.checkStructure(webp, format: .webp)
                == .corrupt(reason: "WebP chunk overruns the RIFF size"))
    }

    /// The VP8X header says whether the image data is frames (`ANMF`) or one image (`VP8 `,
    /// `VP8L`); libwebp refuses data of the other kind. Such a file passed, and its result said
    /// `frames: 0`, which the result schema does not allow.
    @Test func aWebPWhoseImageDataIsNotTheKindItsHeaderSaysIsCorrupt() {
        var animated = S.webpExtended(width: 40, height: 30)
        animated[20] |= 0x02  // the VP8X animation flag, over a VP8 chunk
        #expect(
            ImageSniffer.checkStructure(animated, format: .webp)
                == .corrupt(reason: "WebP has no image data of the kind its header says"))
        #expect(ImageSniffer.checkStructure(S.webpExtended(width: 40, height: 30), format: .webp) == nil)
    }

    /// A BMP whose pixels are an embedded JPEG or PNG (BI_JPEG, BI_PNG): the embedded file is
    /// walked like any other, or any bytes of its size (a page of HTML) passed as the image.
    @Test func aBMPsEmbeddedFileIsWalked() {
        func bmp(compression: Int, payload: [UInt8], os2: Bool = false) -> [UInt8] {
            let header =
                S.le32(os2 ? 64 : 40) + S.le32(4) + S.le32(3) + S.le16(1) + S.le16(os2 ? 24 : 0) + S.le32(compression)
                + S.le32(payload.count) + S.le32(2835) + S.le32(2835) + S.le32(0) + S.le32(0)
                + (os2 ? [UInt8](repeating: 0, count: 24) : [])
            return S.ascii("BM") + S.le32(14 + header.count + payload.count) + [0, 0, 0, 0]
                + S.le32(14 + header.count) + header + payload
        }
        let png = S.png(width: 4, height: 3)
        let jpeg = S.jpeg(width: 4, height: 3)
        #expect(ImageSniffer.checkStructure(bmp(compression: 5, payload: png), format: .bmp) == nil)
        #expect(ImageSniffer.checkStructure(bmp(compression: 4, payload: jpeg), format: .bmp) == nil)
        let html = Array("<html><body>not an image</body></html>".utf8)
        #expect(
            ImageSniffer.checkStructure(bmp(compression: 5, payload: html), format: .bmp)
                == .corrupt(reason: "not a PNG signature"))
        #expect(
            ImageSniffer.checkStructure(bmp(compression: 4, payload: html), format: .bmp)
                == .corrupt(reason: "not a JPEG signature"))
        // OS/2 2.x's compression 4 is RLE24, not an embedded JPEG.
        #expect(ImageSniffer.checkStructure(bmp(compression: 4, payload: [0, 1], os2: true), format: .bmp) == nil)
        #expect(
            ImageSniffer.checkStructure(bmp(compression: 5, payload: Array(png.dropLast(12))), format: .bmp)
                == .truncated(reason: "bmp ends before its end"))
        #expect(
            ImageSniffer.checkStructure(bmp(compression: 4, payload: Array(jpeg.dropLast(2))), format: .bmp)
                == .truncated(reason: "bmp ends before its end"))
    }

    @Test func aTIFFStripOutsideTheFileIsTruncated() {
        var tiff = S.tiff(width: 4, height: 3, bigEndian: false, longDimensions: false, ifdLast: false)
        // Entry 5 (StripOffsets, LONG) of the IFD at 8: its value at 8 + 2 + 12 * 5 + 8.
        tiff[8 + 2 + 12 * 5 + 8] = 0xF0
        #expect(ImageSniffer.checkStructure(tiff, format: .tiff) == .truncated(reason: "tiff ends before its end"))
    }

    /// A single strip past the file's end makes the walk compute the image's size from the
    /// layout tags, which a LONG can set to anything: their product must not trap (issue 33).
    @Test(arguments: [
        (UInt32.max, UInt32.max),  // bits × samples overflows
        (2_147_483_649, 4_294_967_294),  // the bits of a row land within 7 of Int.max
    ])
    func hugeLayoutTagsAreNotAnOverflow(bitsPerSample: UInt32, samplesPerPixel: UInt32) {
        func le16(_ v: Int) -> [UInt8] { [UInt8(v & 0xFF), UInt8(v >> 8 & 0xFF)] }
        func le32(_ v: UInt32) -> [UInt8] { (0..<4).map { UInt8(truncatingIfNeeded: v >> (8 * $0)) } }
        func entry(_ tag: Int, _ type: Int, _ value: UInt32) -> [UInt8] {
            le16(tag) + le16(type) + le32(1) + (type == 3 ? le16(Int(value)) + [0, 0] : le32(value))
        }
        var tiff = S.ascii("II") + le16(42) + le32(8) + le16(6)
        tiff += entry(256, 3, 1) + entry(257, 3, 1) + entry(258, 4, bitsPerSample)
        tiff += entry(273, 4, 1000) + entry(277, 4, samplesPerPixel) + entry(279, 4, 16) + le32(0)
        let truncated = StructureProblem.truncated(reason: "tiff ends before its end")
        #expect(ImageSniffer.checkStructure(tiff, format: .tiff) == truncated)
        // The path every complete body takes: a 1 × 1 TIFF by its header, refused by the walk.
        guard case .failure(let refusal) = ImagePolicy.check(tiff, maxPixels: 1_000_000) else {
            Issue.record("a TIFF whose strip runs past its end was kept")
            return
        }
        #expect(refusal == .structure(truncated))
    }

    /// Size 0 (to the end of the file) is kept as `Int.max`. A 64-bit size that makes a box end
    /// exactly there must not pass for it: the box claims about 8 EiB.
    @Test func aBoxWhoseSixtyFourBitSizeEndsAtIntMaxIsNotToTheEndOfTheFile() throws {
        let heic = S.heic(width: 64, height: 48)
        let mdat = try #require(
            (0..<(heic.count - 8)).first { heic[$0 + 4] == 0x6D && Array(heic[($0 + 4)..<($0 + 8)]) == S.ascii("mdat") }
        )
        let size = UInt64(Int.max - mdat)
        let largesize: [UInt8] =
            [0, 0, 0, 1] + S.ascii("mdat") + (0..<8).map { UInt8(truncatingIfNeeded: size >> (56 - 8 * $0)) }
        let claimed = Array(heic[..<mdat]) + largesize + Array(heic[(mdat + 8)...])
        #expect(ImageSniffer.checkStructure(claimed, format: .heic) == .corrupt(reason: "bad ISOBMFF box size"))
    }

    @Test func aHEIFExtentOutsideTheFileIsTruncated() {
        let heic = S.heic(width: 64, height: 48)
        #expect(ImageSniffer.checkStructure(heic + [0, 0, 0, 8] + S.ascii("free"), format: .heic) == nil)
        // The mdat box cut off: its extent is gone, although every box left is whole.
        let withoutData = Array(heic.prefix(heic.count - 12))
        #expect(
            ImageSniffer.checkStructure(withoutData, format: .heic)
                == .truncated(reason: "heic ends before its end"))
    }

    /// A walk that moves forward at least a byte a step: thousands of frames cost a linear walk.
    @Test func aGIFOfThousandsOfFramesIsWalkedToItsTrailer() {
        let gif = StructureSamples.animatedGIF(frames: 5_000)
        #expect(ImageSniffer.checkStructure(gif, format: .gif) == nil)
        #expect(ImageSniffer.checkStructure(Array(gif.dropLast()), format: .gif) != nil)
    }

    /// The sliced CRC agrees with the byte-wise one at every length and alignment.
    @Test func theSlicedCRCAgreesWithTheByteWiseOne() {
        var rng = SplitMix64(state: 42)
        let bytes = (0..<300).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
        bytes.withUnsafeBytes { raw in
            let view = ImageSniffer.ByteView(raw)
            for start in 0..<9 {
                for count in stride(from: 0, through: 290, by: 7) {
                    #expect(
                        ImageSniffer.crc32Sliced(view, from: start, count: count)
                            == S.crc32(Array(bytes[start..<(start + count)])))
                }
            }
        }
    }
}
