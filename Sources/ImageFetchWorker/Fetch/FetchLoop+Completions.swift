import Dispatch

/// How the loop hands finished transfers to the completion queue.
extension FetchLoop {
    /// The largest body that shares a block on the completion queue with others; a larger one gets
    /// a block of its own, so that hashing big bodies still spreads over the queue's threads.
    static let sharedBlockBodyLimit = 256 << 10

    /// Hands the completions of this turn of the loop to ``completionQueue``: small responses
    /// together in one block (one wake-up of a thread instead of one each), large ones alone.
    func deliverFinished() {
        guard let completionQueue, !finished.isEmpty else { return }
        assertOnFetchQueue()
        let runBatch = self.runBatch
        var shared: [(FetchTransfer, FetchResponse)] = []
        for (transfer, response) in finished {
            if response.body.count > Self.sharedBlockBodyLimit {
                completionQueue.async {
                    runBatch {
                        self.taken(transfer)
                        transfer.completion(response)
                    }
                }
            } else {
                shared.append((transfer, response))
            }
        }
        finished.removeAll(keepingCapacity: true)
        guard !shared.isEmpty else { return }
        let block = CompletionBlock(shared)
        completionQueue.async {
            runBatch {
                for index in block.items.indices {
                    let (transfer, response) = block.take(index)
                    self.taken(transfer)
                    transfer.completion(response)
                }
            }
        }
    }
}

/// The completions of one turn of the loop that run together in one block. Each response leaves
/// the block as its completion starts, so a body is freed when its own job is done, not when the
/// whole block is (a block can hold hundreds).
///
/// `@unchecked Sendable` because it is filled on the loop before the block is queued, and then
/// touched only by that block.
private final class CompletionBlock: @unchecked Sendable {
    private(set) var items: [(FetchTransfer, FetchResponse)]

    init(_ items: [(FetchTransfer, FetchResponse)]) {
        self.items = items
    }

    /// The completion at `index`, which the block no longer holds afterwards.
    func take(_ index: Int) -> (FetchTransfer, FetchResponse) {
        let item = items[index]
        items[index].1 = FetchResponse()
        return item
    }
}
