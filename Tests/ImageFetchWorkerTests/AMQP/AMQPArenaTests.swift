import CRabbitMQ
import Testing

@_spi(Benchmarks) @testable import ImageFetchWorker

@Suite struct AMQPArenaTests {
    static let headers: [String: AMQPFieldValue] = [
        "x-error-code": .string("too_large"),
        "x-error-message": .string("the body is larger than 10485760 bytes — größer"),
        "x-attempt": .int(3),
        "x-empty": .string(""),
        "x-flag": .bool(true),
        "x-death": .array([.table(["count": .int(1), "queue": .string("image-fetch.jobs")]), .string("z")]),
        "nested": .table(["a": .table(["b": .int(-7)])]),
    ]

    @Test func aTableDecodesToWhatWasEncoded() {
        let arena = AMQPArena()
        _ = arena.bytes("odd")  // so that the entries do not start at the chunk's aligned start
        let table = arena.table(Self.headers)
        #expect(AMQPTableDecoder.decode(table) == Self.headers)
        #expect(Int(bitPattern: table.entries) % MemoryLayout<amqp_table_entry_t>.alignment == 0)
    }

    @Test func propertiesDecodeToWhatWasEncoded() {
        var properties = AMQPProperties()
        properties.contentType = "application/json"
        properties.messageID = "job-1"
        properties.correlationID = "c"
        properties.persistent = true
        properties.timestamp = 1_795_000_000
        properties.headers = Self.headers
        let arena = AMQPArena()
        #expect(AMQPProperties(decoding: properties.encode(in: arena)) == properties)
    }

    /// More than one chunk: 300 entries with keys and values of odd lengths. After `reset()` the
    /// same arena encodes another table as well, and again after that (its memory is reused).
    @Test func aTableLargerThanAChunkAndReuseAfterReset() {
        var large: [String: AMQPFieldValue] = [:]
        for index in 0..<300 {
            large["key-\(index)"] =
                index % 3 == 0 ? .int(Int64(index)) : .string(String(repeating: "v", count: index % 37))
        }
        let arena = AMQPArena()
        for _ in 0..<3 {
            #expect(AMQPTableDecoder.decode(arena.table(large)) == large)
            arena.reset()
            #expect(AMQPTableDecoder.decode(arena.table(Self.headers)) == Self.headers)
            arena.reset()
        }
    }

    @Test func bytesCopyTheText() {
        let arena = AMQPArena()
        // The string's own storage is gone when the closure returns; the arena's copy is not.
        let bytes = { arena.bytes(String(repeating: "ab", count: 40)) }()
        #expect(bytes.stringValue == String(repeating: "ab", count: 40))
        #expect(bytes.len == 80)
        #expect(arena.bytes("").len == 0)
    }

    /// The publish path skips encoding the properties to learn their size when the arena's bound
    /// proves they fit (``AMQPArena/bytesHandedOut`` + 20): the bound must hold for every shape,
    /// most of all many tiny entries, where the wire overhead is largest against the payload.
    @Test func encodedPropertiesNeverExceedTheArenasBound() {
        var shapes: [[String: AMQPFieldValue]] = [Self.headers, [:]]
        var tiny: [String: AMQPFieldValue] = [:]
        for index in 0..<500 { tiny["\(index)"] = index % 3 == 0 ? .void : (index % 3 == 1 ? .string("") : .array([])) }
        shapes.append(tiny)
        shapes.append(["a": .array((0..<300).map { $0 % 2 == 0 ? .void : .array([]) })])
        shapes.append(["t": .table(["": .table([:]), "x": .bytes([]), "d": .decimal(scale: 1, value: 2)])])
        shapes.append(["big": .longString(Array(repeating: 0x41, count: 100_000)), "n": .double(1.5)])
        var scratch = [UInt8](repeating: 0, count: 1 << 20)
        for shape in shapes {
            var properties = AMQPProperties()
            properties.contentType = ""
            properties.messageID = "m"
            properties.correlationID = String(repeating: "c", count: 255)
            properties.replyTo = "r"
            properties.persistent = true
            properties.timestamp = 1
            properties.priority = 9
            properties.headers = shape
            let arena = AMQPArena()
            var encoded = properties.encode(in: arena)
            let bound = arena.bytesHandedOut + 20
            let size = scratch.withUnsafeMutableBytes { buffer in
                amqp_encode_properties(
                    UInt16(AMQP_BASIC_CLASS), &encoded, amqp_bytes_t(len: buffer.count, bytes: buffer.baseAddress))
            }
            #expect(size > 0 && Int(size) <= bound, "\(shape.count) entries: \(size) bytes encoded, bound \(bound)")
        }
    }
}
