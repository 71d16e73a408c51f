import Testing

@testable import ImageFetchWorker

@Suite struct ReceiveBufferSizingTests {
    @Test(arguments: [
        (1, 256 << 10), (16, 256 << 10), (32, 128 << 10), (256, 16 << 10), (1_024, 4 << 10), (100_000, 4 << 10),
    ])
    func theCeilingIsTheConcurrencysShareOfFourMebibytes(maxConnections: Int, ceiling: Int) {
        #expect(ReceiveBufferSizing(maxConnections: maxConnections).ceiling == ceiling)
    }

    @Test func beforeAnyBodyTheBufferIsLibcurlsDefault() {
        #expect(ReceiveBufferSizing(maxConnections: 32).bytes == 16 << 10)
    }

    @Test func aTwelveKilobyteImageAndItsHeadersFitSixteenKibibytes() {
        var sizing = ReceiveBufferSizing(maxConnections: 32)
        for _ in 0..<100 { sizing.observe(bodyBytes: 12_415) }
        #expect(sizing.bytes == 16 << 10)
    }

    @Test func largerBodiesGetThePowerOfTwoAboveThemUpToTheCeiling() {
        var sizing = ReceiveBufferSizing(maxConnections: 32)
        sizing.observe(bodyBytes: 15_000)  // 15,000 + headroom is just above 16 KiB
        #expect(sizing.bytes == 32 << 10)
        sizing.observe(bodyBytes: 40_000)
        #expect(sizing.bytes == 64 << 10)
        sizing.observe(bodyBytes: 3_000_000)
        #expect(sizing.bytes == 128 << 10)  // the ceiling at concurrency 32
    }

    @Test func theCeilingWinsOverTheMinimumAtHighConcurrency() {
        var sizing = ReceiveBufferSizing(maxConnections: 1_024)
        #expect(sizing.bytes == 4 << 10)
        sizing.observe(bodyBytes: 12_415)
        #expect(sizing.bytes == 4 << 10)
    }

    @Test func oneLargeBodyRaisesTheSizeAtOnceAndSmallOnesBringItBackSlowly() {
        var sizing = ReceiveBufferSizing(maxConnections: 16)
        for _ in 0..<10 { sizing.observe(bodyBytes: 12_415) }
        sizing.observe(bodyBytes: 3_000_000)
        #expect(sizing.bytes == 256 << 10)
        // A few small bodies among large ones do not shrink it.
        for _ in 0..<10 { sizing.observe(bodyBytes: 12_415) }
        #expect(sizing.bytes == 256 << 10)
        var transfers = 10
        while sizing.bytes > 16 << 10 && transfers < 1_000 {
            sizing.observe(bodyBytes: 12_415)
            transfers += 1
        }
        #expect(sizing.bytes == 16 << 10)
        // About a hundred and fifty small bodies after the large one, not one and not thousands.
        #expect((100...250).contains(transfers))
    }

    @Test func anEmptyBodyKeepsTheMinimum() {
        var sizing = ReceiveBufferSizing(maxConnections: 8)
        sizing.observe(bodyBytes: 0)
        #expect(sizing.bytes == 16 << 10)
    }
}
