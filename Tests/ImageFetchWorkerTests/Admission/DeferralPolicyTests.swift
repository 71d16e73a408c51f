import Testing

@testable import ImageFetchWorker

@Suite struct DeferralPolicyTests {
    let policy = DeferralPolicy(delays: [1, 2, 5, 10, 30, 60], budgetSeconds: 100)

    @Test func backsOffAlongTheDelays() {
        #expect(policy.decide(count: 0, spentSeconds: 0, atLeastSeconds: nil) == .wait(seconds: 1))
        #expect(policy.decide(count: 2, spentSeconds: 3, atLeastSeconds: nil) == .wait(seconds: 5))
        #expect(policy.decide(count: 9, spentSeconds: 0, atLeastSeconds: nil) == .wait(seconds: 60))
    }

    @Test func waitsAtLeastThePause() {
        #expect(policy.decide(count: 0, spentSeconds: 0, atLeastSeconds: 3) == .wait(seconds: 5))
        #expect(policy.decide(count: 0, spentSeconds: 0, atLeastSeconds: 500) == .wait(seconds: 60))
    }

    @Test func stopsAtTheBudget() {
        #expect(policy.decide(count: 5, spentSeconds: 40, atLeastSeconds: nil) == .wait(seconds: 60))
        #expect(policy.decide(count: 6, spentSeconds: 41, atLeastSeconds: nil) == .exhausted)
    }

    @Test func delaysAreSortedAndUnique() {
        #expect(DeferralPolicy(delays: [5, 1, 5, 0, -3], budgetSeconds: 10).delays == [1, 5])
        #expect(DeferralPolicy(delays: [], budgetSeconds: 10).delays == [1])
    }
}
