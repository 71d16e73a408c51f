import CRabbitMQ

/// A value in an AMQP field table (message headers, queue arguments, client properties).
///
/// Only the kinds the worker reads or writes are modelled; others decode as ``unsupported``.
public enum AMQPFieldValue: Sendable, Hashable {
    case string(String)
    case int(Int64)
    case bool(Bool)
    case table([String: AMQPFieldValue])
    case array([AMQPFieldValue])
    case unsupported

    /// The value as an integer, when it is one (any integer width) or a decimal string.
    public var intValue: Int64? {
        switch self {
        case .int(let value): return value
        case .string(let text): return Int64(text)
        default: return nil
        }
    }

    /// The value as a string, when it is one.
    public var stringValue: String? {
        if case .string(let text) = self { return text }
        return nil
    }
}

/// Owns the C memory that encoded `amqp_bytes_t` and `amqp_table_t` values point into, for the
/// duration of one call.
///
/// rabbitmq-c reads tables by pointer and copies them onto the wire inside the call that takes
/// them, so the arena only has to outlive that call. It hands out memory from a chunk by bumping an
/// offset, and ``reset()`` makes that memory reusable, so an arena kept for every publish on a
/// connection allocates nothing once its chunk is large enough.
final class AMQPArena {
    private var chunks: [(base: UnsafeMutableRawPointer, capacity: Int)] = []
    private var used = 0
    private static let chunkSize = 2048
    /// The largest alignment the arena hands out (`amqp_field_value_t` needs 8).
    private static let chunkAlignment = 16

    deinit {
        for chunk in chunks { chunk.base.deallocate() }
    }

    /// Starts over at the beginning of the arena's memory. Whatever the arena handed out before is
    /// invalid afterwards. If the last use needed more than one chunk, they are replaced by one
    /// chunk as large as all of them, so that the next use of the same size needs no allocation.
    func reset() {
        used = 0
        guard chunks.count > 1 else { return }
        let total = chunks.reduce(0) { $0 + $1.capacity }
        for chunk in chunks { chunk.base.deallocate() }
        chunks = [(UnsafeMutableRawPointer.allocate(byteCount: total, alignment: Self.chunkAlignment), total)]
    }

    /// `count` bytes aligned to `alignment` (a power of two), valid until ``reset()`` or deinit.
    private func allocate(_ count: Int, alignment: Int) -> UnsafeMutableRawPointer {
        assert(alignment <= Self.chunkAlignment && alignment.nonzeroBitCount == 1)
        let count = max(count, 1)
        if let chunk = chunks.last {
            let start = (used + alignment - 1) & ~(alignment - 1)
            if start + count <= chunk.capacity {
                used = start + count
                return chunk.base + start
            }
        }
        let capacity = max(Self.chunkSize, count)
        let base = UnsafeMutableRawPointer.allocate(byteCount: capacity, alignment: Self.chunkAlignment)
        chunks.append((base, capacity))
        used = count
        return base
    }

    private func allocate<T>(_ type: T.Type, count: Int) -> UnsafeMutablePointer<T> {
        allocate(MemoryLayout<T>.stride * count, alignment: MemoryLayout<T>.alignment)
            .bindMemory(to: T.self, capacity: max(count, 1))
    }

    /// Copies `text` into arena memory and returns it as `amqp_bytes_t`.
    func bytes(_ text: String) -> amqp_bytes_t {
        let copied = text.utf8.withContiguousStorageIfAvailable { self.bytes(UnsafeRawBufferPointer($0)) }
        if let copied { return copied }
        var utf8 = Array(text.utf8)
        return self.bytes(&utf8)
    }

    /// Copies `bytes` into arena memory and returns it as `amqp_bytes_t`.
    func bytes(_ bytes: inout [UInt8]) -> amqp_bytes_t {
        bytes.withUnsafeBytes { self.bytes($0) }
    }

    private func bytes(_ source: UnsafeRawBufferPointer) -> amqp_bytes_t {
        let pointer = allocate(source.count, alignment: 1)
        if let base = source.baseAddress { pointer.copyMemory(from: base, byteCount: source.count) }
        return amqp_bytes_t(len: source.count, bytes: pointer)
    }

    /// Encodes a table; an empty dictionary gives `amqp_empty_table`.
    func table(_ entries: [String: AMQPFieldValue]) -> amqp_table_t {
        if entries.isEmpty { return amqp_table_t(num_entries: 0, entries: nil) }
        let pointer = allocate(amqp_table_entry_t.self, count: entries.count)
        // Sorted keys make the encoding deterministic, which keeps tests and captures readable.
        for (index, entry) in entries.sorted(by: { $0.key < $1.key }).enumerated() {
            (pointer + index).initialize(to: amqp_table_entry_t(key: bytes(entry.key), value: field(entry.value)))
        }
        return amqp_table_t(num_entries: Int32(entries.count), entries: pointer)
    }

    private func field(_ value: AMQPFieldValue) -> amqp_field_value_t {
        var result = amqp_field_value_t()
        switch value {
        case .string(let text):
            result.kind = UInt8(AMQP_FIELD_KIND_UTF8.rawValue)
            result.value.bytes = bytes(text)
        case .int(let number):
            result.kind = UInt8(AMQP_FIELD_KIND_I64.rawValue)
            result.value.i64 = number
        case .bool(let flag):
            result.kind = UInt8(AMQP_FIELD_KIND_BOOLEAN.rawValue)
            result.value.boolean = flag ? 1 : 0
        case .table(let nested):
            result.kind = UInt8(AMQP_FIELD_KIND_TABLE.rawValue)
            result.value.table = table(nested)
        case .array(let values):
            result.kind = UInt8(AMQP_FIELD_KIND_ARRAY.rawValue)
            let pointer = allocate(amqp_field_value_t.self, count: values.count)
            for (index, element) in values.enumerated() { (pointer + index).initialize(to: field(element)) }
            result.value.array = amqp_array_t(num_entries: Int32(values.count), entries: pointer)
        case .unsupported:
            result.kind = UInt8(AMQP_FIELD_KIND_VOID.rawValue)
        }
        return result
    }
}

extension amqp_bytes_t {
    /// The bytes as a String (UTF-8, lossy), or nil when empty or absent.
    var stringValue: String? {
        guard len > 0, let bytes else { return nil }
        let buffer = UnsafeRawBufferPointer(start: bytes, count: len)
        return String(decoding: buffer, as: UTF8.self)
    }

    /// A copy of the bytes.
    var arrayValue: [UInt8] {
        guard len > 0, let bytes else { return [] }
        return Array(UnsafeRawBufferPointer(start: bytes, count: len))
    }
}

enum AMQPTableDecoder {
    /// Decodes a table received from the broker into Swift values (a copy; the C memory may go).
    static func decode(_ table: amqp_table_t) -> [String: AMQPFieldValue] {
        guard table.num_entries > 0, let entries = table.entries else { return [:] }
        var result: [String: AMQPFieldValue] = [:]
        result.reserveCapacity(Int(table.num_entries))
        for index in 0..<Int(table.num_entries) {
            let entry = entries[index]
            guard let key = entry.key.stringValue else { continue }
            result[key] = decode(entry.value)
        }
        return result
    }

    static func decode(_ value: amqp_field_value_t) -> AMQPFieldValue {
        switch amqp_field_value_kind_t(rawValue: UInt32(value.kind)) {
        case AMQP_FIELD_KIND_UTF8, AMQP_FIELD_KIND_BYTES:
            return .string(value.value.bytes.stringValue ?? "")
        case AMQP_FIELD_KIND_BOOLEAN: return .bool(value.value.boolean != 0)
        case AMQP_FIELD_KIND_I8: return .int(Int64(value.value.i8))
        case AMQP_FIELD_KIND_U8: return .int(Int64(value.value.u8))
        case AMQP_FIELD_KIND_I16: return .int(Int64(value.value.i16))
        case AMQP_FIELD_KIND_U16: return .int(Int64(value.value.u16))
        case AMQP_FIELD_KIND_I32: return .int(Int64(value.value.i32))
        case AMQP_FIELD_KIND_U32: return .int(Int64(value.value.u32))
        case AMQP_FIELD_KIND_I64: return .int(value.value.i64)
        case AMQP_FIELD_KIND_U64: return .int(Int64(truncatingIfNeeded: value.value.u64))
        case AMQP_FIELD_KIND_TIMESTAMP: return .int(Int64(truncatingIfNeeded: value.value.u64))
        case AMQP_FIELD_KIND_TABLE: return .table(decode(value.value.table))
        case AMQP_FIELD_KIND_ARRAY:
            let array = value.value.array
            guard array.num_entries > 0, let entries = array.entries else { return .array([]) }
            return .array((0..<Int(array.num_entries)).map { decode(entries[$0]) })
        default: return .unsupported
        }
    }
}
