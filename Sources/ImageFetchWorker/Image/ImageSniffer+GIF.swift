// GIF: the logical screen, and for a whole body every block, because a frame may lie beyond the
// screen and a decoder that grows its canvas to hold it allocates the larger area.

extension ImageSniffer {
    private enum GIFBlock {
        static let extensionIntroducer: UInt8 = 0x21
        static let imageSeparator: UInt8 = 0x2C
        static let trailer: UInt8 = 0x3B
    }

    /// With a prefix, answers once the first image descriptor is there (frames, animation and the
    /// canvas left nil); with the whole body, walks every block. Each step of the walk moves
    /// forward by at least one byte, so it ends within the body's length.
    static func parseGIF(_ v: ByteView, isComplete: Bool) throws(SniffStop) -> ImageInfo {
        try parseGIFHeader(v)
        let screenWidth = Int(try v.u16le(6))
        let screenHeight = Int(try v.u16le(8))
        let packed = try v.u8(10)
        var position = 13
        if packed & 0x80 != 0 { position += 3 << (Int(packed & 0x07) + 1) }  // global colour table

        var info = ImageInfo(format: .gif, width: screenWidth, height: screenHeight)
        var frames = 0
        // The frames before the first byte that starts no block: where the structure walk, as
        // browsers, ends the image. The canvas still takes every frame, as Pillow reads on.
        var framesShown: Int?
        var canvasWidth = screenWidth
        var canvasHeight = screenHeight
        walk: while true {
            guard v.has(position, 1) else {
                if frames == 0 { throw .needMore }
                // The end of a whole body ends the walk as the trailer would: decoders show what came.
                break
            }
            switch v.bytes[position] {
            case GIFBlock.trailer:
                break walk
            case GIFBlock.extensionIntroducer:
                position = skipSubBlocks(v, from: position + 2)
            case GIFBlock.imageSeparator:
                // A whole body cut inside a later descriptor ends there, as at its end.
                if frames > 0 && !v.has(position, 10) { break walk }
                // Left, top, width, height, flags.
                let left = Int(try v.u16le(position + 1))
                let top = Int(try v.u16le(position + 3))
                let width = Int(try v.u16le(position + 5))
                let height = Int(try v.u16le(position + 7))
                let flags = try v.u8(position + 9)
                frames += 1
                canvasWidth = max(canvasWidth, left + width)
                canvasHeight = max(canvasHeight, top + height)
                // A prefix answers from the first frame; the rest needs the whole body.
                if !isComplete { return info }
                position += 10
                if flags & 0x80 != 0 { position += 3 << (Int(flags & 0x07) + 1) }  // local colour table
                position = skipSubBlocks(v, from: position + 1)  // after the LZW minimum code size
            default:
                // Pillow steps over a stray byte and reads on.
                if framesShown == nil, frames > 0 { framesShown = frames }
                position += 1
            }
        }
        guard frames > 0 else { throw .invalid("GIF has no image") }
        let shown = framesShown ?? frames
        info.frames = shown
        info.animated = shown > 1
        if canvasWidth != screenWidth || canvasHeight != screenHeight {
            info.canvasWidth = canvasWidth
            info.canvasHeight = canvasHeight
        }
        return info
    }

    /// The offset after the data sub-blocks that start at `position` (each a length byte and that
    /// many bytes, ended by a zero length), or the end of the bytes if they end first.
    private static func skipSubBlocks(_ v: ByteView, from start: Int) -> Int {
        var position = start
        while position < v.count {
            let length = Int(v.bytes[position])
            position += 1 + length
            if length == 0 { return position }
        }
        return v.count
    }
}
