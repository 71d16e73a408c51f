/// The deliveries that were received but not yet admitted, so that a drain (or a lost channel)
/// can hand them back while they still wait in front of the semaphore.
///
/// Pure state; ``Worker`` guards it with a lock because the channel queue and the admission queue
/// both touch it.
struct AdmissionLedger {
    struct Key: Hashable {
        var epoch: UInt64
        var tag: UInt64
    }

    private var waiting: [Key: Delivery] = [:]

    var count: Int { waiting.count }

    /// A delivery arrived and queues for admission.
    mutating func received(_ delivery: Delivery) {
        waiting[Key(epoch: delivery.epoch, tag: delivery.tag)] = delivery
    }

    /// The admission queue got a permit for this delivery. False when it was handed back
    /// meanwhile: the permit must be returned and the delivery skipped.
    mutating func claim(_ delivery: Delivery) -> Bool {
        waiting.removeValue(forKey: Key(epoch: delivery.epoch, tag: delivery.tag)) != nil
    }

    /// Takes every waiting delivery (drain: they are nacked with requeue), oldest tag first.
    mutating func takeAll() -> [Delivery] {
        let all = waiting.values.sorted { ($0.epoch, $0.tag) < ($1.epoch, $1.tag) }
        waiting.removeAll()
        return all
    }
}
