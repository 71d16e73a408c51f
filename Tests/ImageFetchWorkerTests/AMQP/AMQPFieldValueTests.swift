import CRabbitMQ
import Dispatch
import Testing

@_spi(Benchmarks) @testable import ImageFetchWorker

/// Field values through rabbitmq-c's own table encoder and decoder, against wire bytes written
/// by hand from the AMQP 0-9-1 grammar as RabbitMQ spells it (so a symmetric bug in the worker's
/// encoder and decoder cannot hide).
@Suite struct AMQPFieldValueTests {
    /// A value and its encoding: the type tag, then the value, big-endian.
    static let cases: [(AMQPFieldValue, [UInt8])] = [
        (.bool(true), [0x74, 0x01]),
        (.int8(-2), [0x62, 0xFE]),
        (.uint8(250), [0x42, 0xFA]),
        (.int16(-300), [0x73, 0xFE, 0xD4]),
        (.uint16(65000), [0x75, 0xFD, 0xE8]),
        (.int32(-70000), [0x49, 0xFF, 0xFE, 0xEE, 0x90]),
        (.uint32(4_000_000_000), [0x69, 0xEE, 0x6B, 0x28, 0x00]),
        (.int(-5_000_000_000), [0x6C, 0xFF, 0xFF, 0xFF, 0xFE, 0xD5, 0xFA, 0x0E, 0x00]),
        (.uint64(.max), [0x4C, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]),
        (.float(1.5), [0x66, 0x3F, 0xC0, 0x00, 0x00]),
        (.double(-2.25), [0x64, 0xC0, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00]),
        (.decimal(scale: 2, value: 12345), [0x44, 0x02, 0x00, 0x00, 0x30, 0x39]),
        (.string("é"), [0x53, 0x00, 0x00, 0x00, 0x02, 0xC3, 0xA9]),
        (.longString([0xFF, 0x00]), [0x53, 0x00, 0x00, 0x00, 0x02, 0xFF, 0x00]),
        (.bytes([0x00, 0xFF, 0x80]), [0x78, 0x00, 0x00, 0x00, 0x03, 0x00, 0xFF, 0x80]),
        (.timestamp(1_700_000_000), [0x54, 0x00, 0x00, 0x00, 0x00, 0x65, 0x53, 0xF1, 0x00]),
        (.void, [0x56]),
        (.table(["k": .int8(1)]), [0x46, 0x00, 0x00, 0x00, 0x04, 0x01, 0x6B, 0x62, 0x01]),
        (
            .array([.uint8(1), .string("a")]),
            [0x41, 0x00, 0x00, 0x00, 0x08, 0x42, 0x01, 0x53, 0x00, 0x00, 0x00, 0x01, 0x61]
        ),
    ]

    /// Encodes a table with the worker's arena and rabbitmq-c's `amqp_encode_table`.
    static func wire(_ table: [String: AMQPFieldValue], adding extra: AMQPHeader? = nil) -> [UInt8]? {
        let arena = AMQPArena()
        var encodedTable = arena.table(table, adding: extra)
        var buffer = [UInt8](repeating: 0, count: 4096)
        var offset = 0
        let status = buffer.withUnsafeMutableBytes { raw in
            amqp_encode_table(amqp_bytes_t(len: raw.count, bytes: raw.baseAddress), &encodedTable, &offset)
        }
        return status == AMQP_STATUS_OK.rawValue ? Array(buffer[..<offset]) : nil
    }

    /// Decodes wire bytes with rabbitmq-c's `amqp_decode_table`, then the worker's decoder.
    static func decoded(_ wire: [UInt8]) -> [String: AMQPFieldValue]? {
        var cut = false
        return decoded(wire, cut: &cut)
    }

    /// ``decoded(_:)``, and whether the worker's decoder cut or left something out.
    static func decoded(_ wire: [UInt8], cut: inout Bool) -> [String: AMQPFieldValue]? {
        var pool = amqp_pool_t()
        init_amqp_pool(&pool, 4096)
        defer { empty_amqp_pool(&pool) }
        var bytes = wire
        var table = amqp_table_t()
        var offset = 0
        let status = bytes.withUnsafeMutableBytes { raw in
            amqp_decode_table(amqp_bytes_t(len: raw.count, bytes: raw.baseAddress), &pool, &table, &offset)
        }
        guard status == AMQP_STATUS_OK.rawValue, offset == wire.count else { return nil }
        return AMQPTableDecoder.decode(table, cut: &cut)
    }

    /// A one-entry table `{"k": value}` on the wire: its length, the key as a short string, the value.
    static func oneEntryTable(_ value: [UInt8]) -> [UInt8] {
        let length = UInt32(2 + value.count)
        return withUnsafeBytes(of: length.bigEndian, Array.init) + [0x01, 0x6B] + value
    }

    @Test(arguments: cases.indices)
    func everyFieldTypeHasItsWireEncodingAndComesBackAsItWent(_ index: Int) {
        let (value, bytes) = Self.cases[index]
        let expected = Self.oneEntryTable(bytes)
        #expect(Self.wire(["k": value]) == expected, "\(value)")
        #expect(Self.decoded(expected) == ["k": value], "\(value)")
    }

    /// Bits, not values: NaN payloads and negative zero survive too.
    @Test func floatsKeepTheirBits() {
        let floats: [Float] = [-0.0, .nan, .infinity, Float(bitPattern: 0x7FC0_1234), .leastNonzeroMagnitude]
        let doubles: [Double] = [-0.0, .nan, -.infinity, Double(bitPattern: 0x7FF8_0000_0000_BEEF)]
        var table: [String: AMQPFieldValue] = [:]
        for (index, float) in floats.enumerated() { table["f\(index)"] = .float(float) }
        for (index, double) in doubles.enumerated() { table["d\(index)"] = .double(double) }
        let back = Self.wire(table).flatMap(Self.decoded) ?? [:]
        for (index, float) in floats.enumerated() {
            guard case .float(let got) = back["f\(index)"] else {
                Issue.record("f\(index) lost its type")
                continue
            }
            #expect(got.bitPattern == float.bitPattern)
        }
        for (index, double) in doubles.enumerated() {
            guard case .double(let got) = back["d\(index)"] else {
                Issue.record("d\(index) lost its type")
                continue
            }
            #expect(got.bitPattern == double.bitPattern)
        }
    }

    /// Everything at once, nested three deep.
    @Test func aNestedTableOfEveryTypeRoundTrips() {
        var all: [String: AMQPFieldValue] = [:]
        for (index, entry) in Self.cases.enumerated() { all["v\(index)"] = entry.0 }
        let headers: [String: AMQPFieldValue] = [
            "all": .table(all),
            "list": .array(Self.cases.map(\.0) + [.array([.table(all)])]),
            "": .string("an empty key"),
        ]
        #expect(Self.wire(headers).flatMap(Self.decoded) == headers)
    }

    /// The publish sequence number goes in as the headers are encoded, in place of one the
    /// message already had, and in sorted order with the others.
    @Test func anAddedHeaderJoinsOrReplacesTheTablesEntries() {
        let sequence: AMQPHeader = ("x-publish-seq", .int(7))
        #expect(Self.wire([:], adding: sequence).flatMap(Self.decoded) == ["x-publish-seq": .int(7)])
        let headers: [String: AMQPFieldValue] = [
            "traceparent": .string("t"), "x-publish-seq": .int(1), "a": .bool(true),
        ]
        let wire = Self.wire(headers, adding: sequence)
        #expect(
            wire.flatMap(Self.decoded) == ["traceparent": .string("t"), "x-publish-seq": .int(7), "a": .bool(true)])
        var expected = headers
        expected["x-publish-seq"] = .int(7)
        #expect(wire == Self.wire(expected))
        #expect(Self.wire([:]) == [0, 0, 0, 0])
    }

    @Test func integersOfEveryWidthReadAsIntegers() {
        #expect(AMQPFieldValue.int8(-2).intValue == -2)
        #expect(AMQPFieldValue.uint32(4_000_000_000).intValue == 4_000_000_000)
        #expect(AMQPFieldValue.uint64(.max).intValue == nil)
        #expect(AMQPFieldValue.timestamp(5).intValue == nil)
        #expect(AMQPFieldValue.string("12").intValue == 12)
    }

    /// A header name of bytes that are not UTF-8 (a valid AMQP short string) became a String with
    /// U+FFFD for each byte, three bytes each: written back in a retry or dead-letter copy, 100
    /// bytes of 0xFF made a 300-byte name, which rabbitmq-c writes with its length cut to a byte
    /// (44), and the frame the broker got said something else. Such an entry is left out.
    @Test func aHeaderNameThatIsNotUTF8IsLeftOutAndTheTableWritesBackWhole() throws {
        let badName = [UInt8](repeating: 0xFF, count: 100)
        let kept: [UInt8] = [0x01, 0x6B, 0x62, 0x01]  // "k": int8 1
        let odd: [UInt8] = [UInt8(badName.count)] + badName + [0x62, 0x02]
        let entries = odd + kept
        let wire = withUnsafeBytes(of: UInt32(entries.count).bigEndian, Array.init) + entries
        var cut = false
        let headers = try #require(Self.decoded(wire, cut: &cut))
        #expect(cut)
        #expect(headers == ["k": .int8(1)])
        #expect(Self.wire(headers).flatMap(Self.decoded) == headers)
    }

    /// `café` precomposed and decomposed are two names on the wire but one Swift String: one
    /// entry was dropped without a word, from every copy (failed before the fix: no cut).
    @Test func twoNamesEqualAsStringsAreACut() throws {
        func entry(_ name: String, _ value: UInt8) -> [UInt8] {
            [UInt8(name.utf8.count)] + Array(name.utf8) + [0x62, value]
        }
        let entries = entry("caf\u{E9}", 1) + entry("cafe\u{301}", 2) + entry("k", 3)
        let wire = withUnsafeBytes(of: UInt32(entries.count).bigEndian, Array.init) + entries
        var cut = false
        let headers = try #require(Self.decoded(wire, cut: &cut))
        #expect(cut)
        #expect(headers.count == 2)
    }

    /// Headers nested as deep as a frame allows: one-element arrays, five bytes a level, 26,000
    /// levels in the 131,072 bytes of a default frame. rabbitmq-c decodes them (its recursion is
    /// small); the worker's decoder recursed too, a few hundred bytes a level, and a delivery with
    /// them overflowed the stack of the thread that read it. It stops at ``AMQPTableDecoder/maxDepth``.
    @Test func headersNestedAsDeepAsAFrameAllowsAreCut() {
        let depth = 26_000
        var value = [UInt8](repeating: 0, count: 5 * depth + 2)
        var end = value.count
        value[end - 2] = 0x42  // the innermost value, `B` 1
        value[end - 1] = 0x01
        end -= 2
        for level in 0..<depth {
            let inner = UInt32(2 + 5 * level)
            end -= 5
            value[end] = 0x41
            withUnsafeBytes(of: inner.bigEndian) { value.replaceSubrange((end + 1)..<(end + 5), with: $0) }
        }
        let wire = Self.oneEntryTable(value)
        // On a dispatch thread, as deliveries are read.
        let done = DispatchSemaphore(value: 0)
        nonisolated(unsafe) var result: [String: AMQPFieldValue]?
        DispatchQueue(label: "deep-headers").async {
            result = Self.decoded(wire)
            done.signal()
        }
        done.wait()
        var levels = 0
        var current = result?["k"]
        while case .array(let elements)? = current {
            levels += 1
            current = elements.first
        }
        #expect(levels == AMQPTableDecoder.maxDepth)
        #expect(current == .void)
    }
}
