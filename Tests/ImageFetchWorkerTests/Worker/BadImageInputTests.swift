import ImageSamples
import Testing

@testable import ImageFetchWorker

private typealias S = ImageSamples

/// The bodies of issue 32's "Bad input", through the check the worker runs on every whole body
/// (`Worker.checkImage`): each gets its exact code, and nothing traps.
@Suite struct BadImageInputTests {
    private let maxPixels = 50_000_000

    private func code(_ body: [UInt8]) -> JobError.Code? {
        if case .failure(let error) = Worker.checkImage(body, maxPixels: maxPixels) { return error.code }
        return nil
    }

    /// A complete HTTP transfer of a cut file: the header alone passed, and the result was `ok`.
    @Test func aJPEGCutAfterItsHeaderIsTruncatedAndNotRetried() throws {
        let jpeg = S.jpeg(width: 640, height: 480)
        let cut = Array(jpeg.prefix(jpeg.count - 5))
        guard case .failure(let error) = Worker.checkImage(cut, maxPixels: maxPixels) else {
            Issue.record("a cut JPEG was accepted")
            return
        }
        #expect(error.code == .truncated)
        #expect(!error.retryable)
        #expect(error.message == "the image is cut short (jpeg ends before its end)")
    }

    /// With no length and no chunks, the connection's close ended the body, and a close that
    /// came early looks the same: the cut image is tried again, as a transfer cut mid-body is.
    @Test func aCutImageThatOnlyTheCloseEndedIsRetried() throws {
        let jpeg = S.jpeg(width: 640, height: 480)
        let cut = Array(jpeg.prefix(jpeg.count - 5))
        guard case .failure(let error) = Worker.checkImage(cut, endedByClose: true, maxPixels: maxPixels) else {
            Issue.record("a cut JPEG was accepted")
            return
        }
        #expect(error.code == .truncated)
        #expect(error.retryable)
        // Only a cut: a broken image is the same on every attempt.
        var broken = S.png(width: 7, height: 3)
        broken[broken.count - 13] ^= 0x01
        guard case .failure(let corrupt) = Worker.checkImage(broken, endedByClose: true, maxPixels: maxPixels) else {
            Issue.record("a corrupt PNG was accepted")
            return
        }
        #expect(corrupt.code == .corruptImage && !corrupt.retryable)
    }

    @Test func aProgressiveJPEGCutMidScanIsTruncated() {
        let jpeg = StructureSamples.progressiveJPEG()
        // Inside the second scan's entropy-coded data.
        let cut = Array(jpeg.prefix(jpeg.count - 6))
        #expect(code(cut) == .truncated)
        #expect(code(jpeg) == nil)
    }

    @Test func aPNGWithABadChunkCRCIsCorrupt() {
        var png = S.png(width: 7, height: 3)
        png[png.count - 13] ^= 0x01  // the IDAT's CRC
        #expect(code(png) == .corruptImage)
    }

    /// A body whose Content-Type says image but whose bytes are HTML, and the other way round: the
    /// bytes decide, and the Content-Type is never an input.
    @Test func aLyingContentTypeChangesNothing() {
        #expect(code(S.ascii("<!DOCTYPE html><html><body>404</body></html>")) == .notAnImage)
        #expect(code(S.png(width: 7, height: 3)) == nil)
    }

    /// An image header with HTML behind it, where the image data should be: refused whether the
    /// HTML stands where the headers go on (read as lengths that run past the end: `truncated`,
    /// as for any file that ends in its headers) or where the image data is (the structure walk;
    /// the sniffer alone accepted those).
    @Test func aPolyglotWithHTMLInPlaceOfTheImageDataIsRefused() {
        let html = S.ascii("<html><script>alert(document.cookie)</script></html>")
        let screen = Array(S.gif(width: 1, height: 1).prefix(19))
        let descriptor: [UInt8] = [0x2C] + S.le16(0) + S.le16(0) + S.le16(1) + S.le16(1) + [0]
        #expect(code(screen + html) == .truncated)
        #expect(code(screen + descriptor + html) == .truncated)
        let png = S.png(width: 7, height: 3)
        #expect(code(Array(png.prefix(33)) + html) == .truncated)
        // IHDR and IDAT, then HTML where IEND should be.
        #expect(code(Array(png.prefix(png.count - 12)) + html) == .corruptImage)
        let jpeg = S.jpeg(width: 8, height: 8)
        #expect(code(Array(jpeg.prefix(jpeg.count - 6)) + html) == .truncated)
    }

    /// A complete image with HTML after its end marker is accepted: decoders show the image, and
    /// the stored object's type is the image's (docs/image-formats.md, "Bytes after the end").
    @Test func aCompleteImageWithHTMLAfterItsEndIsAccepted() {
        let html = S.ascii("<html><script>alert(1)</script></html>")
        #expect(code(S.png(width: 7, height: 3) + html) == nil)
        #expect(code(S.jpeg(width: 8, height: 8) + html) == nil)
    }

    /// A valid structure whose header asks for far more pixels than its bytes: refused by the
    /// header alone, before any walk.
    @Test func aDecompressionBombWithAValidStructureIsTooManyPixels() {
        let ihdr = S.be32(60_000) + S.be32(60_000) + [8, 0, 0, 0, 0]
        let idat: [UInt8] = [0x78, 0x9C, 0xED, 0xC1, 0x01, 0x0D, 0x00, 0x00, 0x00, 0xC2, 0xA0]
        let signature: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
        let bomb = signature + S.pngChunk("IHDR", ihdr) + S.pngChunk("IDAT", idat) + S.pngChunk("IEND", [])
        #expect(ImageSniffer.checkStructure(bomb, format: .png) == nil)
        #expect(code(bomb) == .tooManyPixels)
    }

    /// Thousands of frames are walked once, linearly; within the pixel limit the GIF is an image.
    @Test func aGIFOfThousandsOfFramesIsAnImage() throws {
        let gif = StructureSamples.animatedGIF(frames: 5_000)
        let info = try Worker.checkImage(gif, maxPixels: maxPixels).get()
        #expect(info.frames == 5_000)
        #expect(code(Array(gif.dropLast())) == .truncated)
    }

    /// Pillow reads a BMP whatever its plane count says (issue 32: one was refused).
    @Test func aBMPWithAnOddPlaneCountIsAnImage() throws {
        var bmp = S.bmpInfo(width: 5, height: 4)
        bmp[26] = 3
        let info = try Worker.checkImage(bmp, maxPixels: maxPixels).get()
        #expect(info.format == .bmp && info.width == 5 && info.height == 4)
        var core = S.bmpCore(width: 3, height: 2)
        core[22] = 0
        #expect(code(core) == nil)
    }

    /// `pitm` names a thumbnail of another image: libheif, and so pillow-heif, show that other
    /// image (issue 32: 1197 × 1227 where pillow-heif gives 564 × 870).
    @Test func aHEICWhosePrimaryItemIsAThumbnailGivesTheImageItIsAThumbnailOf() throws {
        let info = try Worker.checkImage(heicWithThumbnailAsPrimary(), maxPixels: maxPixels).get()
        #expect(info.format == .heic)
        #expect(info.width == 564 && info.height == 870)
    }

    /// Item 1 (1197 × 1227) is a thumbnail of item 2 (564 × 870), and `pitm` names item 1.
    private func heicWithThumbnailAsPrimary() -> [UInt8] {
        let hdlr = S.fullBox("hdlr", S.be32(0) + S.ascii("pict") + [UInt8](repeating: 0, count: 12) + [0])
        let pitm = S.fullBox("pitm", S.be16(1))
        func infe(_ id: Int) -> [UInt8] {
            S.box("infe", [2, 0, 0, 0] + S.be16(id) + S.be16(0) + S.ascii("hvc1") + [0])
        }
        let iinf = S.fullBox("iinf", S.be16(2) + infe(1) + infe(2))
        let iref = S.fullBox("iref", S.box("thmb", S.be16(1) + S.be16(1) + S.be16(2)))
        let ipco = S.box(
            "ipco",
            S.box("hvcC", [1, 0, 0, 0]) + S.fullBox("ispe", S.be32(1197) + S.be32(1227))
                + S.fullBox("ispe", S.be32(564) + S.be32(870)))
        let ipma = S.fullBox("ipma", S.be32(2) + S.be16(1) + [2, 0x81, 0x02] + S.be16(2) + [2, 0x81, 0x03])
        let iprp = S.box("iprp", ipco + ipma)
        let ftyp = S.ftyp(major: "heic", compatible: ["mif1", "heic"])
        func iloc(_ at: Int) -> [UInt8] {
            S.fullBox(
                "iloc",
                [0x44, 0x00] + S.be16(2) + S.be16(1) + S.be16(0) + S.be16(1) + S.be32(at) + S.be32(2)
                    + S.be16(2) + S.be16(0) + S.be16(1) + S.be32(at + 2) + S.be32(2))
        }
        let metaSize = 12 + hdlr.count + pitm.count + iinf.count + iref.count + iloc(0).count + iprp.count
        let meta = S.fullBox("meta", hdlr + pitm + iinf + iprp + iref + iloc(ftyp.count + metaSize + 8))
        return ftyp + meta + S.box("mdat", [1, 2, 3, 4])
    }
}
