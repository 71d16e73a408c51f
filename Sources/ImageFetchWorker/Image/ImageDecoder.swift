import CShims

/// What a full decode adds to the header's facts (`image.verify = decode`).
public struct DecodedFacts: Sendable, Equatable, Hashable {
    /// Width in pixels of the first frame as displayed: after its EXIF orientation (and, for HEIC
    /// and AVIF, after `irot`/`imir`, which libheif applies).
    public var width: Int
    /// See ``width``.
    public var height: Int
    /// A 64-bit difference hash of the first frame, upright: 9 × 8 greyscale, one bit per pair of
    /// horizontal neighbours (1 where the right one is brighter), row by row, first bit highest.
    public var dhash: UInt64

    public init(width: Int, height: Int, dhash: UInt64) {
        self.width = width
        self.height = height
        self.dhash = dhash
    }

    /// ``dhash`` as 16 lowercase hex digits, as results carry it.
    public var dhashHex: String {
        let digits = String(dhash, radix: 16)
        return String(repeating: "0", count: 16 - digits.count) + digits
    }
}

/// Decodes whole bodies with libvips, after the sniffer and the structure walk accepted them.
///
/// Safety and memory: the loader is chosen by the sniffed format (never by libvips's own
/// sniffing), libvips's untrusted loaders (ImageMagick and others) are blocked, the header is read
/// first and nothing is decoded over `fetch.max_pixels`, access is sequential (a few strips in
/// memory, not the image), `fail_on` is `error` (a damaged or cut body is an error, not a grey
/// fill), and libvips's operation cache is off. Each decode runs on the calling thread
/// (`vips_concurrency_set(1)`): the worker's concurrent work queue is the parallelism.
package enum ImageDecoder {
    /// Why a decode refused the body.
    package enum Failure: Error, Equatable {
        /// The decoder's header says more pixels than `fetch.max_pixels`.
        case tooManyPixels(width: Int, height: Int)
        /// The decoder refused the body; the reason is libvips's first line, without any path.
        case undecodable(String)
        /// libvips could not start in this process.
        case unavailable
    }

    /// The formats libvips decodes here: every format the worker claims but BMP, which Debian's
    /// libvips reads only through ImageMagick (blocked as untrusted).
    package static func decodes(_ format: ImageFormat) -> Bool { loader(for: format) != nil }

    static func loader(for format: ImageFormat) -> ifw_vips_loader? {
        switch format {
        case .jpeg: return IFW_VIPS_JPEG
        case .png: return IFW_VIPS_PNG
        case .gif: return IFW_VIPS_GIF
        case .webp: return IFW_VIPS_WEBP
        case .tiff: return IFW_VIPS_TIFF
        case .avif, .heic: return IFW_VIPS_HEIF
        case .bmp: return nil
        }
    }

    /// libvips, started once per process on first use.
    private static let started: Bool = ifw_vips_start() == 0

    /// Starts libvips now, so that a worker in decode mode fails at start rather than per job.
    package static func start() -> Bool { started }

    /// Decodes every pixel of `bytes`, an image of `format`: the first frame, and the further
    /// frames of an animated GIF or WebP while all of them together stay within `maxPixels`.
    /// nil when the format is not decoded here (BMP: its structure walk stands).
    package static func decode(
        _ bytes: UnsafeRawBufferPointer, format: ImageFormat, maxPixels: Int
    ) -> Result<DecodedFacts?, Failure> {
        guard let loader = loader(for: format) else { return .success(nil) }
        guard started else { return .failure(.unavailable) }
        // The header only: libvips is lazy, nothing is decoded before the pixels are asked for.
        let first: VipsImageHandle
        switch VipsImageHandle.open(loader, bytes, pages: 1) {
        case .failure(let failure): return .failure(failure)
        case .success(let image): first = image
        }
        let width = first.width, frameHeight = first.pageHeight
        let (pixels, overflow) = width.multipliedReportingOverflow(by: frameHeight)
        guard !overflow, pixels <= maxPixels else {
            return .failure(.tooManyPixels(width: width, height: frameHeight))
        }
        let frames = framesToDecode(format: format, pages: first.pages, framePixels: pixels, maxPixels: maxPixels)
        if frames > 1 {
            switch VipsImageHandle.open(loader, bytes, pages: frames) {
            case .failure(let failure): return .failure(failure)
            case .success(let all):
                if let failure = all.decodeEverything() { return .failure(failure) }
            }
        }
        // The thumbnail reads every row of the first frame: it is the decode of that frame. libvips
        // turns it upright (EXIF orientation) and makes it 9 × 8 after the turn.
        let grey: [UInt8]
        switch first.greyThumbnail(width: 9, height: 8) {
        case .failure(let failure): return .failure(failure)
        case .success(let thumbnail): grey = thumbnail
        }
        let upright = first.orientation >= 5 ? (frameHeight, width) : (width, frameHeight)
        return .success(DecodedFacts(width: upright.0, height: upright.1, dhash: dHash(grey9x8: grey)))
    }

    /// How many frames to decode: every frame of an animated GIF or WebP while their pixels
    /// together stay within `maxPixels` (a GIF of thousands of frames on a large screen costs no
    /// more than one image at the limit), at least the first. TIFF and HEIF pages can differ in
    /// size and are separate images: the first (the primary) alone.
    package static func framesToDecode(format: ImageFormat, pages: Int, framePixels: Int, maxPixels: Int) -> Int {
        guard format == .gif || format == .webp, pages > 1, framePixels > 0 else { return 1 }
        return max(1, min(pages, maxPixels / framePixels))
    }

    /// The difference hash of a 9 × 8 greyscale thumbnail, row-major: bit 63 is row 0's first pair.
    package static func dHash(grey9x8 grey: [UInt8]) -> UInt64 {
        precondition(grey.count == 72)
        var hash: UInt64 = 0
        for row in 0..<8 {
            for column in 0..<8 {
                let left = grey[row * 9 + column], right = grey[row * 9 + column + 1]
                hash = hash << 1 | (right > left ? 1 : 0)
            }
        }
        return hash
    }
}

/// One libvips image, a `VipsImage *` with one reference, dropped on deinit. Used on the thread
/// that made it, inside one decode, so it is not Sendable.
final class VipsImageHandle {
    private let pointer: OpaquePointer

    private init(_ pointer: OpaquePointer) {
        self.pointer = pointer
    }

    deinit {
        ifw_vips_unref(pointer)
    }

    /// Reads the header of `bytes` with `loader`, asking for `pages` frames. The bytes must stay
    /// alive while the handle is used: the loader reads them in place, without a copy.
    static func open(
        _ loader: ifw_vips_loader, _ bytes: UnsafeRawBufferPointer, pages: Int
    ) -> Result<VipsImageHandle, ImageDecoder.Failure> {
        guard let base = bytes.baseAddress,
            let image = ifw_vips_open(loader, base, bytes.count, Int32(clamping: pages))
        else { return .failure(.undecodable(takeError(or: "the decoder refused the header"))) }
        return .success(VipsImageHandle(image))
    }

    var width: Int { Int(ifw_vips_width(pointer)) }
    var pageHeight: Int { Int(ifw_vips_page_height(pointer)) }
    var pages: Int { Int(ifw_vips_pages(pointer)) }
    var orientation: Int { Int(ifw_vips_orientation(pointer)) }

    /// Decodes every pixel of every frame asked for.
    func decodeEverything() -> ImageDecoder.Failure? {
        ifw_vips_decode_all(pointer) == 0 ? nil : .undecodable(Self.takeError(or: "the pixels do not decode"))
    }

    /// The image upright, reduced to `width` × `height` 8-bit grey, as width × height bytes.
    func greyThumbnail(width: Int, height: Int) -> Result<[UInt8], ImageDecoder.Failure> {
        var grey = [UInt8](repeating: 0, count: width * height)
        let status = grey.withUnsafeMutableBufferPointer {
            ifw_vips_grey_thumbnail(pointer, Int32(width), Int32(height), $0.baseAddress!)
        }
        guard status == 0 else { return .failure(.undecodable(Self.takeError(or: "the pixels do not decode"))) }
        return .success(grey)
    }

    /// libvips's last error, first line, at most 160 bytes (it names no path: the
    /// body is decoded from memory), and clears it.
    private static func takeError(or fallback: String) -> String {
        var buffer = [CChar](repeating: 0, count: 512)
        buffer.withUnsafeMutableBufferPointer { ifw_vips_error_take($0.baseAddress!, $0.count) }
        let text = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let line = text.split(whereSeparator: \.isNewline).first.map(String.init) ?? ""
        return line.isEmpty ? fallback : String(line.prefix(160))
    }
}
