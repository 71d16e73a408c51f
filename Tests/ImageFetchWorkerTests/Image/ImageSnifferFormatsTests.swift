import ImageSamples
import Testing

@testable import ImageFetchWorker

/// The cases of issue 19, each built byte by byte: HEIF primary item, grid and clap; JPEG stray
/// bytes; BigTIFF; GIF frames beyond the screen; PNG IHDR checks; and the optional facts.
@Suite struct ImageSnifferFormatsTests {
    typealias S = ImageSamples

    /// An ISOBMFF file whose primary item (`pitm`) has the properties `primary` (ipco indices,
    /// 1-based) among `properties`; item 2 is another image with `other`.
    static func heif(
        primaryType: String = "hvc1", properties: [[UInt8]], primary: [UInt8], other: [UInt8] = [],
        iloc: [UInt8]? = nil, idat: [UInt8]? = nil, trailer: [UInt8] = []
    ) -> [UInt8] {
        let hdlr = S.fullBox("hdlr", S.be32(0) + S.ascii("pict") + [UInt8](repeating: 0, count: 13))
        let pitm = S.fullBox("pitm", S.be16(1))
        let infe1 = S.box("infe", [2, 0, 0, 0] + S.be16(1) + S.be16(0) + S.ascii(primaryType) + [0])
        let infe2 = S.box("infe", [2, 0, 0, 0] + S.be16(2) + S.be16(0) + S.ascii("hvc1") + [0])
        let iinf = S.fullBox("iinf", S.be16(2) + infe1 + infe2)
        let ipco = S.box("ipco", properties.flatMap { $0 })
        let ipma = S.fullBox(
            "ipma",
            S.be32(2) + S.be16(1) + [UInt8(primary.count)] + primary
                + S.be16(2) + [UInt8(other.count)] + other)
        var meta = [0, 0, 0, 0] + hdlr + pitm + iinf + (iloc ?? []) + S.box("iprp", ipco + ipma)
        if let idat { meta += S.box("idat", idat) }
        return S.ftyp(major: "heic", compatible: ["mif1", "heic"]) + S.box("meta", meta) + trailer
    }

    static func ispe(_ w: Int, _ h: Int) -> [UInt8] { S.fullBox("ispe", S.be32(w) + S.be32(h)) }

    static func clap(_ w: Int, _ wd: Int, _ h: Int, _ hd: Int) -> [UInt8] {
        S.box("clap", S.be32(w) + S.be32(wd) + S.be32(h) + S.be32(hd) + S.be32(0) + S.be32(1) + S.be32(0) + S.be32(1))
    }

    static func info(_ bytes: [UInt8]) -> ImageInfo? {
        if case .image(let info) = ImageSniffer.inspect(bytes) { return info }
        return nil
    }

    @Test func heifFollowsThePrimaryItemNotTheLargestProperty() {
        // The primary is 64x64; another item is 96x64 (the old answer).
        let file = Self.heif(properties: [Self.ispe(96, 64), Self.ispe(64, 64)], primary: [0x82], other: [0x81])
        #expect(Self.info(file)?.width == 64 && Self.info(file)?.height == 64)
    }

    @Test func heifAppliesTheCleanAperture() {
        // 1044x932 coded, a clap of 1025x900: the primary's size is the aperture's.
        let file = Self.heif(properties: [Self.ispe(1044, 932), Self.clap(2050, 2, 900, 1)], primary: [0x81, 0x82])
        #expect(Self.info(file).map { ($0.width, $0.height) } ?? (0, 0) == (1025, 900))
        let tooWide = Self.heif(properties: [Self.ispe(100, 100), Self.clap(101, 1, 50, 1)], primary: [1, 2])
        #expect(Self.info(tooWide) == nil)
        let zeroDenominator = Self.heif(properties: [Self.ispe(100, 100), Self.clap(10, 0, 50, 1)], primary: [1, 2])
        #expect(Self.info(zeroDenominator) == nil)
    }

    @Test func heifGridFromIdatAndFromAFileOffset() {
        // A grid item of 2x1 tiles of 64x100 whose output is 29x100 (its ispe says so too).
        let grid: [UInt8] = [0, 0, 0, 1] + S.be16(29) + S.be16(100)
        // iloc version 1: offset and length 4 bytes, no base offset; item 1 in idat (method 1).
        let ilocIdat = S.box(
            "iloc",
            [1, 0, 0, 0, 0x44, 0x00] + S.be16(1) + S.be16(1) + S.be16(1) + S.be16(0)
                + S.be16(1) + S.be32(0) + S.be32(grid.count))
        let properties = [Self.ispe(64, 100), Self.ispe(29, 100)]
        let inIdat = Self.heif(
            primaryType: "grid", properties: properties, primary: [2], other: [1],
            iloc: ilocIdat, idat: grid)
        #expect(Self.info(inIdat).map { ($0.width, $0.height) } ?? (0, 0) == (29, 100))

        // The same grid at a file offset (method 0), after meta: found once those bytes arrive.
        func atOffset(_ offset: Int) -> [UInt8] {
            let iloc = S.box(
                "iloc",
                [1, 0, 0, 0, 0x44, 0x00] + S.be16(1) + S.be16(1) + S.be16(0) + S.be16(0)
                    + S.be16(1) + S.be32(offset) + S.be32(grid.count))
            return Self.heif(
                primaryType: "grid", properties: [Self.ispe(64, 100)], primary: [], other: [1],
                iloc: iloc, trailer: S.box("mdat", grid))
        }
        let probe = atOffset(0)
        let file = atOffset(probe.count - grid.count)
        #expect(Self.info(file).map { ($0.width, $0.height) } ?? (0, 0) == (29, 100))
        let prefix = Array(file.dropLast(3)).withUnsafeBytes { ImageSniffer.inspect($0, isComplete: false) }
        #expect(prefix == .needMoreData)
        #expect(Self.info(Array(file.dropLast(3))) == nil)
    }

    @Test func heifRotationAndMirrorGiveTheOrientation() {
        let irot = S.box("irot", [3]), imir = S.box("imir", [0])
        let file = Self.heif(properties: [Self.ispe(100, 50), irot, imir], primary: [1, 2, 3])
        let info = Self.info(file)
        // A quarter turn clockwise, then top and bottom exchanged: EXIF 7 (transverse).
        #expect(info?.orientation == 7)
        #expect(
            info.map { ($0.width, $0.height, $0.displayWidth, $0.displayHeight) } ?? (0, 0, 0, 0) == (100, 50, 50, 100))
        #expect(ImageSniffer.orientation(quarterTurnsAnticlockwise: 0, mirrorAxis: 1) == 2)
        #expect(ImageSniffer.orientation(quarterTurnsAnticlockwise: 2, mirrorAxis: nil) == 3)
        #expect(ImageSniffer.orientation(quarterTurnsAnticlockwise: 1, mirrorAxis: nil) == 8)
    }

    @Test func jpegSkipsStrayBytesBetweenSegments() {
        let stray = S.jpeg(width: 300, height: 200, beforeFrame: S.ascii("\0\u{12}junk") + [0xFF, 0x00])
        let info = Self.info(stray)
        #expect(info?.width == 300 && info?.height == 200 && info?.progressive == false)
        #expect(Self.info(S.jpeg(width: 8, height: 8, sof: 0xC2))?.progressive == true)
    }

    @Test func jpegExifOrientation() {
        let exif =
            S.ascii("Exif\0\0") + S.ascii("MM") + S.be16(42) + S.be32(8) + S.be16(1)
            + S.be16(274) + S.be16(3) + S.be32(1) + S.be16(6) + [0, 0] + S.be32(0)
        let info = Self.info(S.jpeg(width: 640, height: 480, beforeFrame: S.jpegSegment(0xE1, exif)))
        #expect(info?.orientation == 6 && info?.displayWidth == 480 && info?.displayHeight == 640)
    }

    @Test func bigTIFF() {
        // BigTIFF, little-endian: version 43, offset size 8, IFD at 16 with LONG8 and SHORT sizes.
        func entry(_ tag: Int, _ type: Int, _ value: [UInt8]) -> [UInt8] {
            S.le16(tag) + S.le16(type) + S.le32(1) + S.le32(0) + value + [UInt8](repeating: 0, count: 8 - value.count)
        }
        let file =
            S.ascii("II") + S.le16(43) + S.le16(8) + S.le16(0) + S.le32(16) + S.le32(0)
            + S.le32(3) + S.le32(0) + entry(256, 16, S.le32(70_000) + S.le32(0)) + entry(257, 3, S.le16(9))
            + entry(274, 3, S.le16(8)) + [UInt8](repeating: 0, count: 8)
        let info = Self.info(file)
        #expect(info?.format == .tiff && info?.width == 70_000 && info?.height == 9 && info?.orientation == 8)
    }

    @Test func gifFrameBeyondTheScreenCountsAgainstThePixelLimit() {
        // A 32x32 screen holding a 65535x1321 frame at row 65280 (the issue's file).
        let frame: [UInt8] =
            [0x2C] + S.le16(0) + S.le16(65_280) + S.le16(65_535) + S.le16(1321) + [0]
            + [2, 2, 0x44, 0x01, 0]
        let file =
            S.ascii("GIF89a") + S.le16(32) + S.le16(32) + [0x80, 0, 0] + [0xFF, 0xFF, 0xFF, 0, 0, 0]
            + [0x21, 0xF9, 4, 0, 0, 0, 0, 0] + frame + frame + [0x3B]
        guard let info = Self.info(file) else {
            Issue.record("not an image")
            return
        }
        #expect(info.width == 32 && info.height == 32 && info.frames == 2 && info.animated == true)
        #expect(info.canvasWidth == 65_535 && info.canvasHeight == 66_601)
        #expect(info.pixelCount == 65_535 * 66_601)
        #expect(info.exceedsPixels(50_000_000))
        #expect(!ImageInfo(format: .gif, width: 32, height: 32).exceedsPixels(50_000_000))
        // A GIF without any image is refused; one truncated after its first frame is what it shows.
        #expect(Self.info(Array(file.prefix(19)) + [0x3B]) == nil)
        #expect(Self.info(Array(file.prefix(40)))?.frames == 1)
    }

    /// A byte that starts no block ends the image for the structure walk (as in browsers); the
    /// frames counted must be the ones before it, not the ones Pillow would go on to read, of
    /// which the last may be cut.
    @Test func gifFramesAfterAStrayByteAreNotCounted() {
        let frame: [UInt8] = [0x2C] + S.le16(0) + S.le16(0) + S.le16(1) + S.le16(1) + [0] + [2, 2, 0x44, 0x01, 0]
        let screen = S.ascii("GIF89a") + S.le16(1) + S.le16(1) + [0x80, 0, 0] + [0xFF, 0xFF, 0xFF, 0, 0, 0]
        for tail in [frame + frame + [0x3B], frame + Array(frame.prefix(12))] {
            let file = screen + frame + [0x00] + tail
            #expect(ImageSniffer.checkStructure(file, format: .gif) == nil)
            let info = Self.info(file)
            #expect(info?.frames == 1 && info?.animated == false, "\(String(describing: info))")
        }
        let info = Self.info(screen + frame + frame + [0x3B])
        #expect(info?.frames == 2 && info?.animated == true)
    }

    @Test func pngIHDRIsChecked() {
        var badCRC = S.png(width: 2, height: 2)
        badCRC[29] ^= 1
        func ihdr(depth: UInt8, colour: UInt8, interlace: UInt8 = 0) -> [UInt8] {
            [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
                + S.pngChunk("IHDR", S.be32(1) + S.be32(1) + [depth, colour, 0, 0, interlace])
                + S.pngChunk("IDAT", [])
        }
        #expect(Self.info(badCRC) == nil)
        #expect(Self.info(ihdr(depth: 16, colour: 3)) == nil)  // no 16-bit palette
        #expect(Self.info(ihdr(depth: 4, colour: 2)) == nil)  // RGB is 8 or 16 bits
        #expect(Self.info(ihdr(depth: 8, colour: 5)) == nil)
        #expect(Self.info(ihdr(depth: 8, colour: 0, interlace: 2)) == nil)
        #expect(Self.info(ihdr(depth: 1, colour: 0, interlace: 1))?.width == 1)
        #expect(Self.info(ihdr(depth: 16, colour: 6))?.height == 1)
    }

    @Test func apngCountsFrames() {
        let png = S.png(width: 4, height: 4)
        let actl = S.pngChunk("acTL", S.be32(3) + S.be32(0))
        let apng = Array(png.prefix(33)) + actl + Array(png.dropFirst(33))
        let info = Self.info(apng)
        #expect(info?.frames == 3 && info?.animated == true)
    }

    @Test func animatedWebPCountsFramesOfTheWholeBody() {
        let vp8x = S.riffChunk("VP8X", [0x02, 0, 0, 0] + S.le24(99) + S.le24(49))
        let anim = S.riffChunk("ANIM", [0, 0, 0, 0, 0, 0])
        let frame = S.riffChunk("ANMF", [UInt8](repeating: 0, count: 16) + S.vp8Chunk(width: 100, height: 50))
        let file = S.riff(vp8x + anim + frame + frame)
        #expect(
            Self.info(file).map { ($0.width, $0.height, $0.frames, $0.animated) } ?? (0, 0, nil, nil)
                == (100, 50, 2, true))
        // A prefix answers from the header, leaving the count to the whole body.
        let prefix = file.withUnsafeBytes { ImageSniffer.inspect($0, isComplete: false) }
        guard case .image(let partial) = prefix else {
            Issue.record("\(prefix)")
            return
        }
        #expect(partial.frames == nil && partial.width == 100)
    }

    @Test func resultCarriesTheOptionalFacts() {
        var info = ImageInfo(format: .jpeg, width: 640, height: 480)
        info.frames = 1
        info.animated = false
        info.progressive = true
        info.orientation = 6
        var result = JobResult(job: Job(id: "a", url: "u"), status: .ok, durationMs: 1, worker: "w", finishedAt: 0)
        result.image = info
        let json = String(decoding: result.encoded(), as: UTF8.self)
        #expect(
            json.contains(
                #""width":640,"height":480,"frames":1,"animated":false,"progressive":true,"#
                    + #""orientation":6,"display_width":480,"display_height":640"#))
        result.image = ImageInfo(format: .png, width: 1, height: 1)
        let plain = String(decoding: result.encoded(), as: UTF8.self)
        #expect(!plain.contains("frames") && !plain.contains("orientation") && !plain.contains("display_"))
    }
}
