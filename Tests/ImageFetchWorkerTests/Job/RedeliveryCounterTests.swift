import Testing

@testable import ImageFetchWorker

@Suite struct RedeliveryCounterTests {
    @Test func firstDeliveriesAreNotCounted() {
        var counter = RedeliveryCounter(limit: 2)
        for _ in 0..<10 {
            let over = counter.record(identity: "a", redelivered: false)
            #expect(!over)
        }
        #expect(counter.count == 0)
    }

    @Test func redeliveriesPastTheLimitAreReported() {
        var counter = RedeliveryCounter(limit: 2)
        var answers: [Bool] = []
        for _ in 0..<4 { answers.append(counter.record(identity: "a", redelivered: true)) }
        #expect(answers == [false, false, true, true])
    }

    @Test func forgettingResets() {
        var counter = RedeliveryCounter(limit: 1)
        _ = counter.record(identity: "a", redelivered: true)
        counter.forget(identity: "a")
        let over = counter.record(identity: "a", redelivered: true)
        #expect(!over)
    }

    @Test func boundedByCapacity() {
        var counter = RedeliveryCounter(limit: 1, capacity: 100)
        for index in 0..<10_000 { _ = counter.record(identity: "id-\(index)", redelivered: true) }
        #expect(counter.count <= 100)
        // The newest is still remembered.
        let over = counter.record(identity: "id-9999", redelivered: true)
        #expect(over)
    }

    /// Jobs that come back once and then finish never reach the capacity, so eviction never runs;
    /// the insertion order must still shrink with them, or a long-lived worker grows without bound.
    @Test func forgottenIdentitiesLeaveTheOrderToo() {
        var counter = RedeliveryCounter(limit: 3, capacity: 100)
        for index in 0..<10_000 {
            _ = counter.record(identity: "id-\(index)", redelivered: true)
            counter.forget(identity: "id-\(index)")
        }
        #expect(counter.count == 0)
        #expect(counter.retainedOrderEntries <= 2 * 100)
    }

    /// A job forgotten and then seen again is one identity, not two: the stale entry must not
    /// evict the live one before its turn.
    @Test func aForgottenThenRecordedIdentityKeepsItsNewPlace() {
        var counter = RedeliveryCounter(limit: 1, capacity: 2)
        _ = counter.record(identity: "a", redelivered: true)
        counter.forget(identity: "a")
        _ = counter.record(identity: "b", redelivered: true)
        _ = counter.record(identity: "a", redelivered: true)  // now the newest
        _ = counter.record(identity: "c", redelivered: true)  // evicts the oldest live one: b
        let over = counter.record(identity: "a", redelivered: true)
        #expect(over, "a was evicted in b's place")
        #expect(counter.count <= 2)
    }
}
