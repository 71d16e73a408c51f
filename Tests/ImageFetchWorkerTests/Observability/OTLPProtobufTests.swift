import Testing
import Tracing

@testable import ImageFetchWorker

/// The wire bytes, checked against encodings worked out by hand from the protobuf specification;
/// `ObservabilityTests` has opentelemetry-proto's own decoder read what the worker sends.
@Suite struct OTLPProtobufTests {
    @Test func varintsAndFixedValuesFollowTheWireFormat() {
        var writer = ProtobufWriter()
        writer.varint(1, 150)
        #expect(writer.bytes == [0x08, 0x96, 0x01])
        writer = ProtobufWriter()
        writer.varint(3, UInt64(bitPattern: -1), always: true)
        #expect(writer.bytes == [0x18] + Array(repeating: 0xff, count: 9) + [0x01])
        writer = ProtobufWriter()
        writer.fixed64(7, 1)
        writer.fixed32(16, 1)
        #expect(writer.bytes == [0x39, 1, 0, 0, 0, 0, 0, 0, 0, 0x85, 0x01, 1, 0, 0, 0])
        writer = ProtobufWriter()
        writer.double(4, 1.0)
        #expect(writer.bytes == [0x21, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f])
    }

    @Test func defaultsAreLeftOutButOneofMembersAreNot() {
        var writer = ProtobufWriter()
        writer.varint(6, 0)
        writer.string(5, "")
        writer.fixed64(7, 0)
        writer.bytes(4, [])
        #expect(writer.bytes.isEmpty)
        writer.varint(2, 0, always: true)
        writer.string(1, "", always: true)
        #expect(writer.bytes == [0x10, 0x00, 0x0a, 0x00])
    }

    @Test func messagesAreLengthDelimited() {
        var writer = ProtobufWriter()
        // KeyValue { key: "a", value: AnyValue { string_value: "b" } }
        writer.message(9) { keyValue in
            keyValue.string(1, "a")
            keyValue.message(2) { $0.string(1, "b", always: true) }
        }
        #expect(writer.bytes == [0x4a, 0x08, 0x0a, 0x01, 0x61, 0x12, 0x03, 0x0a, 0x01, 0x62])
        var long = ProtobufWriter()
        long.string(1, String(repeating: "x", count: 200))
        #expect(Array(long.bytes.prefix(3)) == [0x0a, 0xc8, 0x01])
    }

    @Test func aSpanCarriesItsIdsInTheHexFormsByteOrder() throws {
        let trace = try #require(
            TraceContext(
                traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                tracestate: nil))
        let span = FinishedSpan(
            name: "s", kind: .client, trace: trace.child(spanID: 0x0102_0304_0506_0708),
            parentSpanID: trace.spanID, start: 1, end: 2, attributes: [], status: nil, events: [])
        let bytes = OTLPProtobuf.encode([span], resource: [])
        let traceID: [UInt8] = [
            0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36,
        ]
        #expect(bytes.contains(subsequence: [0x0a, 0x10] + traceID))
        #expect(bytes.contains(subsequence: [0x12, 0x08, 1, 2, 3, 4, 5, 6, 7, 8]))
        #expect(bytes.contains(subsequence: [0x22, 0x08, 0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7]))
        // kind CLIENT, then the sampled flag as fixed32 field 16.
        #expect(bytes.contains(subsequence: [0x30, 0x03]))
        #expect(Array(bytes.suffix(6)) == [0x85, 0x01, 0x01, 0x00, 0x00, 0x00])
    }
}

extension Array where Element == UInt8 {
    fileprivate func contains(subsequence: [UInt8]) -> Bool {
        guard subsequence.count <= count else { return false }
        return (0...(count - subsequence.count)).contains { Array(self[$0..<($0 + subsequence.count)]) == subsequence }
    }
}
