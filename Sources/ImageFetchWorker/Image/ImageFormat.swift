/// An image format the worker recognises from the bytes of a body, whatever the Content-Type said.
///
/// The raw value is the `format` field of the result message.
public enum ImageFormat: String, Sendable, CaseIterable {
    /// JPEG (JFIF, Exif, baseline or progressive).
    case jpeg
    /// PNG, APNG included.
    case png
    /// GIF87a and GIF89a.
    case gif
    /// WebP: lossy, lossless or extended.
    case webp
    /// Windows and OS/2 bitmaps.
    case bmp
    /// TIFF and BigTIFF, little- or big-endian.
    case tiff
    /// AVIF still images and sequences (ISOBMFF brands `avif`, `avis`).
    case avif
    /// HEIF with HEVC: HEIC (ISOBMFF brands `heic`, `heix`, `hevc`, …).
    case heic

    /// The usual file extension, without a dot: `jpg`, `png`, `gif`, `webp`, `bmp`, `tif`, `avif`, `heic`.
    package var fileExtension: String {
        switch self {
        case .jpeg: return "jpg"
        case .png: return "png"
        case .gif: return "gif"
        case .webp: return "webp"
        case .bmp: return "bmp"
        case .tiff: return "tif"
        case .avif: return "avif"
        case .heic: return "heic"
        }
    }

    /// The registered media type, such as `image/jpeg`.
    package var mimeType: String {
        switch self {
        case .jpeg: return "image/jpeg"
        case .png: return "image/png"
        case .gif: return "image/gif"
        case .webp: return "image/webp"
        case .bmp: return "image/bmp"
        case .tiff: return "image/tiff"
        case .avif: return "image/avif"
        case .heic: return "image/heic"
        }
    }
}

/// What the header of an image says: its format, its size in pixels, and what can be told of it
/// from the bytes without decoding.
///
/// `width` and `height` are the size of the image as stored, before any orientation: for JPEG,
/// PNG, WebP and TIFF the EXIF orientation is not applied; for HEIC and AVIF they are those of the
/// primary item after its clean aperture (`clap`), before its rotation (`irot`) and mirroring
/// (`imir`). ``displayWidth`` and ``displayHeight`` are the size shown upright. The optional facts
/// are nil when the format has none or the bytes seen so far do not tell: an answer for a prefix
/// leaves the ones that need the whole body nil.
public struct ImageInfo: Sendable, Equatable, Hashable {
    /// The format, from the bytes.
    public var format: ImageFormat
    /// Width in pixels; always greater than zero when produced by ``ImageSniffer``.
    public var width: Int
    /// Height in pixels; always greater than zero when produced by ``ImageSniffer``.
    public var height: Int
    /// The number of frames, where the headers count them: 1 for still JPEG, PNG, BMP and WebP;
    /// the `acTL` count of an APNG, the `ANMF` chunks of an animated WebP, the image descriptors
    /// of a GIF. Nil for TIFF, HEIC and AVIF, and for a GIF or animated WebP seen only in part.
    public var frames: Int?
    /// Whether the image is animated: more than one frame, or an image-sequence brand (HEIC, AVIF).
    public var animated: Bool?
    /// The EXIF orientation, 1…8, when the file carries one (JPEG, TIFF, PNG `eXIf`, WebP `EXIF`);
    /// for HEIC and AVIF, the code equivalent to the primary item's `irot` and `imir`.
    public var orientation: Int?
    /// Whether a JPEG is progressive (SOF2, SOF6, SOF10, SOF14); nil for other formats.
    public var progressive: Bool?
    /// The canvas a decoder grows to hold every frame, where frames may outgrow the image (a GIF
    /// frame beyond its logical screen); nil when no frame does.
    public var canvasWidth: Int?
    /// See ``canvasWidth``.
    public var canvasHeight: Int?
    /// What a full decode found (`image.verify = decode`); nil in structure mode and for a format
    /// not decoded (BMP).
    public var decoded: DecodedFacts?

    /// Creates an image description with no optional facts.
    public init(format: ImageFormat, width: Int, height: Int) {
        self.format = format
        self.width = width
        self.height = height
    }

    /// The width as displayed: the height when the orientation turns the image a quarter (5…8).
    package var displayWidth: Int { (orientation ?? 1) >= 5 ? height : width }
    /// See ``displayWidth``.
    package var displayHeight: Int { (orientation ?? 1) >= 5 ? width : height }

    /// The pixels a decoder allocates for the largest raster it holds: width × height, or the
    /// grown canvas when frames outgrow the image. Saturates at `Int.max`.
    package var pixelCount: Int {
        func area(_ w: Int, _ h: Int) -> Int {
            let (product, overflow) = w.multipliedReportingOverflow(by: h)
            return overflow ? Int.max : product
        }
        return max(area(width, height), area(canvasWidth ?? width, canvasHeight ?? height))
    }

    /// Whether ``pixelCount`` is over `maxPixels` (`fetch.max_pixels`).
    package func exceedsPixels(_ maxPixels: Int) -> Bool {
        pixelCount > maxPixels
    }

    /// Whether this answer, given for a prefix, agrees with `whole`, the answer for the whole body:
    /// the same format and size, and every optional fact it gives the same.
    package func isConsistent(withWhole whole: ImageInfo) -> Bool {
        func same<T: Equatable>(_ a: T?, _ b: T?) -> Bool { a == nil || a == b }
        return format == whole.format && width == whole.width && height == whole.height
            && same(frames, whole.frames) && same(animated, whole.animated) && same(orientation, whole.orientation)
            && same(progressive, whole.progressive) && same(canvasWidth, whole.canvasWidth)
            && same(canvasHeight, whole.canvasHeight)
    }
}

/// The answer of ``ImageSniffer`` about a body or a prefix of one.
public enum ImageInspection: Sendable, Equatable {
    /// The prefix seen so far is consistent with an image, but too short to decide.
    /// Never returned for a complete body.
    case needMoreData
    /// The bytes are an image of this format and size.
    case image(ImageInfo)
    /// The bytes are not a supported image. The reason is short, for people, and names no URL.
    case notAnImage(reason: String)
}
