import Testing

@testable import ImageFetchWorker

@Suite("ConnectionCacheSizing")
struct ConnectionCacheSizingTests {
    @Test func startsAtTheFloorAndGrowsWithNewOrigins() {
        var sizing = ConnectionCacheSizing(concurrency: 64)
        #expect(sizing.size == 64)
        #expect(sizing.started(origin: 1, now: 0) == 66)
        #expect(sizing.started(origin: 1, now: 1) == nil, "a known origin changes nothing")
        for origin in 2...100 { _ = sizing.started(origin: origin, now: 2) }
        #expect(sizing.size == 64 + 2 * 100)
    }

    @Test func boundedAboveAndBelow() {
        var small = ConnectionCacheSizing(concurrency: 4)
        #expect(small.size == 64)
        _ = small.started(origin: 1, now: 0)
        #expect(small.size == 64)
        var sizing = ConnectionCacheSizing(concurrency: 16)
        for origin in 0..<5000 { _ = sizing.started(origin: origin, now: 0) }
        #expect(sizing.size == 16 + ConnectionCacheSizing.maxExtra)
    }

    @Test func quietOriginsAgeOut() {
        var sizing = ConnectionCacheSizing(concurrency: 64)
        for origin in 0..<50 { _ = sizing.started(origin: origin, now: 0) }
        #expect(sizing.size == 164)
        _ = sizing.started(origin: 1000, now: ConnectionCacheSizing.window / 2)
        #expect(sizing.size == 166)
        // Past the window only the origin seen since is left.
        #expect(sizing.started(origin: 1000, now: ConnectionCacheSizing.window + 1) == 66)
    }

    @Test func originKeyIgnoresPathAndCase() {
        let key = ConnectionCacheSizing.originKey(of: "https://Images.Example:443/a.png")
        #expect(key == ConnectionCacheSizing.originKey(of: "https://images.example:443/b/c.jpg?x=1"))
        #expect(key != ConnectionCacheSizing.originKey(of: "https://images.example:8443/a.png"))
        #expect(key != ConnectionCacheSizing.originKey(of: "http://images.example:443/a.png"))
    }
}
