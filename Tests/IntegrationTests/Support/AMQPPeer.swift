import Foundation

/// scripts/amqp-peer.py: an AMQP client that is not the worker's (pika), moving header tables as
/// raw wire bytes. scripts/deps.sh installs it; without it the tests that use it fail.
enum AMQPPeer {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()

    /// `IFW_PEER_VENV`'s python, else `.run/peer-venv/bin/python` of this package.
    static var python: String {
        let venv =
            ProcessInfo.processInfo.environment["IFW_PEER_VENV"] ?? root.appendingPathComponent(".run/peer-venv").path
        return venv + "/bin/python"
    }

    static var isInstalled: Bool { FileManager.default.isExecutableFile(atPath: python) }

    static var script: String { root.appendingPathComponent("scripts/amqp-peer.py").path }

    struct PeerError: Error, CustomStringConvertible {
        var description: String
    }

    /// Publishes `body` to `queue` with a raw header table (length prefix included), confirmed;
    /// `expiration` is the message's TTL in milliseconds, `properties` more basic properties by
    /// pika's names (`type`, `app_id`, `content_encoding`, ...).
    static func publish(
        url: String, queue: String, body: String, headers: [UInt8], expiration: String? = nil,
        properties: [String: String] = [:]
    ) throws {
        guard isInstalled else {
            throw PeerError(description: "pika is not installed at \(python); run scripts/deps.sh")
        }
        let file = TestScratch.path("peer-body-\(UUID().uuidString)")
        try Data(body.utf8).write(to: URL(fileURLWithPath: file))
        defer { try? FileManager.default.removeItem(atPath: file) }
        let headerFile = TestScratch.path("peer-headers-\(UUID().uuidString)")
        try Data(hex(headers).utf8).write(to: URL(fileURLWithPath: headerFile))
        defer { try? FileManager.default.removeItem(atPath: headerFile) }
        var arguments = [script, "publish", url, queue, file, "@" + headerFile]
        if expiration != nil || !properties.isEmpty { arguments.append(expiration ?? "") }
        if !properties.isEmpty {
            arguments.append(String(decoding: try JSONSerialization.data(withJSONObject: properties), as: UTF8.self))
        }
        let status = try TestBroker.run(python, arguments)
        if status != 0 { throw PeerError(description: "amqp-peer.py publish exited \(status)") }
    }

    /// Takes one message off `queue`: its raw header table, body and string-valued basic
    /// properties (by pika's names), or nil when the queue is empty.
    static func get(
        url: String, queue: String
    ) throws -> (headers: [UInt8], body: [UInt8], properties: [String: String])? {
        guard isInstalled else {
            throw PeerError(description: "pika is not installed at \(python); run scripts/deps.sh")
        }
        let output = try TestBroker.capture(python, [script, "get", url, queue])
        guard let object = try JSONSerialization.jsonObject(with: Data(output)) as? [String: Any] else {
            throw PeerError(description: "amqp-peer.py get printed \(String(decoding: output, as: UTF8.self))")
        }
        guard let headers = object["headers_hex"] as? String, let body = object["body_hex"] as? String else {
            return nil
        }
        return (bytes(hex: headers), bytes(hex: body), object["properties"] as? [String: String] ?? [:])
    }

    static func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

    static func bytes(hex: String) -> [UInt8] {
        var result: [UInt8] = []
        var index = hex.startIndex
        while index < hex.endIndex, let next = hex.index(index, offsetBy: 2, limitedBy: hex.endIndex) {
            result.append(UInt8(hex[index..<next], radix: 16) ?? 0)
            index = next
        }
        return result
    }
}

/// A field table on the wire, built and split by hand from the AMQP 0-9-1 grammar (RabbitMQ's
/// spelling): what the tests compare, so that the worker's own decoder is not the judge.
enum WireTable {
    /// A table of the entries, in order, with its 4-byte length.
    static func encode(_ entries: [(key: String, value: [UInt8])]) -> [UInt8] {
        var body: [UInt8] = []
        for (key, value) in entries {
            body.append(UInt8(key.utf8.count))
            body += Array(key.utf8)
            body += value
        }
        return withUnsafeBytes(of: UInt32(body.count).bigEndian, Array.init) + body
    }

    /// The entries of a table (length included): key → the value's bytes, type tag first.
    static func split(_ table: [UInt8]) -> [String: [UInt8]]? {
        guard table.count >= 4 else { return nil }
        let length = Int(table[0..<4].reduce(UInt32(0)) { $0 << 8 | UInt32($1) })
        guard table.count == 4 + length else { return nil }
        var entries: [String: [UInt8]] = [:]
        var offset = 4
        while offset < table.count {
            let keyLength = Int(table[offset])
            let keyEnd = offset + 1 + keyLength
            guard keyEnd < table.count, let valueEnd = valueEnd(table, keyEnd) else { return nil }
            entries[String(decoding: table[(offset + 1)..<keyEnd], as: UTF8.self)] = Array(table[keyEnd..<valueEnd])
            offset = valueEnd
        }
        return entries
    }

    /// Where the value that starts (with its type tag) at `start` ends.
    private static func valueEnd(_ bytes: [UInt8], _ start: Int) -> Int? {
        func long(_ at: Int) -> Int? {
            guard at + 4 <= bytes.count else { return nil }
            return Int(bytes[at..<(at + 4)].reduce(UInt32(0)) { $0 << 8 | UInt32($1) })
        }
        let fixed: [UInt8: Int] = [
            0x74: 1, 0x62: 1, 0x42: 1, 0x73: 2, 0x75: 2, 0x49: 4, 0x69: 4, 0x6C: 8, 0x4C: 8,
            0x66: 4, 0x64: 8, 0x44: 5, 0x54: 8, 0x56: 0,
        ]
        let tag = bytes[start]
        if let size = fixed[tag] { return start + 1 + size <= bytes.count ? start + 1 + size : nil }
        switch tag {
        case 0x53, 0x78, 0x46, 0x41:  // long string, bytes, table, array: a length, then that much
            guard let size = long(start + 1), start + 5 + size <= bytes.count else { return nil }
            return start + 5 + size
        default:
            return nil
        }
    }
}
