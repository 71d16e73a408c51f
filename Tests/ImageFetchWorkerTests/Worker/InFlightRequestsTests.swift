import Testing

@testable import ImageFetchWorker

/// The table of identical requests (issue 35, item 3): who leads, who follows, and that a
/// leader's end hands its followers on exactly once.
@Suite struct InFlightRequestsTests {
    typealias Key = InFlightRequests<String>.Key
    static let plain = Key(url: "http://a.example/x.png", headers: [])

    @Test func theFirstJobLeadsAndIdenticalOnesFollowInOrder() {
        var table = InFlightRequests<String>()
        #expect(table.join(Self.plain, "first") == .leader)
        #expect(table.join(Self.plain, "second") == .follower)
        #expect(table.join(Self.plain, "third") == .follower)
        #expect(table.count == 1)
        #expect(table.followerCount == 2)
        #expect(table.finish(Self.plain) == ["second", "third"])
        #expect(table.count == 0)
        #expect(table.followerCount == 0)
    }

    /// The window's count of followers is the table's: it moves with joins and finishes of any key.
    @Test func theFollowerCountIsTheFollowersHeld() {
        var table = InFlightRequests<String>()
        let other = Key(url: "http://a.example/y.png", headers: [])
        _ = table.join(Self.plain, "a")
        _ = table.join(other, "b")
        _ = table.join(Self.plain, "a2")
        _ = table.join(other, "b2")
        _ = table.join(other, "b3")
        #expect(table.followerCount == 3)
        _ = table.finish(other)
        #expect(table.followerCount == 1)
        _ = table.finish(other)  // twice: nothing more to take
        #expect(table.followerCount == 1)
        _ = table.finish(Self.plain)
        #expect(table.followerCount == 0)
    }

    @Test func aJobAfterTheLeaderEndedLeadsAFetchOfItsOwn() {
        var table = InFlightRequests<String>()
        #expect(table.join(Self.plain, "first") == .leader)
        #expect(table.finish(Self.plain).isEmpty)
        #expect(table.join(Self.plain, "late") == .leader)
        #expect(table.finish(Self.plain).isEmpty)
        // A second finish (a bug in the caller) finds nothing to hand on twice.
        #expect(table.finish(Self.plain).isEmpty)
    }

    @Test func onlyIdenticalRequestsShare() {
        var table = InFlightRequests<String>()
        let field = HTTPHeaderField(name: "Referer", value: "https://a.example/")
        let keys = [
            Self.plain,
            Key(url: "http://a.example/x.png?v=2", headers: []),
            Key(url: "http://a.example/x.png", headers: [field]),
            // The same header under another spelling is another request: compared exactly.
            Key(url: "http://a.example/x.png", headers: [HTTPHeaderField(name: "referer", value: field.value)]),
            Key(url: "http://a.example/x.png", headers: [HTTPHeaderField(name: "If-None-Match", value: "\"v1\"")]),
            Key(url: "http://a.example/x.png", headers: [HTTPHeaderField(name: "If-None-Match", value: "\"v2\"")]),
            // Another tenant's job for the same request fetches apart.
            Key(url: "http://a.example/x.png", headers: [], tenant: "acme"),
            Key(url: "http://a.example/x.png", headers: [], tenant: "globex"),
        ]
        for (index, key) in keys.enumerated() {
            #expect(table.join(key, "job \(index)") == .leader, "\(key)")
        }
        #expect(table.count == keys.count)
        #expect(table.join(keys[2], "same headers") == .follower)
        #expect(table.finish(keys[2]) == ["same headers"])
        #expect(table.finish(keys[3]).isEmpty)
    }
}
