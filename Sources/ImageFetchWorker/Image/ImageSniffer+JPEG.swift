// JPEG: the segments up to the first frame header, walked the way libjpeg walks them.

extension ImageSniffer {
    /// The most JPEG markers looked at before the frame header; real files have a few dozen.
    static let maxJPEGMarkers = 4096

    static func parseJPEG(_ v: ByteView) throws(SniffStop) -> ImageInfo {
        try v.expect([0xFF, 0xD8, 0xFF], at: 0, else: "not a JPEG signature")
        var position = 2  // after SOI
        var orientation: Int?
        var sawExif = false
        for _ in 0..<maxJPEGMarkers {
            let codeAt = try nextJPEGMarker(v, from: position)
            let code = v.bytes[codeAt]
            switch code {
            case 0x01, 0xD0...0xD8:
                // TEM, RST0…RST7, SOI: standalone, no length.
                position = codeAt + 1
            case 0xD9:
                throw .invalid("JPEG ends before its frame header")
            case 0xDA:
                throw .invalid("JPEG scan before its frame header")
            case 0xC0...0xCF where code != 0xC4 && code != 0xC8 && code != 0xCC:
                // SOFn: length, precision, height, width, component count, 3 bytes per component.
                let length = Int(try v.u16be(codeAt + 1))
                guard length >= 8 else { throw .invalid("bad JPEG frame header length") }
                let height = try v.u16be(codeAt + 4)
                let width = try v.u16be(codeAt + 6)
                let components = Int(try v.u8(codeAt + 8))
                // libjpeg refuses a frame without components or whose length does not match them.
                guard components > 0, length == 8 + 3 * components else {
                    throw .invalid("bad JPEG frame header")
                }
                var info = ImageInfo(format: .jpeg, width: Int(width), height: Int(height))
                info.frames = 1
                info.animated = false
                info.progressive = code & 0x03 == 0x02  // SOF2, SOF6, SOF10, SOF14
                info.orientation = orientation
                return info
            default:
                let length = Int(try v.u16be(codeAt + 1))
                guard length >= 2 else { throw .invalid("bad JPEG segment length") }
                let payload = codeAt + 3
                let end = codeAt + 1 + length
                // The first APP1 that is EXIF gives the orientation, as in decoders and viewers.
                if code == 0xE1, !sawExif, length >= 8 + 6, v.has(payload, length - 2),
                    (try? v.expect(exifHeader, at: payload, else: "")) != nil
                {
                    sawExif = true
                    orientation = exifOrientation(v, tiffAt: payload + 6, end: end)
                }
                position = end
            }
        }
        throw .invalid("too many JPEG markers before the frame header")
    }

    /// The offset of the next marker code at or after `start`, as libjpeg's `next_marker` finds it:
    /// bytes before a 0xFF are stray (libjpeg skips them with a warning), any number of 0xFF fill
    /// bytes may precede the code, and `FF 00` is not a marker. The scan moves forward by at least
    /// one byte per step, so it ends within the bytes at hand.
    static func nextJPEGMarker(_ v: ByteView, from start: Int) throws(SniffStop) -> Int {
        var position = start
        while true {
            while try v.u8(position) != 0xFF { position += 1 }
            var codeAt = position + 1
            while try v.u8(codeAt) == 0xFF { codeAt += 1 }
            if v.bytes[codeAt] != 0x00 { return codeAt }
            position = codeAt + 1
        }
    }
}
