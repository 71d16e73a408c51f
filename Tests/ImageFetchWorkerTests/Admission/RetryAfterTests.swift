import Testing

@testable import ImageFetchWorker

@Suite struct RetryAfterTests {
    // 2026-11-24T12:00:00Z
    static let now = 1_795_521_600.0

    @Test func seconds() {
        #expect(RetryAfter.seconds("3", now: Self.now, cap: 300) == 3)
        #expect(RetryAfter.seconds(" 120 ", now: Self.now, cap: 300) == 120)
        #expect(RetryAfter.seconds("0", now: Self.now, cap: 300) == 0)
    }

    @Test func anEnormousValueIsCapped() {
        #expect(RetryAfter.seconds("99999999999999999999999999", now: Self.now, cap: 300) == 300)
        #expect(RetryAfter.seconds("86400", now: Self.now, cap: 300) == 300)
    }

    @Test func httpDates() {
        #expect(RetryAfter.seconds("Tue, 24 Nov 2026 12:00:30 GMT", now: Self.now, cap: 300) == 30)
        #expect(RetryAfter.seconds("Tuesday, 24-Nov-26 12:01:00 GMT", now: Self.now, cap: 300) == 60)
        #expect(RetryAfter.seconds("Tue Nov 24 12:00:05 2026", now: Self.now, cap: 300) == 5)
        // A date in the past means now.
        #expect(RetryAfter.seconds("Tue, 24 Nov 2026 11:00:00 GMT", now: Self.now, cap: 300) == 0)
    }

    @Test(arguments: [
        nil, "", "-1", "soon", "1.5", "3 seconds", "Tue, 32 Nov 2026 12:00:30 GMT", "Tue, 24 Nov 2026 25:00:30 GMT",
    ])
    func missingNegativeOrGarbageFallsBack(value: String?) {
        #expect(RetryAfter.seconds(value, now: Self.now, cap: 300) == nil)
    }
}
