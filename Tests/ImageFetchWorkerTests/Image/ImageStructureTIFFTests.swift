import ImageSamples
import Testing

@testable import ImageFetchWorker

/// The TIFF walk follows a chain of IFDs that the file itself describes. A hostile file must not
/// make it read more than about its own size: not by pointing an IFD back at itself, nor by
/// pointing many IFDs at one huge strip array.
@Suite struct ImageStructureTIFFTests {
    static func le16(_ v: Int) -> [UInt8] { [UInt8(v & 0xFF), UInt8(v >> 8 & 0xFF)] }
    static func le32(_ v: Int) -> [UInt8] { (0..<4).map { UInt8(truncatingIfNeeded: v >> (8 * $0)) } }
    static func entry(_ tag: Int, _ type: Int, count: Int, _ value: Int) -> [UInt8] {
        le16(tag) + le16(type) + le32(count) + le32(value)
    }

    static let ifdSize = 2 + 4 * 12 + 4

    /// `ifds` IFDs of a 1 × 1 image, at 8, 62, 116 …, the last pointing to `lastNext`. Each has
    /// StripOffsets of `strips` SHORTs (all 0: strips at the file's start) and StripByteCounts of
    /// as many (all 1) after the IFDs, one pair of arrays for all (`shared`) or one each.
    static func tiff(strips: Int, ifds: Int, shared: Bool = true, lastNext: (Int) -> Int) -> [UInt8] {
        let arraysAt = 8 + ifds * ifdSize
        let pairs = shared ? 1 : ifds
        var bytes = Array("II".utf8) + le16(42) + le32(8)
        for index in 0..<ifds {
            let at = 8 + index * ifdSize
            let offsetsAt = arraysAt + (shared ? 0 : index * 4 * strips)
            bytes += le16(4) + entry(256, 3, count: 1, 1) + entry(257, 3, count: 1, 1)
            bytes += entry(273, 3, count: strips, offsetsAt) + entry(279, 3, count: strips, offsetsAt + 2 * strips)
            bytes += le32(index == ifds - 1 ? lastNext(at) : at + ifdSize)
        }
        for _ in 0..<pairs {
            bytes += [UInt8](repeating: 0, count: 2 * strips) + Array(repeating: le16(1), count: strips).flatMap { $0 }
        }
        return bytes
    }

    @Test func anIFDThatPointsBackAtItselfIsWalkedOnce() {
        let file = Self.tiff(strips: 100_000, ifds: 1) { $0 }
        let walk = ImageSniffer.tiffWalk(file)
        #expect(walk.problem == nil)
        #expect(walk.reads <= 2 * file.count, "\(walk.reads) reads for \(file.count) bytes")
    }

    @Test func manyIFDsOverOneArrayCostNoMoreThanTheBody() {
        let file = Self.tiff(strips: 100_000, ifds: 64) { _ in 0 }
        let walk = ImageSniffer.tiffWalk(file)
        #expect(walk.problem == nil)
        #expect(walk.reads <= 2 * file.count, "\(walk.reads) reads for \(file.count) bytes")
    }

    /// Past the 64 IFDs walked, the chain's next IFD must still start inside the body: a file of
    /// more pages cut after the 64th passed as `ok`.
    @Test func aChainCutAfterTheIFDsWalkedIsTruncated() {
        #expect(ImageSniffer.tiffWalk(Self.tiff(strips: 1, ifds: 70) { _ in 0 }).problem == nil)
        let cut = Self.tiff(strips: 1, ifds: 64) { _ in 1_000_000 }
        #expect(ImageSniffer.tiffWalk(cut).problem == .truncated(reason: "tiff ends before its end"))
    }

    /// A multi-page file whose pages each have their own strips is walked to its last page.
    @Test func pagesWithTheirOwnStripsAreAllChecked() {
        var file = Self.tiff(strips: 1_000, ifds: 8, shared: false) { _ in 0 }
        #expect(ImageSniffer.tiffWalk(file).problem == nil)
        // The last IFD's array moved past the end: the walk reaches it.
        let lastIFD = 8 + 7 * Self.ifdSize
        file[lastIFD + 2 + 2 * 12 + 8] = 0xF0
        file[lastIFD + 2 + 2 * 12 + 9] = 0xFF
        #expect(ImageSniffer.tiffWalk(file).problem == .truncated(reason: "tiff ends before its end"))
    }

    /// A single uncompressed strip whose byte count is missing or 0: libtiff computes it from the
    /// image's size (4 × 3 bytes here), so the walk must too, or a cut file passes as `ok`.
    @Test(arguments: ["missing", "zero"])
    func aSingleStripWithoutAByteCountIsCheckedAgainstTheImagesSize(count: String) {
        var file = ImageSamples.tiff(width: 4, height: 3, bigEndian: false, longDimensions: false, ifdLast: false)
        // Entry 8 of the IFD at 8 is StripByteCounts (tag 279): retag it, or set its value to 0.
        let entry = 8 + 2 + 12 * 8
        if count == "missing" {
            file[entry] = 0x18  // 280, MinSampleValue: no byte counts
        } else {
            file[entry + 8] = 0
        }
        #expect(ImageSniffer.checkStructure(file, format: .tiff) == nil)
        let cut = Array(file.prefix(file.count - 7))
        #expect(ImageSniffer.checkStructure(cut, format: .tiff) == .truncated(reason: "tiff ends before its end"))
    }

    /// Several strips need their byte counts: libtiff refuses a file without them ("missing
    /// required StripByteCounts") and a strip whose count is 0 or absent, so the walk cannot
    /// check where such a strip ends, and a cut one passed as `ok`.
    @Test(arguments: ["missing", "short", "zero"])
    func severalStripsWithoutTheirByteCountsAreRefused(counts: String) {
        // 4 strips of 1 × 1 bytes at 200, 201, 202, 203.
        var file = Self.le16(0x4949) + Self.le16(42) + Self.le32(8)
        let entries = counts == "missing" ? 4 : 5
        file += Self.le16(entries) + Self.entry(256, 3, count: 1, 1) + Self.entry(257, 3, count: 1, 4)
        file += Self.entry(278, 3, count: 1, 1) + Self.entry(273, 4, count: 4, 100)
        switch counts {
        case "short": file += Self.entry(279, 3, count: 2, 1)  // two SHORTs, inline: 1 and 0
        case "zero": file += Self.entry(279, 4, count: 4, 120)
        default: break
        }
        file += Self.le32(0)
        file += [UInt8](repeating: 0, count: 100 - file.count)
        file += [200, 201, 202, 203].flatMap { Self.le32($0) }
        file += [UInt8](repeating: 0, count: 120 - file.count)
        file += [1, 1, 1, 0].flatMap { Self.le32($0) }
        file += [UInt8](repeating: 7, count: 204 - file.count)
        #expect(ImageSniffer.checkStructure(file, format: .tiff) == .corrupt(reason: "TIFF strip without a byte count"))
    }

    /// Old-style JPEG (compression 6) is the exception: libtiff does not check its strips' byte
    /// counts, and its reader takes a count of 0 as an empty strip.
    @Test func oldStyleJPEGStripsMayGoWithoutByteCounts() {
        var file = Self.le16(0x4949) + Self.le16(42) + Self.le32(8)
        file += Self.le16(5) + Self.entry(256, 3, count: 1, 1) + Self.entry(257, 3, count: 1, 4)
        file += Self.entry(259, 3, count: 1, 6) + Self.entry(278, 3, count: 1, 1) + Self.entry(273, 4, count: 4, 100)
        file += Self.le32(0)
        file += [UInt8](repeating: 0, count: 100 - file.count)
        file += [120, 121, 122, 123].flatMap { Self.le32($0) }
        file += [UInt8](repeating: 7, count: 124 - file.count)
        #expect(ImageSniffer.checkStructure(file, format: .tiff) == nil)
    }

    /// One tile is not one strip: libtiff estimates a strip's size, never a tile's, whose declared
    /// size (16 × 16 here) is larger than the image's (10 × 10).
    @Test func aCutTileIsNotCheckedAgainstTheImagesSize() {
        var file = Self.le16(0x4949) + Self.le16(42) + Self.le32(8) + Self.le16(5)
        file += Self.entry(256, 3, count: 1, 10) + Self.entry(257, 3, count: 1, 10)
        file += Self.entry(259, 3, count: 1, 1) + Self.entry(324, 4, count: 1, 80) + Self.entry(325, 4, count: 1, 256)
        file += Self.le32(0) + [UInt8](repeating: 0, count: 80 - 74)
        #expect(file.count == 80)
        #expect(ImageSniffer.checkStructure(file + [UInt8](repeating: 7, count: 256), format: .tiff) == nil)
        #expect(
            ImageSniffer.checkStructure(file + [UInt8](repeating: 7, count: 150), format: .tiff)
                == .truncated(reason: "tiff ends before its end"))
    }
}
