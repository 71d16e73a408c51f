import ImageSamples
import Testing

@testable import ImageFetchWorker

// MARK: - Samples: valid minimal files of every format (the ImageSamples target builds them)

fileprivate typealias Samples = ImageSamples

extension ImageSamples {
    /// Every sample with the answer expected for it.
    fileprivate static let all: [(name: String, bytes: [UInt8], info: ImageInfo)] = [
        ("png 1x1", png(width: 1, height: 1), still(.png, 1, 1)),
        ("png 7x3", png(width: 7, height: 3), still(.png, 7, 3)),
        ("jpeg baseline", jpeg(width: 640, height: 480), still(.jpeg, 640, 480)),
        (
            "jpeg progressive, fill bytes, TEM, RST, APP1",
            jpeg(
                width: 1, height: 65_535, sof: 0xC2,
                beforeFrame: jpegSegment(0xE1, ascii("Exif\0\0") + [UInt8](repeating: 0xFF, count: 300))
                    + [0xFF, 0x01, 0xFF, 0xD0, 0xFF, 0xFF, 0xFF]
            ),
            still(.jpeg, 1, 65_535, progressive: true)
        ),
        (
            "jpeg with DHT/DAC/JPG before the frame",
            jpeg(
                width: 300, height: 200,
                beforeFrame: jpegSegment(0xC4, [0x08, 0x00, 0x09, 0x00, 0x07, 0x03])
                    + jpegSegment(0xCC, [0x08, 0x00, 0x09, 0x00, 0x07, 0x03])
                    + jpegSegment(0xC8, [0x08, 0x00, 0x09, 0x00, 0x07, 0x03])
            ),
            still(.jpeg, 300, 200)
        ),
        ("gif89a 1x1", gif(width: 1, height: 1), still(.gif, 1, 1)),
        ("gif87a", gif(width: 300, height: 65_535, version: "87a"), still(.gif, 300, 65_535)),
        ("webp lossy", webpLossy(width: 400, height: 301), still(.webp, 400, 301)),
        ("webp lossless", webpLossless(width: 16_384, height: 3), still(.webp, 16_384, 3)),
        ("webp extended", webpExtended(width: 20_000, height: 1), still(.webp, 20_000, 1)),
        ("bmp core", bmpCore(width: 3, height: 2), still(.bmp, 3, 2)),
        ("bmp info bottom-up", bmpInfo(width: 5, height: 4), still(.bmp, 5, 4)),
        ("bmp info top-down", bmpInfo(width: 2, height: -7), still(.bmp, 2, 7)),
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
        ("avif", avif(width: 1920, height: 1080), sequenceless(.avif, 1920, 1080)),
        ("heic", heic(width: 4032, height: 3024), sequenceless(.heic, 4032, 3024)),
        (
            "heic as mif1 with heic compatible",
            heif(major: "mif1", compatible: ["mif1", "heic"], codec: "hvc1", width: 100, height: 50),
            sequenceless(.heic, 100, 50)
        ),
        (
            "avif, free box with 64-bit size, meta of size 0",
            heif(
                major: "avif", compatible: ["mif1"], codec: "av01", width: 64, height: 48,
                beforeMeta: be32(1) + ascii("free") + be32(0) + be32(20) + [1, 2, 3, 4], metaSizeZero: true
            ),
            sequenceless(.avif, 64, 48)
        ),
    ]
}

/// A still image as the sniffer describes a whole body: one frame, not animated, and for a JPEG
/// whether it is progressive.
fileprivate func still(_ format: ImageFormat, _ width: Int, _ height: Int, progressive: Bool = false) -> ImageInfo {
    var info = ImageInfo(format: format, width: width, height: height)
    info.frames = 1
    info.animated = false
    info.progressive = format == .jpeg ? progressive : nil
    return info
}

/// A HEIC or AVIF still image: frames are not counted, and no sequence brand.
fileprivate func sequenceless(_ format: ImageFormat, _ width: Int, _ height: Int) -> ImageInfo {
    var info = ImageInfo(format: format, width: width, height: height)
    info.animated = false
    return info
}

/// Whether a prefix's answer agrees with the whole body's.
fileprivate func consistent(_ partial: ImageInspection, _ whole: ImageInspection) -> Bool {
    switch (partial, whole) {
    case (.image(let p), .image(let w)): return p.isConsistent(withWhole: w)
    default: return partial == whole
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
        #expect(consistent(partial, complete))
    }
    if partial != .needMoreData { #expect(consistent(partial, complete)) }
}

// MARK: - Tests

@Suite struct ImageSnifferTests {
    @Test(arguments: Samples.all.indices)
    func recognisesSample(_ index: Int) {
        let sample = Samples.all[index]
        #expect(ImageSniffer.inspect(sample.bytes) == .image(sample.info), "\(sample.name)")
        let partial = sample.bytes.withUnsafeBytes { ImageSniffer.inspect($0, isComplete: false) }
        #expect(consistent(partial, .image(sample.info)), "\(sample.name): \(partial)")
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
                #expect(consistent(partial, expected), "\(sample.name) prefix \(length)")
            } else if partial != .needMoreData, consistent(partial, expected) {
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
        #expect(
            ImageFormat.allCases.map(\.fileExtension) == ["jpg", "png", "gif", "webp", "bmp", "tif", "avif", "heic"])
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
        let hugeBox =
            Samples.ftyp(major: "avif", compatible: []) + Samples.be32(1) + Array("free".utf8)
            + [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]
        let tinyLargeSize =
            Samples.ftyp(major: "avif", compatible: []) + Samples.be32(1) + Array("free".utf8)
            + Samples.be32(0) + Samples.be32(8)
        var riffAVI = Samples.webpLossy(width: 5, height: 5)
        riffAVI.replaceSubrange(8..<12, with: Array("AVI ".utf8))
        let bmpText = Array("BM is a band, their website is at example dot com".utf8)
        let bigTIFF: [UInt8] = [0x49, 0x49, 0x2B, 0x00, 0x08, 0x00, 0x00, 0x00]
        var tiffNoDimensions = Samples.tiff(
            width: 3, height: 3, bigEndian: false, longDimensions: false, ifdLast: false)
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
                let extreme: [UInt8] = [[0xFF, 0xFF, 0xFF, 0xFF], [0, 0, 0, 0], [0, 0, 0, 1], [0x80, 0, 0, 0]][
                    round % 4]
                for i in 0..<4 where at + i < bytes.count { bytes[at + i] = extreme[i] }
            case 2:  // truncate
                bytes = Array(bytes.prefix(Int(rng.next() % UInt64(bytes.count + 1))))
            case 3:  // insert or delete a run
                let at = Int(rng.next() % UInt64(bytes.count + 1))
                if rng.next() % 2 == 0 {
                    bytes.insert(
                        contentsOf: (0..<Int(rng.next() % 16)).map { _ in UInt8(truncatingIfNeeded: rng.next()) },
                        at: at)
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
