import Synchronization

/// A W3C Trace Context (https://www.w3.org/TR/trace-context/): the `traceparent` of one span and
/// the `tracestate` that travels with it. Parsing follows the specification's rules for
/// receivers: an invalid `traceparent` is ignored (a new trace starts) and never rejects a job.
package struct TraceContext: Sendable, Hashable {
    /// 16 bytes, as two big-endian halves; never all zero.
    package var traceID: TraceID
    /// 8 bytes; never zero.
    package var spanID: UInt64
    /// Bit 0: sampled.
    package var flags: UInt8
    /// The vendor entries, passed on unchanged; nil when absent or invalid.
    package var traceState: String?

    package var isSampled: Bool { flags & 1 == 1 }

    package init(traceID: TraceID, spanID: UInt64, flags: UInt8 = 1, traceState: String? = nil) {
        self.traceID = traceID
        self.spanID = spanID
        self.flags = flags
        self.traceState = traceState
    }

    /// The 128-bit trace id.
    package struct TraceID: Sendable, Hashable {
        package var high: UInt64
        package var low: UInt64

        package init(high: UInt64, low: UInt64) {
            self.high = high
            self.low = low
        }

        /// A random id (never all zero).
        package static func random() -> TraceID {
            TraceID(high: TraceIDGenerator.next(), low: TraceIDGenerator.next() | 1)
        }

        /// 32 lowercase hex digits.
        package var hex: String { TraceContext.hex(high) + TraceContext.hex(low) }
    }

    /// A random span id (never zero).
    package static func randomSpanID() -> UInt64 {
        TraceIDGenerator.next() | 1
    }

    /// Parses a `traceparent` value and an optional `tracestate`. Version `00` must be exactly
    /// 55 characters; a later version may append fields after a `-`, which are ignored. Version
    /// `ff`, upper-case hex, and all-zero ids are invalid.
    package init?(traceparent: String, tracestate: String? = nil) {
        let utf8 = Array(traceparent.utf8)
        guard utf8.count >= 55, utf8[2] == UInt8(ascii: "-"), utf8[35] == UInt8(ascii: "-"),
            utf8[52] == UInt8(ascii: "-"),
            let version = Self.parseHex(utf8[0..<2]), version != 0xff,
            let high = Self.parseHex(utf8[3..<19]), let low = Self.parseHex(utf8[19..<35]),
            let span = Self.parseHex(utf8[36..<52]), let flags = Self.parseHex(utf8[53..<55])
        else { return nil }
        if version == 0 {
            guard utf8.count == 55 else { return nil }
        } else if utf8.count > 55, utf8[55] != UInt8(ascii: "-") {
            return nil
        }
        guard high != 0 || low != 0, span != 0 else { return nil }
        self.traceID = TraceID(high: high, low: low)
        self.spanID = span
        self.flags = UInt8(flags)
        self.traceState = tracestate.flatMap(Self.validTraceState)
    }

    /// The `traceparent` value: `00-<trace id>-<span id>-<flags>`.
    package var traceparent: String {
        // Written in one buffer: interpolating the four hex strings cost about 3,000 instructions
        // per result.
        String(unsafeUninitializedCapacity: 55) { buffer in
            var at = 0
            func put(_ value: UInt64, digits: Int) {
                Self.writeHex(value, digits: digits, into: buffer, at: at)
                at += digits
            }
            func dash() {
                buffer[at] = UInt8(ascii: "-")
                at += 1
            }
            put(0, digits: 2)
            dash()
            put(traceID.high, digits: 16)
            put(traceID.low, digits: 16)
            dash()
            put(spanID, digits: 16)
            dash()
            put(UInt64(flags), digits: 2)
            return at
        }
    }

    /// The span id as 16 lowercase hex digits.
    package var spanIDHex: String { Self.hex(spanID) }

    /// The same trace with `spanID` as its current span: what a child passes on.
    package func child(spanID: UInt64) -> TraceContext {
        TraceContext(traceID: traceID, spanID: spanID, flags: flags, traceState: traceState)
    }

    /// `tracestate` passes unchanged when it fits the specification's limits (512 characters,
    /// printable ASCII); otherwise it is dropped, as the specification allows.
    static func validTraceState(_ value: String) -> String? {
        let trimmed = value.utf8.drop { $0 == 0x20 || $0 == 0x09 }
        guard !trimmed.isEmpty, value.utf8.count <= 512,
            value.utf8.allSatisfy({ $0 >= 0x20 && $0 <= 0x7e || $0 == 0x09 })
        else { return nil }
        return value
    }

    /// Lowercase hex digits only; upper case is invalid in `traceparent`.
    static func parseHex(_ digits: ArraySlice<UInt8>) -> UInt64? {
        var value: UInt64 = 0
        for digit in digits {
            let nibble: UInt8
            switch digit {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): nibble = digit - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): nibble = digit - UInt8(ascii: "a") + 10
            default: return nil
            }
            value = value << 4 | UInt64(nibble)
        }
        return value
    }

    static func hex(_ value: UInt64, digits: Int = 16) -> String {
        String(unsafeUninitializedCapacity: digits) { buffer in
            writeHex(value, digits: digits, into: buffer, at: 0)
            return digits
        }
    }

    /// The low `digits` nibbles of `value` as lowercase hex, into `buffer` from `offset`.
    private static func writeHex(
        _ value: UInt64, digits: Int, into buffer: UnsafeMutableBufferPointer<UInt8>,
        at offset: Int
    ) {
        precondition(offset >= 0 && offset + digits <= buffer.count)
        let start = buffer.baseAddress! + offset
        var rest = value
        for index in stride(from: digits - 1, through: 0, by: -1) {
            let nibble = UInt8(truncatingIfNeeded: rest) & 0xf
            // Arithmetic rather than an alphabet array, which would be allocated per call.
            start[index] = nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") - 10 + nibble
            rest >>= 4
        }
    }
}

/// Trace and span ids without a system call each: `SystemRandomNumberGenerator` reads getrandom(2)
/// on every call, three times per job. SplitMix64 over a counter seeded once from it gives ids that
/// are unique within the process (its mix is a bijection of the counter) and spread like random
/// ones across processes; ids must be unique, not secret.
enum TraceIDGenerator {
    private static let counter = Atomic<UInt64>(UInt64.random(in: .min ... .max))

    static func next() -> UInt64 {
        SplitMix64.mix(counter.wrappingAdd(SplitMix64.increment, ordering: .relaxed).newValue)
    }
}

/// SplitMix64 (Steele, Lea and Flood): a small, fast generator whose outputs are spread well. The
/// trace ids use its mix; the tests use it seeded, so that their random inputs reproduce.
package struct SplitMix64: RandomNumberGenerator {
    package var state: UInt64

    package init(state: UInt64) { self.state = state }

    package mutating func next() -> UInt64 {
        state &+= Self.increment
        return Self.mix(state)
    }

    static let increment: UInt64 = 0x9E37_79B9_7F4A_7C15

    static func mix(_ value: UInt64) -> UInt64 {
        var z = value
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
