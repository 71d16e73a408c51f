/// Which bodies the worker keeps as images: a supported format, within the pixel limit
/// (`fetch.max_pixels`), whose structure holds to its end. Pure; the reasons it gives become
/// result codes at the pipeline's edge (`Worker/JobError+ImageRefusal.swift`).
package enum ImagePolicy {
    /// Why a body is not kept.
    package enum Refusal: Error, Sendable, Equatable {
        /// Not a supported image; the sniffer's reason, if it gave one.
        case notAnImage(reason: String?)
        /// What a decoder would allocate is over the limit: width × height, or the canvas that
        /// frames beyond a GIF's logical screen grow.
        case tooManyPixels(width: Int, height: Int)
        /// The headers are an image, but the walk to its end is not.
        case structure(StructureProblem)
        /// `image.verify = decode`: libvips could not decode what passed the walk.
        case decode(ImageDecoder.Failure)
    }

    /// ``Refusal/tooManyPixels(width:height:)`` when `info` is over `maxPixels`.
    package static func pixelRefusal(_ info: ImageInfo, maxPixels: Int) -> Refusal? {
        guard info.exceedsPixels(maxPixels) else { return nil }
        return .tooManyPixels(width: info.canvasWidth ?? info.width, height: info.canvasHeight ?? info.height)
    }

    /// What a whole body is, or why it is refused. The walk to its end runs after the pixel limit,
    /// so a bomb is refused by its header alone; with `decode` (`image.verify = decode`), libvips
    /// then decodes what passed (``ImageDecoder``) and the info carries what it found.
    package static func check(_ body: [UInt8], maxPixels: Int, decode: Bool = false) -> Result<ImageInfo, Refusal> {
        body.withUnsafeBytes { bytes in
            let info: ImageInfo
            switch ImageSniffer.inspectWhole(bytes) {
            case .image(let found):
                info = found
            case .notAnImage(let reason):
                return .failure(.notAnImage(reason: reason))
            case .cut(let reason):
                return .failure(.structure(.truncated(reason: reason)))
            }
            if let refusal = pixelRefusal(info, maxPixels: maxPixels) { return .failure(refusal) }
            if let problem = ImageSniffer.checkStructure(bytes, format: info.format) {
                return .failure(.structure(problem))
            }
            guard decode else { return .success(info) }
            return ImageDecoder.decode(bytes, format: info.format, maxPixels: maxPixels)
                .map {
                    var decoded = info
                    decoded.decoded = $0
                    return decoded
                }
                .mapError(Refusal.decode)
        }
    }

    /// What a body's first bytes decide while it arrives.
    package enum PrefixVerdict: Sendable, Equatable {
        case needMore
        case accept
        case refuse(Refusal)
    }

    /// The pixel limit, as soon as the header proves the image too large: the download stops.
    package static func checkPrefix(_ prefix: UnsafeRawBufferPointer, maxPixels: Int) -> PrefixVerdict {
        switch ImageSniffer.inspect(prefix, isComplete: false) {
        case .needMoreData: return .needMore
        // The whole body gets its own check; the prefix only stops a transfer early.
        case .notAnImage: return .accept
        case .image(let info): return pixelRefusal(info, maxPixels: maxPixels).map(PrefixVerdict.refuse) ?? .accept
        }
    }
}
