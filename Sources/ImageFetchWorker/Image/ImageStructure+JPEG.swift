// JPEG: every segment from SOI to EOI, and the entropy-coded data of every scan.

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

extension ImageSniffer {
    /// Walks SOI, the segments, each scan's entropy-coded data (where `FF 00` is a stuffed byte and
    /// RST0…RST7 are restart markers) and EOI. Bytes between segments are skipped as libjpeg skips
    /// them (stray bytes, `FF` fill bytes); a progressive file's scans are walked one after the
    /// other. Refused: a second SOI or frame header, a scan before the frame header, EOI before any
    /// scan, a segment length under 2; the bytes ending before EOI are a cut file.
    static func walkJPEG(_ v: ByteView) throws(SniffStop) {
        try v.expect([0xFF, 0xD8], at: 0, else: "not a JPEG signature")
        var position = 2
        var sawFrame = false
        var sawScan = false
        while true {
            let codeAt = try nextJPEGMarker(v, from: position)
            let code = v.bytes[codeAt]
            switch code {
            case 0xD9:
                guard sawScan else { throw .invalid("JPEG ends before its first scan") }
                return
            case 0xD8:
                throw .invalid("JPEG has a second SOI")
            case 0x01, 0xD0...0xD7:
                // TEM and restart markers outside a scan stand alone; libjpeg skips them.
                position = codeAt + 1
            default:
                let length = Int(try v.u16be(codeAt + 1))
                guard length >= 2 else { throw .invalid("bad JPEG segment length") }
                try v.require(codeAt + 1, length)
                let end = codeAt + 1 + length
                switch code {
                case 0xC0...0xCF where code != 0xC4 && code != 0xC8 && code != 0xCC:
                    guard !sawFrame else { throw .invalid("JPEG has a second frame header") }
                    sawFrame = true
                    position = end
                case 0xDA:
                    guard sawFrame else { throw .invalid("JPEG scan before its frame header") }
                    sawScan = true
                    position = try endOfEntropyCodedData(v, from: end)
                default:
                    position = end
                }
            }
        }
    }

    /// The offset of the `FF` that starts the marker ending a scan's entropy-coded data begun at
    /// `start`: `FF 00` (a stuffed `FF`) and RST0…RST7 belong to the data, any other marker ends
    /// it. `memchr` finds each `FF`, so the common case costs a vectorised scan.
    private static func endOfEntropyCodedData(_ v: ByteView, from start: Int) throws(SniffStop) -> Int {
        guard let base = v.bytes.baseAddress else { throw .needMore }
        var position = start
        while true {
            guard position < v.count else { throw .needMore }
            guard let found = memchr(base + position, 0xFF, v.count - position) else { throw .needMore }
            let ff = base.distance(to: UnsafeRawPointer(found))
            var next = ff + 1
            while try v.u8(next) == 0xFF { next += 1 }  // fill bytes before a marker
            switch v.bytes[next] {
            case 0x00, 0xD0...0xD7:
                position = next + 1
            default:
                return next - 1
            }
        }
    }
}
