// ISOBMFF (AVIF, HEIC): the boxes of `meta` that describe the primary item.

extension ImageSniffer {
    // MARK: ISOBMFF

    /// The most boxes looked at in one container before giving up.
    static let maxBoxesPerContainer = 1024

    static let ftypType: [UInt8] = Array("ftyp".utf8)

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
            // `Int.max` stands for size 0 (to the end of the file); no real box ends there.
            guard !overflow, sum != Int.max else { throw .invalid("bad ISOBMFF box size") }
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

    /// Brands of image sequences (HEIF `msf1`, HEVC and AVIF sequences).
    static func isSequenceBrand(_ brand: UInt32) -> Bool {
        switch brand {
        case fourCC("avis"), fourCC("msf1"), fourCC("hevc"), fourCC("hevx"), fourCC("hevm"), fourCC("hevs"):
            return true
        default:
            return false
        }
    }

    static func parseISOBMFF(_ v: ByteView) throws(SniffStop) -> ImageInfo {
        // The first box must be a small `ftyp`: size 16…65535 (so the first two bytes are zero).
        guard try v.u8(1) == 0 else { throw .invalid("unrecognised signature") }
        let ftypSize = Int(try v.u32be(0))
        try v.expect(ftypType, at: 4, else: "unrecognised signature")
        guard ftypSize >= 16 else { throw .invalid("bad ISOBMFF ftyp box") }

        let major = try v.u32be(8)
        var format = format(ofBrand: major)
        var sequence = isSequenceBrand(major)
        var brandAt = 16
        while brandAt + 4 <= ftypSize {
            let brand = try v.u32be(brandAt)
            format = format ?? self.format(ofBrand: brand)
            sequence = sequence || isSequenceBrand(brand)
            brandAt += 4
        }
        guard let format else { throw .invalid("unsupported ISOBMFF brand") }

        // Top-level boxes are bounded by `Int.max`, not by the bytes at hand, even for a whole body:
        // a box that claims more than is there reads past the end, which is a truncated body, and
        // a prefix gets the same answer as the whole body whenever it can decide.
        guard let meta = try findChild(v, type: fourCC("meta"), from: ftypSize, to: Int.max) else {
            throw .invalid("\(format.rawValue) has no meta box")
        }
        let item = try primaryItem(v, meta: meta, format: format)
        var info = ImageInfo(format: format, width: item.width, height: item.height)
        if let gridWidth = item.gridWidth, let gridHeight = item.gridHeight,
            gridWidth != item.width || gridHeight != item.height
        {
            // The decoder allocates the grid's output before cropping it to `ispe`.
            info.canvasWidth = max(gridWidth, item.width)
            info.canvasHeight = max(gridHeight, item.height)
        }
        if item.rotation != 0 || item.mirror != nil {
            info.orientation = orientation(quarterTurnsAnticlockwise: item.rotation, mirrorAxis: item.mirror)
        }
        info.animated = sequence
        return info
    }

    /// What `meta` says of the primary item.
    struct PrimaryItem {
        /// After `clap`, before `irot`.
        var width: Int
        var height: Int
        var gridWidth: Int?
        var gridHeight: Int?
        /// `irot`: quarter turns anticlockwise.
        var rotation = 0
        /// `imir`: the mirror axis.
        var mirror: Int?
    }

    static func primaryItem(_ v: ByteView, meta: Box, format: ImageFormat) throws(SniffStop) -> PrimaryItem {
        // `meta` is a FullBox: 4 bytes of version and flags before its children.
        var pitm: Box?, iinf: Box?, iloc: Box?, iprp: Box?, idat: Box?, iref: Box?
        var offset = meta.payload + 4
        for _ in 0..<maxBoxesPerContainer {
            guard offset < meta.end else { break }
            let box = try readBox(v, at: offset, parentEnd: meta.end)
            switch box.type {
            case fourCC("pitm"): pitm = pitm ?? box
            case fourCC("iinf"): iinf = iinf ?? box
            case fourCC("iloc"): iloc = iloc ?? box
            case fourCC("iprp"): iprp = iprp ?? box
            case fourCC("idat"): idat = idat ?? box
            case fourCC("iref"): iref = iref ?? box
            default: break
            }
            offset = box.end
            // A `meta` of size 0 runs to the end of the file: stop once the boxes needed are found
            // (its `iref`, if any, is then not looked for). A sized `meta` is read to its end.
            if pitm != nil, iinf != nil, iloc != nil, iprp != nil, iref != nil || meta.end == Int.max { break }
        }
        let name = format.rawValue
        guard let pitm else { throw .invalid("\(name) has no primary item") }
        let pitmWide = try v.u8(pitm.payload) != 0
        guard pitm.payload + (pitmWide ? 8 : 6) <= pitm.end else { throw .invalid("bad pitm box") }
        var itemID = pitmWide ? try v.u32be(pitm.payload + 4) : UInt32(try v.u16be(pitm.payload + 4))
        if let iinf, try !isTopLevelImage(v, iinf: iinf, iref: iref, item: itemID) {
            // libheif (and so pillow-heif) shows the first top-level image when `pitm` names an item
            // that is none: missing, not an image, or a thumbnail or auxiliary image of another.
            guard let first = try firstTopLevelImage(v, iinf: iinf, iref: iref) else {
                throw .invalid("\(name) has no primary image")
            }
            itemID = first
        }
        guard let iprp, let ipco = try findChild(v, type: fourCC("ipco"), from: iprp.payload, to: iprp.end),
            let ipma = try findChild(v, type: fourCC("ipma"), from: iprp.payload, to: iprp.end)
        else { throw .invalid("\(name) has no item properties") }

        var item = PrimaryItem(width: 0, height: 0)
        var ispe: (width: Int, height: Int)?
        var clap: Box?
        let associations = try propertyAssociations(v, ipma: ipma, item: itemID)
        for k in 0..<associations.count {
            let index = try associations.index(v, k)
            guard index > 0 else { continue }
            guard let property = try child(v, of: ipco, index: index) else {
                throw .invalid("\(name) names a missing property")
            }
            switch property.type {
            case fourCC("ispe") where ispe == nil:
                // FullBox: version and flags, then 32-bit width and height.
                guard property.end - property.payload >= 12 else { throw .invalid("bad ispe box") }
                ispe = (Int(try v.u32be(property.payload + 4)), Int(try v.u32be(property.payload + 8)))
            case fourCC("clap") where clap == nil:
                clap = property
            case fourCC("irot"):
                guard property.end > property.payload else { throw .invalid("bad irot box") }
                item.rotation = Int(try v.u8(property.payload) & 0x03)
            case fourCC("imir"):
                guard property.end > property.payload else { throw .invalid("bad imir box") }
                item.mirror = Int(try v.u8(property.payload) & 0x01)
            default:
                break
            }
        }
        if try itemType(v, iinf: iinf, item: itemID) == fourCC("grid") {
            // `idat` usually follows `iprp`.
            if idat == nil { idat = try findChild(v, type: fourCC("idat"), from: offset, to: meta.end) }
            let grid = try gridSize(v, iloc: iloc, idat: idat, item: itemID)
            item.gridWidth = grid.width
            item.gridHeight = grid.height
            ispe = ispe ?? grid
        }
        guard let ispe else { throw .invalid("\(name) primary item has no ispe property") }
        guard ispe.width > 0, ispe.height > 0 else { throw .invalid("\(name) has a zero dimension") }
        item.width = ispe.width
        item.height = ispe.height
        if let clap {
            // Clean aperture width and height as fractions, rounded half up as libheif does.
            guard clap.end - clap.payload >= 32 else { throw .invalid("bad clap box") }
            func rounded(_ at: Int, limit: Int) throws(SniffStop) -> Int {
                let n = Int(Int32(bitPattern: try v.u32be(at)))
                let d = Int(Int32(bitPattern: try v.u32be(at + 4)))
                guard n > 0, d > 0 else { throw .invalid("bad clap box") }
                let value = (n + d / 2) / d
                guard value >= 1, value <= limit else { throw .invalid("clap is outside the image") }
                return value
            }
            item.width = try rounded(clap.payload, limit: ispe.width)
            item.height = try rounded(clap.payload + 8, limit: ispe.height)
        }
        return item
    }

    /// Where `ipma` lists the properties of one item: `count` entries of 1 or 2 bytes from `start`.
    struct PropertyAssociations {
        var start = 0
        var count = 0
        var wide = false

        /// The `k`th 1-based `ipco` index (0: none), without the essential bit.
        func index(_ v: ByteView, _ k: Int) throws(SniffStop) -> Int {
            wide ? Int(try v.u16be(start + 2 * k) & 0x7FFF) : Int(try v.u8(start + k) & 0x7F)
        }
    }

    /// The `ipco` indices `ipma` associates with `item`, in order; none when it lists the item not.
    static func propertyAssociations(_ v: ByteView, ipma: Box, item: UInt32) throws(SniffStop) -> PropertyAssociations {
        let version = try v.u8(ipma.payload)
        let wide = try v.u8(ipma.payload + 3) & 0x01 != 0
        let entries = try v.u32be(ipma.payload + 4)
        var position = ipma.payload + 8
        for _ in 0..<min(Int(entries), 1 << 16) {
            guard position + (version < 1 ? 3 : 5) <= ipma.end else { throw .invalid("bad ipma box") }
            let id = version < 1 ? UInt32(try v.u16be(position)) : try v.u32be(position)
            position += version < 1 ? 2 : 4
            let count = Int(try v.u8(position))
            position += 1
            let size = wide ? 2 : 1
            guard position + count * size <= ipma.end else { throw .invalid("bad ipma box") }
            if id == item { return PropertyAssociations(start: position, count: count, wide: wide) }
            position += count * size
        }
        return PropertyAssociations()
    }

    /// The `index`th (1-based) child of `container`, or nil past its last child.
    static func child(_ v: ByteView, of container: Box, index: Int) throws(SniffStop) -> Box? {
        guard index <= maxBoxesPerContainer else { return nil }
        var offset = container.payload
        for _ in 1..<index {
            guard offset < container.end else { return nil }
            offset = try readBox(v, at: offset, parentEnd: container.end).end
        }
        guard offset < container.end else { return nil }
        return try readBox(v, at: offset, parentEnd: container.end)
    }

    /// Item types that are images, as libheif reads them (coded, derived, uncompressed).
    static func isImageItemType(_ type: UInt32) -> Bool {
        switch type {
        case fourCC("hvc1"), fourCC("av01"), fourCC("grid"), fourCC("iden"), fourCC("iovl"), fourCC("jpeg"),
            fourCC("avc1"), fourCC("unci"), fourCC("j2k1"), fourCC("vvc1"), fourCC("tili"):
            return true
        default:
            return false
        }
    }

    /// One `infe` entry: the item's id, type and hidden flag; nil for versions 0 and 1 (no type).
    static func itemEntry(_ v: ByteView, _ infe: Box) throws(SniffStop) -> (id: UInt32, type: UInt32, hidden: Bool)? {
        let version = try v.u8(infe.payload)
        guard version >= 2 else { return nil }
        let hidden = try v.u8(infe.payload + 3) & 0x01 != 0
        let id = version == 2 ? UInt32(try v.u16be(infe.payload + 4)) : try v.u32be(infe.payload + 4)
        let typeAt = infe.payload + (version == 2 ? 8 : 10)
        guard typeAt + 4 <= infe.end else { throw .invalid("bad infe box") }
        return (id, try v.u32be(typeAt), hidden)
    }

    /// Whether `item` is a top-level image: an image item in `iinf` that is no thumbnail (`thmb`)
    /// or auxiliary image (`auxl`) of another item.
    static func isTopLevelImage(_ v: ByteView, iinf: Box, iref: Box?, item: UInt32) throws(SniffStop) -> Bool {
        guard let type = try itemType(v, iinf: iinf, item: item), isImageItemType(type) else { return false }
        return try !isAlternate(v, iref: iref, item: item)
    }

    /// The first item of `iinf` that is a top-level image and not hidden, or nil.
    static func firstTopLevelImage(_ v: ByteView, iinf: Box, iref: Box?) throws(SniffStop) -> UInt32? {
        var offset = iinf.payload + (try v.u8(iinf.payload) == 0 ? 6 : 8)
        for _ in 0..<maxBoxesPerContainer {
            guard offset < iinf.end else { return nil }
            let infe = try readBox(v, at: offset, parentEnd: iinf.end)
            offset = infe.end
            guard infe.type == fourCC("infe"), let entry = try itemEntry(v, infe) else { continue }
            if isImageItemType(entry.type), !entry.hidden, try !isAlternate(v, iref: iref, item: entry.id) {
                return entry.id
            }
        }
        return nil
    }

    /// Whether `iref` makes `item` a thumbnail (`thmb`) or an auxiliary image (`auxl`) of another.
    static func isAlternate(_ v: ByteView, iref: Box?, item: UInt32) throws(SniffStop) -> Bool {
        guard let iref else { return false }
        let wide = try v.u8(iref.payload) != 0
        var offset = iref.payload + 4
        for _ in 0..<maxBoxesPerContainer {
            guard offset < iref.end else { return false }
            let reference = try readBox(v, at: offset, parentEnd: iref.end)
            offset = reference.end
            guard reference.type == fourCC("thmb") || reference.type == fourCC("auxl") else { continue }
            let from = wide ? try v.u32be(reference.payload) : UInt32(try v.u16be(reference.payload))
            if from == item { return true }
        }
        return false
    }

    /// The `infe` item type of `item`, or nil without one.
    static func itemType(_ v: ByteView, iinf: Box?, item: UInt32) throws(SniffStop) -> UInt32? {
        guard let iinf else { return nil }
        let first = iinf.payload + (try v.u8(iinf.payload) == 0 ? 6 : 8)
        var offset = first
        for _ in 0..<maxBoxesPerContainer {
            guard offset < iinf.end else { return nil }
            let infe = try readBox(v, at: offset, parentEnd: iinf.end)
            offset = infe.end
            // Versions 0 and 1 have no item type.
            guard infe.type == fourCC("infe"), let entry = try itemEntry(v, infe) else { continue }
            if entry.id == item { return entry.type }
        }
        return nil
    }

    /// The output size of the `grid` item `item`, from its data: in `idat` (construction method 1)
    /// or at a file offset (method 0), as `iloc` places it.
    static func gridSize(
        _ v: ByteView, iloc: Box?, idat: Box?, item: UInt32
    ) throws(SniffStop) -> (width: Int, height: Int) {
        guard let iloc else { throw .invalid("grid item has no location") }
        let version = try v.u8(iloc.payload)
        guard version <= 2 else { throw .invalid("unknown iloc version") }
        let sizes = try v.u8(iloc.payload + 4)
        let sizes2 = try v.u8(iloc.payload + 5)
        let offsetSize = Int(sizes >> 4), lengthSize = Int(sizes & 0x0F)
        let baseSize = Int(sizes2 >> 4), indexSize = version == 0 ? 0 : Int(sizes2 & 0x0F)
        func valid(_ size: Int) -> Bool { size == 0 || size == 4 || size == 8 }
        guard valid(offsetSize), valid(lengthSize), valid(baseSize), valid(indexSize) else {
            throw .invalid("bad ISOBMFF field size")
        }
        var position = iloc.payload + 6
        let count = version < 2 ? Int(try v.u16be(position)) : Int(try v.u32be(position))
        position += version < 2 ? 2 : 4
        let itemHeader = (version < 2 ? 2 : 4) + (version >= 1 ? 2 : 0) + 2 + baseSize + 2
        for _ in 0..<min(count, 1 << 16) {
            guard position + itemHeader <= iloc.end else { throw .invalid("bad iloc box") }
            let id = version < 2 ? UInt32(try v.u16be(position)) : try v.u32be(position)
            position += version < 2 ? 2 : 4
            var method = 0
            if version >= 1 {
                method = Int(try v.u16be(position) & 0x0F)
                position += 2
            }
            position += 2  // data reference index
            let base = try v.uintBE(position, size: baseSize)
            position += baseSize
            let extents = Int(try v.u16be(position))
            position += 2
            let extentSize = indexSize + offsetSize + lengthSize
            guard position + extents * extentSize <= iloc.end else { throw .invalid("bad iloc box") }
            guard id == item else {
                position += extents * extentSize
                continue
            }
            guard extents >= 1 else { throw .invalid("grid item has no data") }
            let extentOffset = try v.uintBE(position + indexSize, size: offsetSize)
            let (start, overflow) = base.addingReportingOverflow(extentOffset)
            guard !overflow, start <= UInt64(Int.max / 2) else { throw .invalid("bad iloc offset") }
            var at = Int(start)
            switch method {
            case 0: break
            case 1:
                guard let idat, at <= idat.end - idat.payload - 8 else { throw .invalid("grid data is outside idat") }
                at += idat.payload
            default: throw .invalid("unsupported iloc construction method")
            }
            // ImageGrid: version 0, flags (bit 0: 32-bit sizes), rows - 1, columns - 1, width, height.
            guard try v.u8(at) == 0 else { throw .invalid("unknown grid version") }
            let wide = try v.u8(at + 1) & 0x01 != 0
            let width = wide ? Int(try v.u32be(at + 4)) : Int(try v.u16be(at + 4))
            let height = wide ? Int(try v.u32be(at + 8)) : Int(try v.u16be(at + 6))
            guard width > 0, height > 0 else { throw .invalid("grid has a zero dimension") }
            return (width, height)
        }
        throw .invalid("grid item has no location")
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
