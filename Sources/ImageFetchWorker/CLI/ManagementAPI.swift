import Dispatch
import Foundation
import Synchronization

/// A small client for the RabbitMQ management API (`GET /api/queues/VHOST/NAME`), for the
/// unacked counts and rates that a passive declare cannot give. It runs on the libcurl
/// ``FetchEngine`` (no address policy: the management API is usually on a private network).
///
/// Credentials come from the URL's user info, or else from the broker URL; they are sent as HTTP
/// basic authentication and never shown: ``description`` and every error show the URL without them.
package struct ManagementAPI: Sendable, CustomStringConvertible {
    /// What the management API reports for one queue.
    package struct QueueStats: Sendable, Equatable {
        /// `messages_ready`.
        package var ready: Int?
        /// `messages_unacknowledged`.
        package var unacked: Int?
        /// `consumers`.
        package var consumers: Int?
        /// `message_stats.publish_details.rate`, per second; nil before any traffic or with statistics off.
        package var publishRate: Double?
        /// `message_stats.deliver_get_details.rate`, per second.
        package var deliverRate: Double?
        /// `message_stats.ack_details.rate`, per second.
        package var ackRate: Double?

        /// Reads the JSON object of `GET /api/queues/VHOST/NAME`; nil if it is not an object.
        package static func parse(_ body: [UInt8]) -> QueueStats? {
            guard let object = try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any] else { return nil }
            func int(_ key: String) -> Int? { (object[key] as? NSNumber)?.intValue }
            let messageStats = object["message_stats"] as? [String: Any]
            func rate(_ key: String) -> Double? {
                ((messageStats?[key] as? [String: Any])?["rate"] as? NSNumber)?.doubleValue
            }
            return QueueStats(
                ready: int("messages_ready"), unacked: int("messages_unacknowledged"),
                consumers: int("consumers"), publishRate: rate("publish_details"),
                deliverRate: rate("deliver_get_details"), ackRate: rate("ack_details"))
        }
    }

    /// Why the management API could not be read. The message never contains the password.
    package struct Failure: Error, Sendable, CustomStringConvertible {
        /// One line for the operator.
        package var description: String
        /// The URL itself is wrong: a mistake in the command (exit 78), not an API that could not
        /// be read.
        package var isConfiguration = false
    }

    /// The base URL without user info, e.g. `http://rabbitmq:15672` or `https://host/rabbitmq`.
    package let baseURL: String
    /// The user name sent with basic authentication.
    package let user: String
    private let password: String
    private let engine: FetchEngine

    /// The base URL and user, without the password.
    package var description: String { "\(baseURL) (user \(user))" }

    /// Parses `url` (`http[s]://[user[:password]@]host[:port][/prefix]`) and creates the client.
    ///
    /// - Parameters:
    ///   - url: the management API's base URL; a path is kept as a prefix (for a reverse proxy).
    ///   - fallback: where the user and password come from when the URL has none (`amqp.url`).
    ///   - fetch: the timeouts and limits of the requests.
    package init(url: String, fallback: AMQPURL, fetch: WorkerConfiguration.Fetch = .init()) throws(Failure) {
        guard var components = URLComponents(string: url.trimmingCharacters(in: .whitespaces)),
            let scheme = components.scheme?.lowercased(), scheme == "http" || scheme == "https",
            let host = components.host, !host.isEmpty
        else {
            throw Failure(
                description: "--management-url must be an http or https URL, like http://rabbitmq:15672",
                isConfiguration: true)
        }
        // A message naming the URL would show the rest of such a password.
        if let problem = URLPolicy.atAfterHostProblem(components) {
            throw Failure(description: "--management-url \(problem)", isConfiguration: true)
        }
        if let urlUser = components.percentEncodedUser, !urlUser.isEmpty {
            user = urlUser.removingPercentEncoding ?? urlUser
            password = components.percentEncodedPassword.map { $0.removingPercentEncoding ?? $0 } ?? ""
        } else {
            user = fallback.user
            password = fallback.password
        }
        components.user = nil
        components.password = nil
        components.query = nil
        components.fragment = nil
        var base = components.string ?? url
        while base.hasSuffix("/") { base.removeLast() }
        baseURL = base
        var limits = fetch
        limits.maxRedirects = 0
        do {
            engine = try FetchEngine(configuration: limits, addressPolicy: nil, maxConnections: 4)
        } catch {
            throw Failure(description: "cannot start libcurl: \(error.message)")
        }
    }

    /// The URL of one queue's statistics: `BASE/api/queues/VHOST/NAME`, both percent-encoded
    /// (the default vhost `/` is `%2F`).
    package func queueURL(vhost: String, name: String) -> String {
        "\(baseURL)/api/queues/\(Self.encoded(vhost))/\(Self.encoded(name))"
    }

    /// One queue's statistics; nil when the management API says it does not exist (404).
    package func queue(vhost: String, name: String) throws(Failure) -> QueueStats? {
        let url = queueURL(vhost: vhost, name: name)
        var request = FetchRequest(url: url)
        // The operator's own API: neither the address veto nor the image hosts' allow and deny
        // lists (`fetch.allowed_hosts`, `fetch.denied_hosts`) apply.
        request.checkAddresses = false
        let token = Data("\(user):\(password)".utf8).base64EncodedString()
        request.headers = ["Authorization: Basic \(token)", "Accept: application/json"]
        let response = perform(request)
        switch response.httpStatus {
        case 200?:
            if let failure = response.failure {
                throw Failure(description: "reading \(url) failed: \(failure.message)")
            }
            guard let stats = QueueStats.parse(response.body) else {
                throw Failure(description: "\(url) did not answer with a JSON object; is this the management API?")
            }
            return stats
        case 404?:
            return nil
        case 401?:
            throw Failure(description: "the management API at \(baseURL) refused the credentials of user \(user) (401)")
        case let status?:
            throw Failure(description: "the management API at \(baseURL) answered HTTP \(status) for \(url)")
        case nil:
            throw Failure(
                description:
                    "cannot reach the management API at \(baseURL): \(response.failure?.message ?? "no response")")
        }
    }

    /// Runs one request and waits for it. For the command line only: the calling thread blocks,
    /// while the engine's own queue does the work.
    private func perform(_ request: FetchRequest) -> FetchResponse {
        engine.fetchAndWait(request) ?? FetchResponse(failure: .connectFailed(.noResponse))
    }

    private static func encoded(_ text: String) -> String {
        var out = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."),
                UInt8(ascii: "~"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                out += String(format: "%%%02X", byte)
            }
        }
        return out
    }
}
