import CCurl
import CShims
import Synchronization

/// The loop's side of the body flow control (see ``BodyBacklog``): pausing transfers ahead of
/// their body, counting complete bodies until their completion runs, and resuming.
extension FetchLoop {
    /// A transfer's kept body is about to start (from its write callback): true to take it now,
    /// false when the transfer is paused until ``resumePaused()`` gives it back.
    ///
    /// Only HTTP/1 transfers pause: an HTTP/2 stream shares its connection with others, and
    /// libcurl 7.88 buffers a paused stream's data itself instead of leaving it to the kernel.
    func admitBody(of transfer: FetchTransfer) -> Bool {
        assertOnFetchQueue()
        guard flowControl, !backlog.withLock({ $0.bodyStarting() }) else { return true }
        let version = transfer.easy?.long(CURLINFO_HTTP_VERSION) ?? 0
        guard version == CURL_HTTP_VERSION_1_0 || version == CURL_HTTP_VERSION_1_1 else {
            backlog.withLock { $0.pausedEnded() }
            return true
        }
        pausedTransfers.append(transfer)
        return false
    }

    /// The flow control's counts (any thread).
    var backlogCounts: (waiting: Int, paused: Int) {
        backlog.withLock { ($0.waiting, $0.paused) }
    }

    /// A transfer's body is complete and now waits for its completion.
    func bodyCompleted() {
        backlog.withLock { $0.bodyCompleted() }
    }

    /// A completion is about to run (completion queue): its body no longer waits. Wakes the loop
    /// when paused transfers can be resumed.
    func taken(_ transfer: FetchTransfer) {
        guard transfer.phase.countsInBacklog else { return }
        if backlog.withLock({ $0.bodiesTaken(1) }) {
            try? multi.wakeup()
        }
    }

    /// Resumes paused transfers, oldest first, as far as the backlog allows. libcurl hands over
    /// the chunk it kept from inside `curl_easy_pause` and reads the rest when its socket is next ready.
    func resumePaused() {
        assertOnFetchQueue()
        var allowed = backlog.withLock { $0.resumable() }
        var resumed = 0
        var failed: [(FetchTransfer, CURLcode)] = []
        while pausedHead < pausedTransfers.count {
            let transfer = pausedTransfers[pausedHead]
            // Ended meanwhile (timeout, cancel): dropped, so that it is not kept alive here.
            guard transfer.phase.isPaused, let easy = transfer.easy else {
                pausedHead += 1
                continue
            }
            guard allowed > 0 else { break }
            pausedHead += 1
            resumed += 1
            allowed -= 1
            transfer.admitBody()
            let code = curl_easy_pause(easy.raw, Int32(CURLPAUSE_CONT))
            if code != CURLE_OK { failed.append((transfer, code)) }
        }
        backlog.withLock { $0.resumed(resumed) }
        // The kept chunk can fail the body (too large, refused by the inspector): libcurl then
        // leaves the transfer as it was, so it ends here.
        for (transfer, code) in failed { finish(transfer, result: code) }
        if pausedHead == pausedTransfers.count {
            pausedTransfers.removeAll(keepingCapacity: true)
            pausedHead = 0
        } else if pausedHead >= 1024, pausedHead * 2 >= pausedTransfers.count {
            pausedTransfers.removeFirst(pausedHead)
            pausedHead = 0
        }
    }
}
