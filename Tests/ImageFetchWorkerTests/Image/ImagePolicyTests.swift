import ImageSamples
import Testing

@testable import ImageFetchWorker

/// Which bodies are kept as images, and the typed reason for each that is not; the result codes
/// they become are `JobError+ImageRefusal.swift`'s (and `BadImageInputTests`').
@Suite struct ImagePolicyTests {
    @Test func aSmallImageIsKept() throws {
        let info = try ImagePolicy.check(ImageSamples.png(width: 3, height: 2), maxPixels: 100).get()
        #expect(info.format == .png && info.width == 3 && info.height == 2)
    }

    @Test func eachRefusalSaysWhy() {
        #expect(ImagePolicy.check(Array("<html></html>".utf8), maxPixels: 100).refusal.map(Self.kind) == "notAnImage")
        #expect(ImagePolicy.check([], maxPixels: 100).refusal.map(Self.kind) == "notAnImage")
        #expect(
            ImagePolicy.check(ImageSamples.png(width: 11, height: 10), maxPixels: 100).refusal
                == .tooManyPixels(width: 11, height: 10))
        let cut = Array(ImageSamples.png(width: 3, height: 2).dropLast(6))
        #expect(ImagePolicy.check(cut, maxPixels: 100).refusal.map(Self.kind) == "structure")
    }

    /// A file cut inside its headers is a cut image once its signature is all there: a TIFF
    /// whose IFD follows the image data, a JPEG with a large EXIF segment, a HEIF whose `meta`
    /// follows `mdat`. It was `not_an_image`.
    @Test(arguments: [
        (
            "JPEG",
            ImageSamples.jpeg(
                width: 8, height: 8, beforeFrame: ImageSamples.jpegSegment(0xE1, Array(repeating: 7, count: 4000)))
        ),
        ("PNG", ImageSamples.png(width: 8, height: 8)),
        ("GIF", ImageSamples.gif(width: 8, height: 8)),
        ("WebP", ImageSamples.webpExtended(width: 8, height: 8)),
        ("BMP", ImageSamples.bmpInfo(width: 8, height: 8)),
        ("TIFF", ImageSamples.tiff(width: 8, height: 8, bigEndian: true, longDimensions: false, ifdLast: true)),
        ("HEIC", ImageSamples.heic(width: 8, height: 8)),
    ])
    func aFileCutInItsHeadersIsTruncated(format: String, whole: [UInt8]) throws {
        try #require(ImagePolicy.check(whole, maxPixels: 1000).refusal == nil)
        var signature = 0
        for length in 1..<whole.count {
            let cut = Array(whole.prefix(length))
            guard case .notAnImage = cut.withUnsafeBytes({ ImageSniffer.inspect($0, isComplete: true) }) else {
                continue  // the headers are whole: the structure walk judges the rest
            }
            switch ImagePolicy.check(cut, maxPixels: 1000).refusal {
            case .structure(.truncated)?:
                if signature == 0 { signature = length }
            case .notAnImage?:
                #expect(signature == 0, "\(format) cut at \(length): not an image after a cut image at \(signature)")
            case let other:
                Issue.record("\(format) cut at \(length): \(String(describing: other))")
            }
        }
        #expect(signature > 0, "no cut of the \(format) file was truncated")
        #expect(signature <= 18 || format == "HEIC", "\(format): truncated only from \(signature) bytes")
    }

    /// Fewer bytes than a signature, or a signature that is not one, is no image.
    @Test(arguments: [
        [0xFF, 0xD8], [0x89, 0x50, 0x4E, 0x47], Array("GIF8".utf8), Array("GIF12a".utf8),
        Array("RIFF\0\0\0\0WAVEfmt ".utf8),
        Array("BM is not a bitmap".utf8), Array("II*".utf8), [0, 0, 0, 24] + Array("ftypmp42".utf8),
    ])
    func aBodyWithoutAWholeSignatureIsNoImage(body: [UInt8]) {
        #expect(ImagePolicy.check(body, maxPixels: 1000).refusal.map(Self.kind) == "notAnImage")
    }

    @Test func aPrefixStopsTheTransferOnlyForThePixelLimit() {
        let big = ImageSamples.png(width: 200, height: 200)
        let verdict = big.withUnsafeBytes { ImagePolicy.checkPrefix($0, maxPixels: 100) }
        #expect(verdict == .refuse(.tooManyPixels(width: 200, height: 200)))
        let html = Array("<html></html>".utf8)
        #expect(html.withUnsafeBytes { ImagePolicy.checkPrefix($0, maxPixels: 100) } == .accept)
        #expect(big.prefix(4).withUnsafeBytes { ImagePolicy.checkPrefix($0, maxPixels: 100) } == .needMore)
    }

    @Test func theRefusalsKeepTheirResultCodesAndMessages() {
        #expect(
            JobError(ImagePolicy.Refusal.tooManyPixels(width: 7, height: 9))
                == JobError(.tooManyPixels, "the image needs 7 × 9 pixels, over fetch.max_pixels"))
        #expect(
            JobError(ImagePolicy.Refusal.notAnImage(reason: "no signature"))
                == JobError(.notAnImage, "the body is not a supported image (no signature)"))
        #expect(
            JobError(ImagePolicy.Refusal.notAnImage(reason: nil))
                == JobError(.notAnImage, "the body is not a supported image"))
    }

    static func kind(_ refusal: ImagePolicy.Refusal) -> String {
        switch refusal {
        case .notAnImage: "notAnImage"
        case .tooManyPixels: "tooManyPixels"
        case .structure: "structure"
        case .decode: "decode"
        }
    }
}

extension Result where Failure == ImagePolicy.Refusal {
    fileprivate var refusal: ImagePolicy.Refusal? {
        if case .failure(let refusal) = self { return refusal }
        return nil
    }
}
