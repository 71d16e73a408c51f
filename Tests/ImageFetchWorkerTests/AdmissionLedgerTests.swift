import Testing
@testable import ImageFetchWorker

@Suite struct AdmissionLedgerTests {
    func delivery(_ tag: UInt64, epoch: UInt64 = 1) -> Delivery {
        Delivery(tag: tag, epoch: epoch, redelivered: false, body: [])
    }

    @Test func claimSucceedsOnce() {
        var ledger = AdmissionLedger()
        ledger.received(delivery(1))
        do {
            let value = ledger.claim(delivery(1))
            #expect(value)
        }
        do {
            let value = ledger.claim(delivery(1))
            #expect(!value)
        }
    }

    @Test func takeAllHandsBackInTagOrderAndBlocksLaterClaims() {
        var ledger = AdmissionLedger()
        for tag in [3, 1, 2] as [UInt64] { ledger.received(delivery(tag)) }
        do {
            let value = ledger.claim(delivery(2))
            #expect(value)
        }
        do {
            let value = ledger.takeAll()
            #expect(value.map(\.tag) == [1, 3])
        }
        do {
            let value = ledger.claim(delivery(1))
            #expect(!value)
        }
        #expect(ledger.count == 0)
    }

    @Test func theSameTagOnAnotherEpochIsAnotherDelivery() {
        var ledger = AdmissionLedger()
        ledger.received(delivery(1, epoch: 1))
        ledger.received(delivery(1, epoch: 2))
        #expect(ledger.count == 2)
        do {
            let claimed = ledger.claim(delivery(1, epoch: 2))
            #expect(claimed)
        }
        #expect(ledger.takeAll().map(\.epoch) == [1])
    }
}
