// JPEG segment walking and ISOBMFF (AVIF, HEIC) box walking: the two formats whose size sits
// behind a variable amount of other data.

extension ImageSniffer {
    /// The most JPEG markers looked at before the frame header; real files have a few dozen.
    static let maxJPEGMarkers = 4096

    static func parseJPEG(_ v: ByteView) throws(SniffStop) -> ImageInfo {
        try v.expect([0xFF, 0xD8, 0xFF], at: 0, else: "not a JPEG signature")
        var position = 2  // at the 0xFF that starts the marker after SOI
        for _ in 0..<maxJPEGMarkers {
            guard try v.u8(position) == 0xFF else { throw .invalid("bad JPEG marker") }
            // Any number of 0xFF fill bytes may precede the marker code.
            var codeAt = position + 1
            while codeAt < v.count && v.bytes[codeAt] == 0xFF {
                codeAt += 1
            }
            let code = try v.u8(codeAt)
            switch code {
            case 0x01, 0xD0...0xD8:
                // TEM, RST0…RST7, SOI: standalone, no length.
                position = codeAt + 1
            case 0xD9:
                throw .invalid("JPEG ends before its frame header")
            case 0xDA:
                throw .invalid("JPEG scan before its frame header")
            case 0x00:
                throw .invalid("bad JPEG marker")
            case 0xC0...0xCF where code != 0xC4 && code != 0xC8 && code != 0xCC:
                // SOFn: length, precision, height, width, component count.
                let length = try v.u16be(codeAt + 1)
                guard length >= 8 else { throw .invalid("bad JPEG frame header length") }
                let height = try v.u16be(codeAt + 4)
                let width = try v.u16be(codeAt + 6)
                return ImageInfo(format: .jpeg, width: Int(width), height: Int(height))
            default:
                let length = Int(try v.u16be(codeAt + 1))
                guard length >= 2 else { throw .invalid("bad JPEG segment length") }
                position = codeAt + 1 + length
            }
        }
        throw .invalid("too many JPEG markers before the frame header")
    }

    // MARK: ISOBMFF

    /// The most boxes looked at in one container before giving up.
    static let maxBoxesPerContainer = 1024

    /// A box header: where the payload starts and where the box ends.
    struct Box {
        var type: UInt32
        var start: Int
        var payload: Int
        var end: Int
    }

    /// Reads the header of the box at `offset` inside a container ending at `parentEnd`.
    ///
    /// Size 1 means a 64-bit size follows; size 0 means the box runs to the end of its container
    /// (at the top level, to the end of the file, taken as `Int.max`).
    static func readBox(_ v: ByteView, at offset: Int, parentEnd: Int) throws(SniffStop) -> Box {
        let size32 = try v.u32be(offset)
        let type = try v.u32be(offset + 4)
        let payload: Int
        let end: Int
        switch size32 {
        case 0:
            payload = offset + 8
            end = parentEnd
        case 1:
            let size64 = try v.u64be(offset + 8)
            guard size64 >= 16, size64 <= UInt64(Int.max) else { throw .invalid("bad ISOBMFF box size") }
            let (sum, overflow) = offset.addingReportingOverflow(Int(size64))
            guard !overflow else { throw .invalid("bad ISOBMFF box size") }
            payload = offset + 16
            end = sum
        case 2..<8:
            throw .invalid("bad ISOBMFF box size")
        default:
            let (sum, overflow) = offset.addingReportingOverflow(Int(size32))
            guard !overflow else { throw .invalid("bad ISOBMFF box size") }
            payload = offset + 8
            end = sum
        }
        guard end <= parentEnd else { throw .invalid("ISOBMFF box overruns its container") }
        guard payload <= end else { throw .invalid("bad ISOBMFF box size") }
        return Box(type: type, start: offset, payload: payload, end: end)
    }

    /// The image format a brand announces, if it is one of ours.
    static func format(ofBrand brand: UInt32) -> ImageFormat? {
        switch brand {
        case fourCC("avif"), fourCC("avis"):
            return .avif
        case fourCC("heic"), fourCC("heix"), fourCC("heim"), fourCC("heis"),
            fourCC("hevc"), fourCC("hevx"), fourCC("hevm"), fourCC("hevs"):
            return .heic
        default:
            return nil
        }
    }

    static func parseISOBMFF(_ v: ByteView) throws(SniffStop) -> ImageInfo {
        // The first box must be a small `ftyp`: size 16…65535 (so the first two bytes are zero).
        guard try v.u8(1) == 0 else { throw .invalid("unrecognised signature") }
        let ftypSize = Int(try v.u32be(0))
        try v.expect(ftypType, at: 4, else: "unrecognised signature")
        guard ftypSize >= 16 else { throw .invalid("bad ISOBMFF ftyp box") }

        var format = format(ofBrand: try v.u32be(8))
        if format == nil {
            var brandAt = 16
            while brandAt + 4 <= ftypSize, format == nil {
                format = self.format(ofBrand: try v.u32be(brandAt))
                brandAt += 4
            }
        }
        guard let format else { throw .invalid("unsupported ISOBMFF brand") }

        // Top-level boxes are bounded by `Int.max`, not by the bytes at hand, even for a whole body:
        // a box that claims more than is there reads past the end, which is a truncated body, and
        // a prefix gets the same answer as the whole body whenever it can decide.
        guard let meta = try findChild(v, type: fourCC("meta"), from: ftypSize, to: Int.max) else {
            throw .invalid("\(format.rawValue) has no meta box")
        }
        // `meta` is a FullBox: 4 bytes of version and flags before its children.
        guard let iprp = try findChild(v, type: fourCC("iprp"), from: meta.payload + 4, to: meta.end) else {
            throw .invalid("\(format.rawValue) has no item properties")
        }
        guard let ipco = try findChild(v, type: fourCC("ipco"), from: iprp.payload, to: iprp.end) else {
            throw .invalid("\(format.rawValue) has no item properties")
        }

        var best: (width: UInt32, height: UInt32)?
        var offset = ipco.payload
        for _ in 0..<maxBoxesPerContainer {
            guard offset < ipco.end else { break }
            let box = try readBox(v, at: offset, parentEnd: ipco.end)
            if box.type == fourCC("ispe") {
                // FullBox: version and flags, then 32-bit width and height.
                guard box.end - box.payload >= 12 else { throw .invalid("bad ispe box") }
                let width = try v.u32be(box.payload + 4)
                let height = try v.u32be(box.payload + 8)
                guard width > 0, height > 0 else { throw .invalid("\(format.rawValue) has a zero dimension") }
                // The product of two 32-bit values always fits in 64 bits.
                let area = UInt64(width) * UInt64(height)
                if best.map({ area > UInt64($0.width) * UInt64($0.height) }) ?? true {
                    best = (width, height)
                }
            }
            offset = box.end
        }
        guard let best else { throw .invalid("\(format.rawValue) has no ispe property") }
        return ImageInfo(format: format, width: Int(best.width), height: Int(best.height))
    }

    /// The first child box of the given type between `from` and `to`, or nil when the container
    /// ends without one (or holds too many boxes to look through).
    static func findChild(_ v: ByteView, type: UInt32, from: Int, to end: Int) throws(SniffStop) -> Box? {
        var offset = from
        for _ in 0..<maxBoxesPerContainer {
            guard offset < end else { return nil }
            let box = try readBox(v, at: offset, parentEnd: end)
            if box.type == type { return box }
            offset = box.end
        }
        return nil
    }
}
