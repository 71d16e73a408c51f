import Foundation
import Testing

@testable import ImageFetchWorker

/// `image.verify = decode`: libvips on real files (Tests/Fixtures/images/decode-*, README there).
@Suite struct ImageDecoderTests {
    static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
        .appendingPathComponent("Fixtures/images")

    static func fixture(_ name: String) throws -> [UInt8] {
        [UInt8](try Data(contentsOf: fixtures.appendingPathComponent(name)))
    }

    static func decodeMode(_ body: [UInt8], maxPixels: Int = 50_000_000) -> Result<ImageInfo, JobError> {
        Worker.checkImage(body, maxPixels: maxPixels, verify: .decode)
    }

    static func hamming(_ a: UInt64, _ b: UInt64) -> Int { (a ^ b).nonzeroBitCount }

    static func crc(_ bytes: ArraySlice<UInt8>) -> UInt32 {
        var c: UInt32 = 0xFFFF_FFFF
        for byte in bytes {
            c ^= UInt32(byte)
            for _ in 0..<8 { c = c & 1 == 1 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
        }
        return ~c
    }

    static func be(_ v: UInt32) -> [UInt8] {
        [UInt8(v >> 24), UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)]
    }

    /// A PNG whose header says 60,000 × 60,000 RGB (3.6 billion pixels) over a few bytes of data:
    /// its structure is complete (every CRC right, `IEND`), its pixels could never decode.
    static func pngBomb(width: UInt32 = 60_000, height: UInt32 = 60_000) -> [UInt8] {
        func chunk(_ name: String, _ data: [UInt8]) -> [UInt8] {
            let body = Array(name.utf8) + data
            return be(UInt32(data.count)) + body + be(crc(body[...]))
        }
        // zlib header, one final stored block of 16 zero bytes, Adler-32 of them.
        let idat: [UInt8] =
            [0x78, 0x01, 0x01, 0x10, 0x00, 0xEF, 0xFF] + [UInt8](repeating: 0, count: 16)
            + [0x00, 0x10, 0x00, 0x01]
        return [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
            + chunk("IHDR", be(width) + be(height) + [8, 2, 0, 0, 0]) + chunk("IDAT", idat) + chunk("IEND", [])
    }

    @Test func aDecompressionBombIsRefusedByItsHeaderWithoutDecoding() {
        let bomb = Self.pngBomb()
        #expect(bomb.withUnsafeBytes { ImageSniffer.checkStructure($0, format: .png) } == nil)
        #expect(Self.decodeMode(bomb).failureCode == .tooManyPixels)
        // The decoder reads libvips's header before any pixel: its own limit answers, although the
        // pixels would fail to decode (16 bytes for 3.6 billion pixels).
        let direct = bomb.withUnsafeBytes { ImageDecoder.decode($0, format: .png, maxPixels: 50_000_000) }
        #expect(direct == .failure(.tooManyPixels(width: 60_000, height: 60_000)))
        // Under the limit the same bytes are decoded, and refused as damaged.
        let small = Self.pngBomb(width: 300, height: 300)
        #expect(Self.decodeMode(small).failureCode == .corruptImage)
    }

    @Test func aGoodImageGetsItsDecodedSizeAndHash() throws {
        let png = try Self.fixture("decode-plasma.png")
        let info = try Self.decodeMode(png).get()
        #expect(info.decoded?.width == 96 && info.decoded?.height == 64)
        #expect(info.decoded?.dhashHex.count == 16)
        // Structure mode carries none of it.
        #expect(try Worker.checkImage(png, maxPixels: 50_000_000, verify: .structure).get().decoded == nil)
        // The decoder's own pixel limit, for a limit under the image.
        let refused = png.withUnsafeBytes { ImageDecoder.decode($0, format: .png, maxPixels: 96 * 64 - 1) }
        #expect(refused == .failure(.tooManyPixels(width: 96, height: 64)))
    }

    @Test func theSamePictureHashesAlikeAcrossEncodingsAndOrientation() throws {
        let png = try #require(try Self.decodeMode(Self.fixture("decode-plasma.png")).get().decoded)
        let jpeg = try #require(try Self.decodeMode(Self.fixture("decode-plasma.jpg")).get().decoded)
        let turned = try Self.decodeMode(Self.fixture("decode-plasma-exif6.jpg")).get()
        let other = try #require(try Self.decodeMode(Self.fixture("decode-swirl.png")).get().decoded)
        // Stored 64 × 96 with orientation 6: shown 96 × 64, the same picture.
        #expect(turned.width == 64 && turned.height == 96 && turned.orientation == 6)
        let upright = try #require(turned.decoded)
        #expect(upright.width == 96 && upright.height == 64)
        #expect(Self.hamming(png.dhash, jpeg.dhash) <= 6, "png \(png.dhashHex) jpeg \(jpeg.dhashHex)")
        #expect(Self.hamming(png.dhash, upright.dhash) <= 6, "png \(png.dhashHex) turned \(upright.dhashHex)")
        #expect(Self.hamming(png.dhash, other.dhash) >= 20, "png \(png.dhashHex) other \(other.dhashHex)")
    }

    @Test func damagedPixelsAreCorruptNotAGreyFill() throws {
        // A PNG whose compressed pixels are damaged but whose chunk CRCs are made right again: the
        // structure walk accepts it, the decode does not.
        var png = try Self.fixture("decode-plasma.png")
        let idat = try #require((8..<png.count - 4).first { png[$0..<$0 + 4] == [0x49, 0x44, 0x41, 0x54] })
        let length = Int(png[idat - 4]) << 24 | Int(png[idat - 3]) << 16 | Int(png[idat - 2]) << 8 | Int(png[idat - 1])
        for i in (idat + 4 + length / 2)..<(idat + 4 + length / 2 + 24) { png[i] ^= 0x5A }
        let crc = Self.be(Self.crc(png[idat..<idat + 4 + length]))
        png.replaceSubrange((idat + 4 + length)..<(idat + 8 + length), with: crc)
        #expect(try Worker.checkImage(png, maxPixels: 50_000_000, verify: .structure).get().decoded == nil)
        #expect(Self.decodeMode(png).failureCode == .corruptImage)
        // A JPEG cut inside its scan: the structure walk says truncated; the decoder alone refuses it too.
        let jpeg = try Self.fixture("decode-plasma.jpg")
        let cut = Array(jpeg.prefix(jpeg.count * 2 / 3))
        #expect(Self.decodeMode(cut).failureCode == .truncated)
        let decoded = cut.withUnsafeBytes { ImageDecoder.decode($0, format: .jpeg, maxPixels: 50_000_000) }
        guard case .failure(.undecodable) = decoded else {
            Issue.record("a cut JPEG decoded: \(decoded)")
            return
        }
    }

    @Test func dHashSetsABitWhereTheRightNeighbourIsBrighter() {
        var grey = [UInt8](repeating: 100, count: 72)
        grey[1] = 200  // row 0: pair 0 rises, pair 1 falls
        grey[71] = 200  // row 7: the last pair rises
        #expect(ImageDecoder.dHash(grey9x8: grey) == UInt64(1) << 63 | 1)
        #expect(DecodedFacts(width: 1, height: 1, dhash: 0xAB).dhashHex == "00000000000000ab")
    }

    @Test func animatedFramesAreDecodedWithinThePixelLimit() {
        func frames(_ format: ImageFormat, _ pages: Int, _ framePixels: Int) -> Int {
            ImageDecoder.framesToDecode(format: format, pages: pages, framePixels: framePixels, maxPixels: 50_000_000)
        }
        #expect(frames(.gif, 1000, 1_000_000) == 50)
        #expect(frames(.webp, 3, 100) == 3)
        #expect(frames(.gif, 9, 49_000_000) == 1)
        #expect(frames(.tiff, 9, 100) == 1)
    }

    @Test func bmpKeepsItsStructureWalkAndCarriesNoDecodedFacts() {
        #expect(!ImageDecoder.decodes(.bmp))
        let bmp: [UInt8] = [0x42, 0x4D]  // not decoded at all: the format decides
        #expect(bmp.withUnsafeBytes { ImageDecoder.decode($0, format: .bmp, maxPixels: 1) } == .success(nil))
    }
}

extension Result where Failure == JobError {
    fileprivate var failureCode: JobError.Code? {
        if case .failure(let error) = self { return error.code }
        return nil
    }
}
