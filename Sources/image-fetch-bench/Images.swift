import Foundation
import ImageSamples

/// Deterministic test images, so every run fetches the same bytes.
enum BenchImages {
    /// A real PNG: width × height RGB pixels of seeded noise, zlib with stored (uncompressed)
    /// deflate blocks. 64 × 64 gives 12,415 bytes. Any PNG decoder accepts it.
    static func png(width: Int = 64, height: Int = 64, seed: UInt32 = 2_463_534_242) -> [UInt8] {
        var random = XorShift(state: seed)
        var raw: [UInt8] = []
        raw.reserveCapacity(height * (1 + 3 * width))
        for _ in 0..<height {
            raw.append(0)  // filter type None
            for _ in 0..<(3 * width) { raw.append(random.next()) }
        }
        // zlib stream: header, stored blocks of at most 65,535 bytes, Adler-32.
        var zlib: [UInt8] = [0x78, 0x01]
        var offset = 0
        repeat {
            let length = min(65_535, raw.count - offset)
            let final: UInt8 = offset + length == raw.count ? 1 : 0
            zlib.append(final)
            zlib.append(contentsOf: [
                UInt8(length & 0xFF), UInt8(length >> 8),
                UInt8(~length & 0xFF), UInt8((~length >> 8) & 0xFF),
            ])
            zlib.append(contentsOf: raw[offset..<offset + length])
            offset += length
        } while offset < raw.count
        zlib.append(contentsOf: ImageSamples.be32(Int(ImageSamples.adler32(raw))))

        var png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
        var ihdr = ImageSamples.be32(width) + ImageSamples.be32(height)
        ihdr += [8, 2, 0, 0, 0]  // 8-bit, truecolour, deflate, adaptive filtering, no interlace
        png += ImageSamples.pngChunk("IHDR", ihdr)
        png += ImageSamples.pngChunk("IDAT", zlib)
        png += ImageSamples.pngChunk("IEND", [])
        return png
    }

    /// A binary PPM (P6) of seeded noise, the input `cjpeg` turns into the large JPEG.
    static func ppm(width: Int, height: Int, seed: UInt32 = 88_172_645) -> [UInt8] {
        var random = XorShift(state: seed)
        var bytes = Array("P6\n\(width) \(height)\n255\n".utf8)
        bytes.reserveCapacity(bytes.count + width * height * 3)
        for _ in 0..<(width * height * 3) { bytes.append(random.next()) }
        return bytes
    }
}

/// xorshift32: a fixed, seedable byte stream.
struct XorShift {
    var state: UInt32

    mutating func next() -> UInt8 {
        state ^= state << 13
        state ^= state >> 17
        state ^= state << 5
        return UInt8(truncatingIfNeeded: state >> 11)
    }
}
