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
            large["key-\(index)"] = index % 3 == 0 ? .int(Int64(index)) : .string(String(repeating: "v", count: index % 37))
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
}
