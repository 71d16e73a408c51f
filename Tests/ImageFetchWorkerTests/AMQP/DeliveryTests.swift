import Testing

@testable import ImageFetchWorker

@Suite struct DeliveryTests {
    /// What a result's confirm callback keeps of its delivery: enough to ack or nack it on the
    /// right channel and to time it, and none of the job's bytes or headers.
    @Test func withoutContentKeepsWhatSettlingNeeds() {
        var properties = AMQPProperties()
        properties.messageID = "m-1"
        properties.replyTo = "answers"
        properties.headers = ["x-attempt": .int(2)]
        let delivery = Delivery(
            tag: 42, epoch: 3, redelivered: true, exchange: "jobs-x", routingKey: "jobs",
            properties: properties, body: Array(#"{"id":"a","url":"http://a.example/x.png"}"#.utf8),
            receivedAt: 123_456)
        let receipt = delivery.withoutContent
        #expect(receipt.tag == 42)
        #expect(receipt.epoch == 3)
        #expect(receipt.redelivered)
        #expect(receipt.receivedAt == 123_456)
        #expect(receipt.body.isEmpty)
        #expect(receipt.properties == AMQPProperties())
        #expect(receipt.exchange.isEmpty && receipt.routingKey.isEmpty)
    }
}
