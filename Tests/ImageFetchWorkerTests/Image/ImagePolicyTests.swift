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
