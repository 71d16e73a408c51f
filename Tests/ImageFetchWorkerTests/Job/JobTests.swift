import Testing

@testable import ImageFetchWorker

@Suite struct JobTests {
    func delivery(_ body: String, properties: AMQPProperties = AMQPProperties(), redelivered: Bool = false) -> Delivery
    {
        Delivery(tag: 1, epoch: 1, redelivered: redelivered, properties: properties, body: Array(body.utf8))
    }

    @Test func decodesAFullJob() throws {
        var properties = AMQPProperties()
        properties.replyTo = "replies"
        properties.correlationID = "c-1"
        properties.headers = ["x-attempt": .int(3), "x-first-seen": .string("2026-01-01T00:00:00.000Z")]
        let job = try Job.decode(
            delivery(
                #"{"id":"j1","url":"https://example.com/a.png","key":"a/b.png"}"#,
                properties: properties, redelivered: true)
        ).get()
        #expect(
            job
                == Job(
                    id: "j1", url: "https://example.com/a.png", key: "a/b.png", replyTo: "replies",
                    correlationID: "c-1", attempt: 3, firstSeen: "2026-01-01T00:00:00.000Z", redelivered: true))
    }

    @Test func idFallsBackToMessageID() throws {
        var properties = AMQPProperties()
        properties.messageID = "from-property"
        let job = try Job.decode(delivery(#"{"url":"http://x/"}"#, properties: properties)).get()
        #expect(job.id == "from-property")
        #expect(job.attempt == 1)
    }

    @Test func numericIDIsAccepted() throws {
        #expect(try Job.decode(delivery(#"{"id":42,"url":"http://x/"}"#)).get().id == "42")
    }

    @Test(arguments: [
        ("not json", "not a JSON object"),
        ("[1,2]", "not a JSON object"),
        (#"{"id":"a"}"#, "no url"),
        (#"{"url":"http://x/"}"#, "no id"),
        (#"{"id":"a","url":7}"#, "schema"),
        // An object whose id is neither a string nor an integer: the schema, not "no object".
        (#"{"id":true,"url":"http://x/"}"#, "schema"),
        (#"{"id":1.5,"url":"http://x/"}"#, "schema"),
        (#"{"id":{},"url":"http://x/"}"#, "schema"),
        ("", "not a JSON object"),
        // A key given twice: JSONDecoder keeps one value without a word, and a producer's parser
        // may have read the other.
        (#"{"id":"a","url":"https://a.example/1.png","url":"https://b.example/2.png"}"#, "gives \"url\" twice"),
        (#"{"id":"a","url":"http://x/","\u0075rl":"http://y/"}"#, "gives \"url\" twice"),
        (#"{"id":"a","id":"b","url":"http://x/"}"#, "gives \"id\" twice"),
        // A key that is no token is not echoed.
        (#"{"id":"a","url":"http://x/","a\nb":1,"a\nb":2}"#, "gives a key twice"),
    ])
    func rejectsBadBodies(body: String, reason: String) {
        switch Job.decode(delivery(body)) {
        case .success: Issue.record("decoded \(body)")
        case .failure(let error):
            #expect(error.code == .invalidJob)
            #expect(error.message.contains(reason), "\(error.message)")
            #expect(!error.retryable)
        }
    }

    @Test func aHeaderGivenTwiceIsRefused() {
        let body = #"{"id":"a","url":"http://x/","headers":{"Accept":"image/png","Accept":"text/html"}}"#
        switch Job.decode(delivery(body), allowedHeaders: ["accept"]) {
        case .success(let job): Issue.record("decoded with headers \(job.headers)")
        case .failure(let error):
            #expect(error.code == .invalidJob)
            #expect(error.message.contains("gives \"Accept\" twice"), "\(error.message)")
        }
        // Once, it stands.
        let once = #"{"id":"a","url":"http://x/","headers":{"Accept":"image/png"}}"#
        #expect((try? Job.decode(delivery(once), allowedHeaders: ["accept"]).get())?.headers.count == 1)
    }
}
