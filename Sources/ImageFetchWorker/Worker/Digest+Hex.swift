import Crypto

extension Digest {
    /// Lowercase hex, written straight into the string's storage (one allocation).
    var hexString: String {
        String(unsafeUninitializedCapacity: Self.byteCount * 2) { out in
            var index = 0
            for byte in self {
                out[index] = Self.hexDigit(byte >> 4)
                out[index + 1] = Self.hexDigit(byte & 0x0F)
                index += 2
            }
            return index
        }
    }

    @inline(__always)
    private static func hexDigit(_ nibble: UInt8) -> UInt8 {
        nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") + nibble - 10
    }
}
