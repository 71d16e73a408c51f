import Testing
@testable import ImageFetchWorker

@Suite struct AdmissionLedgerTests {
    func delivery(_ tag: UInt64, epoch: UInt64 = 1) -> Delivery {
        Delivery(tag: tag, epoch: epoch, redelivered: false, body: [])
    }

    @Test func claimSucceedsOnce() {
        var ledger = AdmissionLedger()
        ledger.received(delivery(1))
        #expect(ledger.claim(delivery(1)))
        #expect(!ledger.claim(delivery(1)))
    }

    @Test func takeAllHandsBackInTagOrderAndBlocksLaterClaims() {
        var ledger = AdmissionLedger()
        for tag in [3, 1, 2] as [UInt64] { ledger.received(delivery(tag)) }
        #expect(ledger.claim(delivery(2)))
        #expect(ledger.takeAll().map(\.tag) == [1, 3])
        #expect(!ledger.claim(delivery(1)))
        #expect(ledger.count == 0)
    }

    @Test func staleEpochsAreDropped() {
        var ledger = AdmissionLedger()
        ledger.received(delivery(1, epoch: 1))
        ledger.received(delivery(1, epoch: 2))
        #expect(ledger.dropEpochs(before: 2) == 1)
        #expect(!ledger.claim(delivery(1, epoch: 1)))
        #expect(ledger.claim(delivery(1, epoch: 2)))
    }
}
