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
    /// TIFF, little- or big-endian (not BigTIFF).
    case tiff
    /// AVIF still images and sequences (ISOBMFF brands `avif`, `avis`).
    case avif
    /// HEIF with HEVC: HEIC (ISOBMFF brands `heic`, `heix`, `hevc`, …).
    case heic

    /// The usual file extension, without a dot: `jpg`, `png`, `gif`, `webp`, `bmp`, `tif`, `avif`, `heic`.
    public var fileExtension: String {
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
    public var mimeType: String {
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

/// What the header of an image says: its format and its size in pixels.
public struct ImageInfo: Sendable, Equatable, Hashable {
    /// The format, from the bytes.
    public var format: ImageFormat
    /// Width in pixels; always greater than zero when produced by ``ImageSniffer``.
    public var width: Int
    /// Height in pixels; always greater than zero when produced by ``ImageSniffer``.
    public var height: Int

    /// Creates an image description.
    public init(format: ImageFormat, width: Int, height: Int) {
        self.format = format
        self.width = width
        self.height = height
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
