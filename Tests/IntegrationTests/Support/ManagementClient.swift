import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The RabbitMQ management HTTP API (`IFW_TEST_MANAGEMENT_URL`, enabled by scripts/test.sh), through
/// Foundation's URLSession: a client that shares no code with the worker's AMQP layer, header
/// decoder or JSON writer, so a bug that is symmetric between the product's publisher and its
/// consumer still shows here.
struct ManagementClient: Sendable {
    let base: String

    /// The client for the test broker; nil without the management plugin.
    static var test: ManagementClient? {
        ProcessInfo.processInfo.environment["IFW_TEST_MANAGEMENT_URL"].map { ManagementClient(base: $0) }
    }

    /// One message as the broker holds it, decoded by the broker.
    struct Message: @unchecked Sendable {
        // @unchecked Sendable: JSON values (strings, numbers, arrays, dictionaries) never mutated.
        let payload: String
        let headers: [String: Any]
        let properties: [String: Any]
        let redelivered: Bool

        /// The payload parsed as a JSON object.
        var object: [String: Any]? {
            (try? JSONSerialization.jsonObject(with: Data(payload.utf8))) as? [String: Any]
        }
    }

    /// Takes up to `count` messages out of `queue` (`ackmode: ack_requeue_false`), in queue order.
    func take(_ queue: String, count: Int) async throws -> [Message] {
        let body: [String: Any] = [
            "count": count, "ackmode": "ack_requeue_false", "encoding": "auto", "truncate": 1_000_000,
        ]
        let data = try await request(
            "POST", "/api/queues/%2F/\(Self.encode(queue))/get",
            body: try JSONSerialization.data(withJSONObject: body))
        guard let rows = try JSONSerialization.jsonObject(with: data) as? [[String: Any]] else {
            throw TestSetupError(
                "the management API answered something other than a list: \(String(decoding: data, as: UTF8.self).prefix(300))"
            )
        }
        return rows.map { row in
            let properties = row["properties"] as? [String: Any] ?? [:]
            return Message(
                payload: row["payload"] as? String ?? "", headers: properties["headers"] as? [String: Any] ?? [:],
                properties: properties, redelivered: row["redelivered"] as? Bool ?? false)
        }
    }

    /// Takes messages until `count` have come or `timeout` seconds pass.
    func take(_ queue: String, atLeast count: Int, timeout: Double) async throws -> [Message] {
        var messages: [Message] = []
        let deadline = Date().addingTimeInterval(timeout)
        while messages.count < count, Date() < deadline {
            let batch = try await take(queue, count: count - messages.count)
            messages += batch
            if batch.isEmpty { try await Task.sleep(for: .milliseconds(100)) }
        }
        return messages
    }

    /// `GET /api/connections`: each connection's client-provided name and negotiated heartbeat (s).
    func connections() async throws -> [(name: String, heartbeat: Int)] {
        let data = try await request("GET", "/api/connections", body: nil)
        let rows = try JSONSerialization.jsonObject(with: data) as? [[String: Any]] ?? []
        return rows.compactMap { row in
            guard let name = (row["client_properties"] as? [String: Any])?["connection_name"] as? String else {
                return nil
            }
            return (name, row["timeout"] as? Int ?? -1)
        }
    }

    /// Closes (`DELETE /api/connections/NAME`) every connection whose client-provided name ends
    /// with `suffix`; returns how many.
    @discardableResult
    func closeConnections(nameEndingWith suffix: String) async throws -> Int {
        let data = try await request("GET", "/api/connections", body: nil)
        let rows = try JSONSerialization.jsonObject(with: data) as? [[String: Any]] ?? []
        var closed = 0
        for row in rows {
            guard let name = row["name"] as? String,
                let clientName = (row["client_properties"] as? [String: Any])?["connection_name"] as? String,
                clientName.hasSuffix(suffix)
            else { continue }
            _ = try await request("DELETE", "/api/connections/\(Self.encode(name))", body: nil)
            closed += 1
        }
        return closed
    }

    private func request(_ method: String, _ path: String, body: Data?) async throws -> Data {
        guard let url = URL(string: base + path) else { throw TestSetupError("bad management URL \(base + path)") }
        var request = URLRequest(url: url)
        request.httpMethod = method
        request.httpBody = body
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.setValue("Basic " + Data("guest:guest".utf8).base64EncodedString(), forHTTPHeaderField: "Authorization")
        let (data, response) = try await URLSession.shared.data(for: request)
        let status = (response as? HTTPURLResponse)?.statusCode ?? 0
        guard (200..<300).contains(status) else {
            throw TestSetupError(
                "\(method) \(path): HTTP \(status) \(String(decoding: data, as: UTF8.self).prefix(300))")
        }
        return data
    }

    private static func encode(_ segment: String) -> String {
        segment.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(CharacterSet(charactersIn: "-._~")))
            ?? segment
    }
}
