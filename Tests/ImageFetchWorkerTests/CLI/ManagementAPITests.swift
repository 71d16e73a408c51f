import Foundation
import Testing

@testable import ImageFetchWorker

/// The `depth --management-url` client, without a broker: URL handling, credentials and parsing.
struct ManagementAPITests {
    let amqp = AMQPURL(host: "rabbit", user: "worker", password: "amqp-secret", vhost: "/")

    @Test func credentialsComeFromTheURLAndAreNeverShown() throws {
        let api = try ManagementAPI(url: "http://ops:p%40ss%3Aword@rabbit:15672/", fallback: amqp)
        #expect(api.user == "ops")
        #expect(api.baseURL == "http://rabbit:15672")
        #expect(!api.description.contains("p@ss"))
        #expect(!api.description.contains("p%40ss"))
        #expect(
            api.queueURL(vhost: "/", name: "image-fetch.jobs") == "http://rabbit:15672/api/queues/%2F/image-fetch.jobs")
    }

    @Test func credentialsFallBackToTheBrokerURL() throws {
        let api = try ManagementAPI(url: "https://rabbit.internal/rabbitmq", fallback: amqp)
        #expect(api.user == "worker")
        #expect(!api.description.contains("amqp-secret"))
        #expect(
            api.queueURL(vhost: "orders/eu", name: "a b")
                == "https://rabbit.internal/rabbitmq/api/queues/orders%2Feu/a%20b")
    }

    @Test(arguments: ["rabbit:15672", "amqp://rabbit:15672", "ftp://x/", "http://"])
    func onlyHTTPURLsAreAccepted(_ url: String) {
        #expect(throws: ManagementAPI.Failure.self) { try ManagementAPI(url: url, fallback: amqp) }
    }

    /// A `/`, `?` or `#` left unencoded in the password moves the rest of it into the path, query
    /// or fragment (`http://guest:12/x@rabbit:15672` is host `guest`, port 12), and the
    /// unreachable-host message then showed that piece of the password. Such a URL is refused,
    /// as the command's mistake, without the URL in the message.
    @Test(arguments: [
        "http://guest:12/pw@rabbit:15672", "http://guest:pw?x@rabbit:15672", "http://guest:pw#x@rabbit:15672",
    ])
    func anUnencodedDelimiterInThePasswordIsRefused(_ url: String) {
        do {
            _ = try ManagementAPI(url: url, fallback: amqp)
            Issue.record("accepted \(url)")
        } catch {
            #expect(error.isConfiguration)
            #expect(!error.description.contains("pw"), "\(error)")
        }
    }

    @Test func queueStatsAreReadFromTheManagementJSON() throws {
        let body = Array(
            """
            {"name":"image-fetch.jobs","messages":40,"messages_ready":30,"messages_unacknowledged":10,"consumers":3,
             "message_stats":{"publish":100,"publish_details":{"rate":12.5},"deliver_get_details":{"rate":11.25},
             "ack_details":{"rate":11}}}
            """.utf8)
        let stats = try #require(ManagementAPI.QueueStats.parse(body))
        #expect(
            stats
                == ManagementAPI.QueueStats(
                    ready: 30, unacked: 10, consumers: 3, publishRate: 12.5,
                    deliverRate: 11.25, ackRate: 11))
        let idle = try #require(
            ManagementAPI.QueueStats.parse(
                Array(#"{"messages_ready":0,"messages_unacknowledged":0,"consumers":0}"#.utf8)))
        #expect(idle.publishRate == nil)
        #expect(ManagementAPI.QueueStats.parse(Array("[]".utf8)) == nil)
    }
}

/// The `depth` command's output and `--max-ready` decision.
struct QueueDepthTests {
    let rows = [
        QueueDepth.Row(
            queue: "jobs", ready: 12, consumers: 3, unacked: 96, publishRate: 40, deliverRate: 38.5, ackRate: 38.5),
        QueueDepth.Row(queue: "jobs.retry.5s", ready: 0, consumers: 0),
        QueueDepth.Row(queue: "dead\"q", ready: nil, consumers: nil),
    ]

    @Test func jsonIsValidWithNullsForMissingValues() throws {
        let plain = try #require(
            try JSONSerialization.jsonObject(with: Data(QueueDepth.json(rows, management: false).utf8))
                as? [[String: Any]])
        #expect(plain.count == 3)
        #expect(plain[0]["ready"] as? Int == 12)
        #expect(plain[0]["unacked"] == nil, "management fields only with --management-url")
        #expect(plain[2]["queue"] as? String == "dead\"q")
        #expect(plain[2]["ready"] is NSNull)
        let full = try #require(
            try JSONSerialization.jsonObject(with: Data(QueueDepth.json(rows, management: true).utf8))
                as? [[String: Any]])
        #expect(full[0]["unacked"] as? Int == 96)
        #expect(full[0]["deliver_rate"] as? Double == 38.5)
        #expect(full[1]["publish_rate"] is NSNull)
    }

    @Test func tableHasAColumnPerField() {
        let table = QueueDepth.table(rows, management: true).split(separator: "\n").map(String.init)
        #expect(table.count == 4)
        #expect(
            table[0].split(separator: " ", omittingEmptySubsequences: true)
                == ["QUEUE", "READY", "CONSUMERS", "UNACKED", "PUBLISH/S", "DELIVER/S", "ACK/S"])
        #expect(
            table[1].split(separator: " ", omittingEmptySubsequences: true) == [
                "jobs", "12", "3", "96", "40.0", "38.5", "38.5",
            ])
        #expect(table[3].hasSuffix("-"))
    }

    @Test func maxReadyComparesEveryQueue() {
        #expect(QueueDepth.exceeds(rows, maxReady: 11))
        #expect(!QueueDepth.exceeds(rows, maxReady: 12))
    }
}
