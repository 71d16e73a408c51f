import Testing
@testable import ImageFetchWorker

@Suite struct ContentAssemblerTests {
    let deliver = ContentAssembler.Kind.delivery(tag: 7, redelivered: true, exchange: "", routingKey: "q")

    @Test func assemblesBodyFrames() {
        var assembler = ContentAssembler()
        assembler.begin(deliver)
        var properties = AMQPProperties()
        properties.messageID = "m1"
        #expect(assembler.header(bodySize: 5, properties: properties) == nil)
        let first: [UInt8] = [1, 2, 3]
        let second: [UInt8] = [4, 5]
        #expect(first.withUnsafeBytes { assembler.body($0) } == nil)
        let message = second.withUnsafeBytes { assembler.body($0) }
        #expect(message?.body == [1, 2, 3, 4, 5])
        #expect(message?.kind == deliver)
        #expect(message?.properties.messageID == "m1")
    }

    @Test func emptyBodyCompletesAtTheHeader() {
        var assembler = ContentAssembler()
        assembler.begin(deliver)
        #expect(assembler.header(bodySize: 0, properties: AMQPProperties())?.body == [])
    }

    @Test func framesWithoutAMethodAreIgnored() {
        var assembler = ContentAssembler()
        #expect(assembler.header(bodySize: 1, properties: AMQPProperties()) == nil)
        let bytes: [UInt8] = [1]
        #expect(bytes.withUnsafeBytes { assembler.body($0) } == nil)
    }

    @Test func aNewMethodDropsAHalfAssembledMessage() {
        var assembler = ContentAssembler()
        assembler.begin(deliver)
        _ = assembler.header(bodySize: 10, properties: AMQPProperties())
        assembler.begin(.returned(replyCode: 312, replyText: "NO_ROUTE", routingKey: "x"))
        _ = assembler.header(bodySize: 1, properties: AMQPProperties())
        let bytes: [UInt8] = [9]
        let message = bytes.withUnsafeBytes { assembler.body($0) }
        #expect(message?.kind == .returned(replyCode: 312, replyText: "NO_ROUTE", routingKey: "x"))
        #expect(message?.body == [9])
    }
}

extension ContentAssembler.Message: Equatable {
    public static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.kind == rhs.kind && lhs.body == rhs.body && lhs.properties == rhs.properties
    }
}
