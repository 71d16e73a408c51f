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

    @Test func aNewMethodDropsAHalfAssembledMessageAndSaysWhich() {
        var assembler = ContentAssembler()
        #expect(assembler.begin(deliver) == nil)
        _ = assembler.header(bodySize: 10, properties: AMQPProperties())
        // Interrupted: the session takes that as a protocol violation (the delivery is unsettled).
        #expect(assembler.begin(.returned(replyCode: 312, replyText: "NO_ROUTE", routingKey: "x")) == deliver)
        _ = assembler.header(bodySize: 1, properties: AMQPProperties())
        let bytes: [UInt8] = [9]
        let message = bytes.withUnsafeBytes { assembler.body($0) }
        #expect(message?.kind == .returned(replyCode: 312, replyText: "NO_ROUTE", routingKey: "x"))
        // Only a return's headers are read: its body is counted through, not kept.
        #expect(message?.body == [])
        #expect(message?.bodyKept == false)
    }
}

extension ContentAssemblerTests {
    /// The header's body size comes from the broker: a huge claim (even above Int.max) reserves
    /// nothing and traps nowhere.
    @Test func aHugeDeclaredSizeReservesNothing() {
        var assembler = ContentAssembler(maxBodyBytes: 1 << 20)
        assembler.begin(deliver)
        #expect(assembler.header(bodySize: .max, properties: AMQPProperties()) == nil)
        let chunk = [UInt8](repeating: 7, count: 4096)
        #expect(chunk.withUnsafeBytes { assembler.body($0) } == nil)
        // The next delivery starts clean.
        assembler.begin(deliver)
        let message = assembler.header(bodySize: 0, properties: AMQPProperties())
        #expect(message?.bodyKept == true)
        #expect(message?.bodySize == 0)
    }

    @Test func aBodyOverTheLimitIsCountedThroughButNotKept() {
        var assembler = ContentAssembler(maxBodyBytes: 8)
        assembler.begin(deliver)
        #expect(assembler.header(bodySize: 20, properties: AMQPProperties()) == nil)
        let half = [UInt8](repeating: 1, count: 10)
        #expect(half.withUnsafeBytes { assembler.body($0) } == nil)
        let message = half.withUnsafeBytes { assembler.body($0) }
        #expect(message?.bodyKept == false)
        #expect(message?.body == [])
        #expect(message?.bodySize == 20)
        #expect(message?.kind == deliver)
    }

    @Test func aBodyAtTheLimitIsKept() {
        var assembler = ContentAssembler(maxBodyBytes: 8)
        assembler.begin(deliver)
        _ = assembler.header(bodySize: 8, properties: AMQPProperties())
        let bytes: [UInt8] = Array(1...8)
        let message = bytes.withUnsafeBytes { assembler.body($0) }
        #expect(message?.bodyKept == true)
        #expect(message?.body == bytes)
    }

    @Test func moreBytesThanDeclaredAreNotKept() {
        var assembler = ContentAssembler(maxBodyBytes: 8)
        assembler.begin(deliver)
        _ = assembler.header(bodySize: 3, properties: AMQPProperties())
        let bytes: [UInt8] = [1, 2, 3, 4, 5]
        let message = bytes.withUnsafeBytes { assembler.body($0) }
        #expect(message?.body == [1, 2, 3])
    }
}

extension ContentAssembler.Message: Equatable {
    public static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.kind == rhs.kind && lhs.body == rhs.body && lhs.properties == rhs.properties
            && lhs.bodySize == rhs.bodySize && lhs.bodyKept == rhs.bodyKept
    }
}
