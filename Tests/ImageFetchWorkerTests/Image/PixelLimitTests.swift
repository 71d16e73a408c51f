import Testing

@testable import ImageFetchWorker

/// The worker's pixel check bounds what a decoder would allocate, not just the header's size.
@Suite struct PixelLimitTests {
    @Test func aGIFFrameBeyondItsScreenIsTooManyPixels() throws {
        // A 32×32 screen holding a 65535×1321 frame at row 65280 (issue 19's file): a decoder that
        // grows the canvas allocates 65535 × 66601.
        let frame: [UInt8] = [0x2C, 0, 0, 0x00, 0xFF, 0xFF, 0xFF, 0x29, 0x05, 0, 2, 2, 0x44, 0x01, 0]
        let file = Array("GIF89a".utf8) + [32, 0, 32, 0, 0x80, 0, 0, 0xFF, 0xFF, 0xFF, 0, 0, 0] + frame + [0x3B]
        guard case .image(let info) = ImageSniffer.inspect(file) else {
            Issue.record("not an image")
            return
        }
        #expect(info.width == 32 && info.height == 32)
        let error = try #require(Worker.pixelLimitError(info, maxPixels: 50_000_000))
        #expect(error.code == .tooManyPixels)
        #expect(Worker.pixelLimitError(ImageInfo(format: .gif, width: 32, height: 32), maxPixels: 50_000_000) == nil)
    }

    @Test func theHeaderSizeStillCounts() {
        #expect(
            Worker.pixelLimitError(ImageInfo(format: .png, width: 10_000, height: 10_000), maxPixels: 50_000_000)?.code
                == .tooManyPixels)
        #expect(
            Worker.pixelLimitError(ImageInfo(format: .png, width: .max, height: 2), maxPixels: 50_000_000)?.code
                == .tooManyPixels)
    }
}
