import CRabbitMQ
import CShims

/// A value in an AMQP field table (message headers, queue arguments, client properties).
///
/// Every AMQP 0-9-1 field type, as RabbitMQ spells them, so that a producer's headers survive a
/// retry or dead-letter copy unchanged: the type of each value is kept along with its bits.
public enum AMQPFieldValue: Sendable, Hashable {
    /// `t`
    case bool(Bool)
    /// `b`
    case int8(Int8)
    /// `B`
    case uint8(UInt8)
    /// `s` (RabbitMQ's and rabbitmq-c's tag for a signed 16-bit integer)
    case int16(Int16)
    /// `u`
    case uint16(UInt16)
    /// `I`
    case int32(Int32)
    /// `i`
    case uint32(UInt32)
    /// `l`, the width the worker writes its own integers in.
    case int(Int64)
    /// `L` (rabbitmq-c only; RabbitMQ itself never sends it)
    case uint64(UInt64)
    /// `f`
    case float(Float)
    /// `d`
    case double(Double)
    /// `D`: `value` × 10^-`scale`.
    case decimal(scale: UInt8, value: UInt32)
    /// `S` holding valid UTF-8.
    case string(String)
    /// `S` holding bytes that are not valid UTF-8, kept as they came.
    case longString([UInt8])
    /// `x`
    case bytes([UInt8])
    /// `T`: seconds since the Unix epoch.
    case timestamp(UInt64)
    /// `F`
    case table([String: AMQPFieldValue])
    /// `A`
    case array([AMQPFieldValue])
    /// `V`
    case void

    /// The value as an integer, when it is one (any width that fits) or a decimal string.
    public var intValue: Int64? {
        switch self {
        case .int8(let value): return Int64(value)
        case .uint8(let value): return Int64(value)
        case .int16(let value): return Int64(value)
        case .uint16(let value): return Int64(value)
        case .int32(let value): return Int64(value)
        case .uint32(let value): return Int64(value)
        case .int(let value): return value
        case .uint64(let value): return Int64(exactly: value)
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
/// connection allocates nothing once its chunk is large enough (Benchmarks/ holds it to that).
@_spi(Benchmarks) public final class AMQPArena {
    private var chunks: [(base: UnsafeMutableRawPointer, capacity: Int)] = []
    private var used = 0
    private static let chunkSize = 2048
    /// The largest alignment the arena hands out (`amqp_field_value_t` needs 8).
    private static let chunkAlignment = 16

    @_spi(Benchmarks) public init() {}

    deinit {
        for chunk in chunks { chunk.base.deallocate() }
    }

    /// Starts over at the beginning of the arena's memory. Whatever the arena handed out before is
    /// invalid afterwards. If the last use needed more than one chunk, they are replaced by one
    /// chunk as large as all of them, so that the next use of the same size needs no allocation.
    @_spi(Benchmarks) public func reset() {
        used = 0
        guard chunks.count > 1 else { return }
        let total = chunks.reduce(0) { $0 + $1.capacity }
        for chunk in chunks { chunk.base.deallocate() }
        chunks = [(UnsafeMutableRawPointer.allocate(byteCount: total, alignment: Self.chunkAlignment), total)]
    }

    /// The bytes handed out since the last ``reset()``, counting the unused ends of earlier chunks.
    var bytesHandedOut: Int {
        chunks.dropLast().reduce(used) { $0 + $1.capacity }
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

    /// Encodes a table, with `extra` in place of an entry of the same name; no entries give
    /// `amqp_empty_table`.
    func table(_ entries: [String: AMQPFieldValue], adding extra: AMQPHeader? = nil) -> amqp_table_t {
        if entries.isEmpty && extra == nil { return amqp_table_t(num_entries: 0, entries: nil) }
        var list: [AMQPHeader] = []
        list.reserveCapacity(entries.count + 1)
        for entry in entries where entry.key != extra?.key { list.append(entry) }
        if let extra { list.append(extra) }
        // Sorted keys make the encoding deterministic, which keeps tests and captures readable.
        list.sort { $0.key < $1.key }
        let pointer = allocate(amqp_table_entry_t.self, count: list.count)
        for (index, entry) in list.enumerated() {
            (pointer + index).initialize(to: amqp_table_entry_t(key: bytes(entry.key), value: field(entry.value)))
        }
        return amqp_table_t(num_entries: Int32(list.count), entries: pointer)
    }

    private func field(_ value: AMQPFieldValue) -> amqp_field_value_t {
        var result = amqp_field_value_t()
        func kind(_ kind: amqp_field_value_kind_t) { result.kind = UInt8(kind.rawValue) }
        switch value {
        case .bool(let flag):
            kind(AMQP_FIELD_KIND_BOOLEAN)
            result.value.boolean = flag ? 1 : 0
        case .int8(let number):
            kind(AMQP_FIELD_KIND_I8)
            result.value.i8 = number
        case .uint8(let number):
            kind(AMQP_FIELD_KIND_U8)
            result.value.u8 = number
        case .int16(let number):
            kind(AMQP_FIELD_KIND_I16)
            result.value.i16 = number
        case .uint16(let number):
            kind(AMQP_FIELD_KIND_U16)
            result.value.u16 = number
        case .int32(let number):
            kind(AMQP_FIELD_KIND_I32)
            result.value.i32 = number
        case .uint32(let number):
            kind(AMQP_FIELD_KIND_U32)
            result.value.u32 = number
        case .int(let number):
            kind(AMQP_FIELD_KIND_I64)
            result.value.i64 = number
        case .uint64(let number):
            kind(AMQP_FIELD_KIND_U64)
            result.value.u64 = number
        case .float(let number):
            kind(AMQP_FIELD_KIND_F32)
            result.value.f32 = number
        case .double(let number):
            kind(AMQP_FIELD_KIND_F64)
            result.value.f64 = number
        case .decimal(let scale, let number):
            kind(AMQP_FIELD_KIND_DECIMAL)
            result.value.decimal = amqp_decimal_t(decimals: scale, value: number)
        case .string(let text):
            kind(AMQP_FIELD_KIND_UTF8)
            result.value.bytes = bytes(text)
        case .longString(var raw):
            kind(AMQP_FIELD_KIND_UTF8)
            result.value.bytes = bytes(&raw)
        case .bytes(var raw):
            kind(AMQP_FIELD_KIND_BYTES)
            result.value.bytes = bytes(&raw)
        case .timestamp(let seconds):
            kind(AMQP_FIELD_KIND_TIMESTAMP)
            result.value.u64 = seconds
        case .table(let nested):
            kind(AMQP_FIELD_KIND_TABLE)
            result.value.table = table(nested)
        case .array(let values):
            kind(AMQP_FIELD_KIND_ARRAY)
            let pointer = allocate(amqp_field_value_t.self, count: values.count)
            for (index, element) in values.enumerated() { (pointer + index).initialize(to: field(element)) }
            result.value.array = amqp_array_t(num_entries: Int32(values.count), entries: pointer)
        case .void:
            kind(AMQP_FIELD_KIND_VOID)
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

    /// The bytes as a String when they are valid UTF-8 (empty when absent), else nil.
    var validatedString: String? {
        guard len > 0, let bytes else { return "" }
        let buffer = UnsafeRawBufferPointer(start: bytes, count: len)
        // Names are ASCII nearly always; the generic validation looks its metadata up each call.
        if buffer.allSatisfy({ $0 < 0x80 }) { return String(decoding: buffer, as: UTF8.self) }
        return String(validating: buffer, as: UTF8.self)
    }

    /// A copy of the bytes.
    var arrayValue: [UInt8] {
        guard len > 0, let bytes else { return [] }
        return Array(UnsafeRawBufferPointer(start: bytes, count: len))
    }
}

enum AMQPTableDecoder {
    /// How deep tables and arrays nest before the decoder stops. RabbitMQ's own headers nest
    /// three levels (`x-death`); a frame holds 26,000 levels of one-element arrays, and decoding
    /// each level recursively would overflow the reading thread's stack.
    static let maxDepth = 32

    /// Decodes a table received from the broker into Swift values (a copy; the C memory may go).
    /// Containers nested deeper than ``maxDepth`` become `.void`, entries whose name is not
    /// UTF-8 are left out, and of two names equal as Strings the last is kept.
    static func decode(_ table: amqp_table_t) -> [String: AMQPFieldValue] {
        var cut = false
        return decode(table, cut: &cut)
    }

    /// ``decode(_:)``, and whether anything was cut or left out.
    static func decode(_ table: amqp_table_t, cut: inout Bool) -> [String: AMQPFieldValue] {
        decode(table, remaining: maxDepth, cut: &cut)
    }

    private static func decode(_ table: amqp_table_t, remaining: Int, cut: inout Bool) -> [String: AMQPFieldValue] {
        guard table.num_entries > 0, let entries = table.entries else { return [:] }
        var result: [String: AMQPFieldValue] = [:]
        result.reserveCapacity(Int(table.num_entries))
        for index in 0..<Int(table.num_entries) {
            let entry = entries[index]
            // A name that is not UTF-8 cannot be written back as it came: as a String each bad byte
            // becomes three, which can pass a short string's 255 bytes. The entry is left out.
            guard let key = entry.key.validatedString else {
                cut = true
                continue
            }
            // Two names that are equal as Strings (canonically equivalent, or the same bytes
            // twice) would leave one entry: that too is not the table as it came.
            if result.updateValue(decode(entry.value, remaining: remaining, cut: &cut), forKey: key) != nil {
                cut = true
            }
        }
        return result
    }

    /// One value; a table or an array with `remaining` 0 is cut.
    private static func decode(_ value: amqp_field_value_t, remaining: Int, cut: inout Bool) -> AMQPFieldValue {
        switch amqp_field_value_kind_t(rawValue: UInt32(value.kind)) {
        case AMQP_FIELD_KIND_BOOLEAN: return .bool(value.value.boolean != 0)
        case AMQP_FIELD_KIND_I8: return .int8(value.value.i8)
        case AMQP_FIELD_KIND_U8: return .uint8(value.value.u8)
        case AMQP_FIELD_KIND_I16: return .int16(value.value.i16)
        case AMQP_FIELD_KIND_U16: return .uint16(value.value.u16)
        case AMQP_FIELD_KIND_I32: return .int32(value.value.i32)
        case AMQP_FIELD_KIND_U32: return .uint32(value.value.u32)
        case AMQP_FIELD_KIND_I64: return .int(value.value.i64)
        case AMQP_FIELD_KIND_U64: return .uint64(value.value.u64)
        case AMQP_FIELD_KIND_F32: return .float(value.value.f32)
        case AMQP_FIELD_KIND_F64: return .double(value.value.f64)
        case AMQP_FIELD_KIND_DECIMAL:
            return .decimal(scale: value.value.decimal.decimals, value: value.value.decimal.value)
        case AMQP_FIELD_KIND_UTF8:
            let raw = value.value.bytes.arrayValue
            // Only valid UTF-8 becomes a String: decoding anything else would replace bytes.
            if let text = String(validating: raw, as: UTF8.self) { return .string(text) }
            return .longString(raw)
        case AMQP_FIELD_KIND_BYTES: return .bytes(value.value.bytes.arrayValue)
        case AMQP_FIELD_KIND_TIMESTAMP: return .timestamp(value.value.u64)
        case AMQP_FIELD_KIND_TABLE:
            guard remaining > 0 else {
                cut = true
                return .void
            }
            return .table(decode(value.value.table, remaining: remaining - 1, cut: &cut))
        case AMQP_FIELD_KIND_ARRAY:
            guard remaining > 0 else {
                cut = true
                return .void
            }
            let array = value.value.array
            guard array.num_entries > 0, let entries = array.entries else { return .array([]) }
            var elements: [AMQPFieldValue] = []
            elements.reserveCapacity(Int(array.num_entries))
            for index in 0..<Int(array.num_entries) {
                elements.append(decode(entries[index], remaining: remaining - 1, cut: &cut))
            }
            return .array(elements)
        default:
            // rabbitmq-c rejects a frame with an unknown field type before it gets here.
            return .void
        }
    }
}
