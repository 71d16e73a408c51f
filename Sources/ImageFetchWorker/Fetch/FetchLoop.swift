import CCurl
import CShims
import Dispatch
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The engine's single event loop: one long-running work item on the serial fetch queue that
/// drives a libcurl multi handle with `curl_multi_perform` and sleeps in `curl_multi_poll`.
///
/// Other threads talk to it only through a locked inbox of commands, and wake it with
/// `curl_multi_wakeup` when the inbox goes from empty to not empty, so a new transfer reaches the
/// wire at once and an idle loop sleeps in `poll(2)` without using CPU. The completion queue also
/// wakes it when the body flow control (``BodyBacklog``) lets paused transfers go on.
///
/// `@unchecked Sendable` because the inbox and the flow control's state are behind `Mutex`es, the
/// counters are atomics, the multi handle is only woken from other threads (thread-safe), and
/// everything else (the running and paused transfers, the handle pool, the multi handle's other
/// calls) is touched only by ``run()`` on the fetch queue.
final class FetchLoop: @unchecked Sendable {
    enum Command {
        case start(FetchTransfer)
        case cancel(UInt64)
        case cancelAll
        case shutdown
    }

    struct Inbox {
        var commands: [Command] = []
        /// A wake-up was sent and the loop has not drained the inbox since.
        var wakeupPending = false
        /// ``FetchEngine/shutdown()`` was called: no more commands are accepted.
        var stopping = false
    }

    /// The serial queue the loop runs on, and the completions too unless there is a completion queue.
    let queue: DispatchQueue
    /// Transfers accepted and not yet completed.
    let active = Atomic<Int>(0)
    /// Left when ``run()`` has returned.
    let exited = DispatchGroup()

    private let configuration: WorkerConfiguration.Fetch
    private let addressPolicy: (@Sendable (UnsafePointer<sockaddr>) -> String?)?
    /// Where completions run, in batches; nil: one by one on ``queue``.
    private let completionQueue: DispatchQueue?
    /// Wraps each block of completions on ``completionQueue``.
    private let runBatch: @Sendable (_ block: () -> Void) -> Void
    private let multi: CurlMultiHandle
    private let inbox = Mutex(Inbox())
    /// `pthread_self()` of the loop while it runs, 0 otherwise.
    private let loopThread = Atomic<UInt>(0)

    // Fetch-queue-only state.
    private var drained: [Command] = []
    private var running: [UInt64: FetchTransfer] = [:]
    private var pool: [CurlEasyHandle] = []
    private let poolLimit: Int
    /// Completions gathered during one turn of the loop, for ``completionQueue``.
    private var finished: [(FetchTransfer, FetchResponse)] = []
    /// Transfers paused by the flow control, oldest first from ``pausedHead``; entries whose
    /// transfer ended meanwhile are skipped.
    private var pausedTransfers: [FetchTransfer] = []
    private var pausedHead = 0

    /// Whether transfers are under body flow control: only with a completion queue (without one,
    /// completions run on the loop, so no complete body ever waits) and a limit.
    private let flowControl: Bool
    /// The body flow control's state, shared with the completion queue.
    private let backlog: Mutex<BodyBacklog>

    /// Turns each request into easy-handle options, with the engine's limits converted once.
    private let options: CurlTransferOptions
    /// `CURLOPT_BUFFERSIZE`: see ``receiveBufferSize(maxConnections:)``.
    let receiveBufferBytes: Int

    /// The longest `curl_multi_poll` sleep; libcurl shortens it to its own next timeout, and
    /// `curl_multi_wakeup` interrupts it, so this only bounds how long an idle loop sleeps.
    private static let idleWaitMs: Int32 = 60_000

    init(
        configuration: WorkerConfiguration.Fetch,
        addressPolicy: (@Sendable (UnsafePointer<sockaddr>) -> String?)?,
        maxConnections: Int,
        completionQueue: DispatchQueue? = nil,
        maxWaitingBodies: Int? = nil,
        runBatch: @escaping @Sendable (_ block: () -> Void) -> Void = { $0() }
    ) throws(CurlError) {
        self.configuration = configuration
        self.flowControl = completionQueue != nil && maxWaitingBodies != nil
        self.backlog = Mutex(BodyBacklog(limit: maxWaitingBodies ?? Int.max))
        self.addressPolicy = addressPolicy
        self.completionQueue = completionQueue
        self.runBatch = runBatch
        self.queue = DispatchQueue(label: "image-fetch-worker.fetch")
        self.multi = try CurlMultiHandle()
        self.poolLimit = max(maxConnections, 16)
        self.receiveBufferBytes = Self.receiveBufferSize(maxConnections: maxConnections)
        self.options = try CurlTransferOptions(configuration: configuration, vetoActive: addressPolicy != nil)
        // The connection cache; idle connections beyond it are closed, oldest first.
        try multi.set(CURLMOPT_MAXCONNECTS, max(maxConnections, 64))
        // Make sure waking works here, before anything depends on it.
        try multi.wakeup()
        drained.reserveCapacity(64)
        running.reserveCapacity(64)
    }

    /// Every easy handle keeps a receive buffer of its own (libcurl's default is 16 KiB), and the
    /// pool holds up to one handle per concurrent transfer. So the buffers share a budget of
    /// 4 MiB: 256 KiB each at 16 transfers (fewer reads and callbacks for large bodies), 16 KiB at
    /// 256, 4 KiB at 1,024, where 16 KiB each would be 16 MiB of the worker's memory.
    static func receiveBufferSize(maxConnections: Int) -> Int {
        let budget = 4 << 20
        return min(max(budget / max(maxConnections, 1), 4 << 10), 256 << 10)
    }

    /// Starts ``run()`` on the fetch queue.
    func start() {
        exited.enter()
        queue.async { self.run() }
    }

    /// Whether the caller is the loop (a completion, an inspector, the address policy).
    var isOnLoopThread: Bool {
        loopThread.load(ordering: .relaxed) == UInt(pthread_self())
    }

    // MARK: Any thread

    /// Hands a new transfer to the loop; after shutdown it completes at once with `.aborted`.
    func submit(_ transfer: FetchTransfer) {
        active.add(1, ordering: .relaxed)
        if !send(.start(transfer)) {
            queue.async {
                self.complete(transfer, FetchResponse(error: Self.abortedError))
                self.deliverFinished()
            }
        }
    }

    /// Queues a command and wakes the loop if needed; false if the loop no longer accepts any.
    @discardableResult
    func send(_ command: Command) -> Bool {
        let (accepted, wake) = inbox.withLock { inbox -> (Bool, Bool) in
            guard !inbox.stopping else { return (false, false) }
            if case .shutdown = command { inbox.stopping = true }
            inbox.commands.append(command)
            let wake = !inbox.wakeupPending
            inbox.wakeupPending = true
            return (true, wake)
        }
        if wake {
            // Cannot fail for a valid handle; if it did, the loop still sees the command when
            // libcurl's next timeout or socket event ends its wait.
            try? multi.wakeup()
        }
        return accepted
    }

    // MARK: Fetch queue

    static let abortedError = JobError(.aborted, "the transfer was aborted")

    /// The loop; returns after a shutdown command, with every transfer completed.
    private func run() {
        loopThread.store(UInt(pthread_self()), ordering: .relaxed)
        while true {
            if processInbox() { break }
            if pausedHead < pausedTransfers.count { resumePaused() }
            do {
                try multi.perform()
            } catch {
                // Only a misuse of the API fails here; the transfers carry their own results.
            }
            while let (handle, result) = multi.nextCompletion() {
                guard let pointer = CurlEasyHandleRef.transferPointer(handle) else { continue }
                finish(FetchTransfer.from(pointer), result: result)
            }
            deliverFinished()
            do {
                try multi.poll(timeoutMilliseconds: Self.idleWaitMs)
            } catch {
                usleep(1000)  // never spin on a failing poll
            }
        }
        abortAll()
        deliverFinished()
        pausedTransfers.removeAll()
        pausedHead = 0
        pool.removeAll()
        loopThread.store(0, ordering: .relaxed)
        exited.leave()
    }

    /// Runs the queued commands; true once shutdown was among them.
    private func processInbox() -> Bool {
        inbox.withLock { inbox in
            swap(&inbox.commands, &self.drained)
            inbox.wakeupPending = false
        }
        var stopping = false
        for command in drained {
            switch command {
            case .start(let transfer):
                if stopping {
                    complete(transfer, FetchResponse(error: Self.abortedError))
                } else {
                    begin(transfer)
                }
            case .cancel(let id):
                if let transfer = running[id] { finish(transfer, result: CURLE_OK, aborted: true) }
            case .cancelAll:
                abortAll()
            case .shutdown:
                stopping = true
                abortAll()
            }
        }
        drained.removeAll(keepingCapacity: true)
        return stopping
    }

    private func abortAll() {
        guard !running.isEmpty else { return }
        for transfer in Array(running.values) {
            finish(transfer, result: CURLE_OK, aborted: true)
        }
    }

    /// Configures a pooled (or new) easy handle for the transfer and adds it to the multi handle.
    private func begin(_ transfer: FetchTransfer) {
        if let hostGuard = transfer.hostGuard, let refusal = hostGuard.refusal(forURL: transfer.request.url) {
            complete(transfer, FetchResponse(error: refusal))
            return
        }
        let easy: CurlEasyHandle
        if let pooled = pool.popLast() {
            easy = pooled
        } else {
            do {
                // Pooled handles get their buffer size back in release(_:of:), after the reset.
                easy = try CurlEasyHandle()
                try easy.set(CURLOPT_BUFFERSIZE, receiveBufferBytes)
            } catch {
                complete(transfer, FetchResponse(error: Self.setupError(error)))
                return
            }
        }
        transfer.easy = easy
        if flowControl { transfer.loop = self }
        do {
            try options.apply(to: easy, for: transfer)
            try multi.add(easy)
        } catch {
            release(easy, of: transfer)
            complete(transfer, FetchResponse(error: Self.setupError(error)))
            return
        }
        running[transfer.id] = transfer
    }

    private static func setupError(_ error: CurlError) -> JobError {
        switch error {
        case .easy(CURLE_URL_MALFORMAT): return JobError(.invalidURL, "the URL is malformed")
        case .easy(CURLE_UNSUPPORTED_PROTOCOL):
            return JobError(.unsupportedScheme, "the URL used a scheme other than http or https")
        default: return JobError(.connectFailed, "the transfer could not be set up: \(error.reason)")
        }
    }

    /// Removes a transfer from the multi handle, gathers its outcome and completes it.
    private func finish(_ transfer: FetchTransfer, result: CURLcode, aborted: Bool = false) {
        guard let easy = transfer.easy else { return }
        running[transfer.id] = nil
        if transfer.pausedForBacklog {
            transfer.pausedForBacklog = false
            backlog.withLock { $0.pausedEnded() }
        }
        do {
            try multi.remove(easy)
        } catch {
            // Only fails for a handle that is not in this multi handle; nothing left to undo.
        }
        let status = easy.long(CURLINFO_RESPONSE_CODE) ?? 0
        var response = FetchResponse()
        if status > 0 {
            response.httpStatus = status
            response.contentType = transfer.contentType
            response.retryAfter = transfer.retryAfter
        }
        response.finalURL = easy.string(CURLINFO_EFFECTIVE_URL)
        response.redirects = easy.long(CURLINFO_REDIRECT_COUNT) ?? 0
        response.timings = FetchTimings(
            dnsMs: Self.ms(easy, CURLINFO_NAMELOOKUP_TIME_T),
            connectMs: Self.ms(easy, CURLINFO_CONNECT_TIME_T),
            tlsMs: Self.ms(easy, CURLINFO_APPCONNECT_TIME_T),
            ttfbMs: Self.ms(easy, CURLINFO_STARTTRANSFER_TIME_T),
            totalMs: Self.ms(easy, CURLINFO_TOTAL_TIME_T))
        if aborted {
            response.error = Self.abortedError
        } else {
            response.error = transfer.error(for: result, status: status, configuration: configuration)
        }
        if response.error == nil {
            // A body without a Content-Length is complete only now.
            transfer.bodyComplete()
            response.body = transfer.takeBody()
        }
        release(easy, of: transfer)
        complete(transfer, response)
    }

    @inline(__always)
    private static func ms(_ easy: CurlEasyHandle, _ info: CURLINFO) -> Double {
        Double(easy.offset(info) ?? 0) / 1000
    }

    /// Resets the easy handle (dropping its pointers into the transfer) and pools it.
    ///
    /// libcurl 7.88 frees a handle's receive buffer when a transfer is done, but not after one
    /// that failed before connecting (a bad URL, an unknown host), and then refuses a new
    /// `CURLOPT_BUFFERSIZE` (CURLE_BAD_FUNCTION_ARGUMENT) while `curl_easy_reset` has put the size
    /// back to its default: such a handle is closed instead of pooled.
    private func release(_ easy: CurlEasyHandle, of transfer: FetchTransfer) {
        easy.reset()
        transfer.easy = nil
        transfer.loop = nil
        transfer.headerList = nil
        guard pool.count < poolLimit else { return }
        do {
            try easy.set(CURLOPT_BUFFERSIZE, receiveBufferBytes)
            pool.append(easy)
        } catch {
            // Dropped: its deinit calls curl_easy_cleanup.
        }
    }

    private func complete(_ transfer: FetchTransfer, _ response: FetchResponse) {
        active.subtract(1, ordering: .relaxed)
        guard completionQueue != nil else { return transfer.completion(response) }
        finished.append((transfer, response))
    }

    // MARK: Body flow control (see BodyBacklog)

    /// A transfer's kept body is about to start (from its write callback): true to take it now,
    /// false when the transfer is paused until ``resumePaused()`` gives it back.
    ///
    /// Only HTTP/1 transfers pause: an HTTP/2 stream shares its connection with others, and
    /// libcurl 7.88 buffers a paused stream's data itself instead of leaving it to the kernel.
    func admitBody(of transfer: FetchTransfer) -> Bool {
        guard flowControl, !backlog.withLock({ $0.bodyStarting() }) else { return true }
        let version = transfer.easy?.long(CURLINFO_HTTP_VERSION) ?? 0
        guard version == CURL_HTTP_VERSION_1_0 || version == CURL_HTTP_VERSION_1_1 else {
            backlog.withLock { $0.pausedEnded() }
            return true
        }
        transfer.pausedForBacklog = true
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
    private func taken(_ transfer: FetchTransfer) {
        guard transfer.countsInBacklog else { return }
        if backlog.withLock({ $0.bodiesTaken(1) }) {
            try? multi.wakeup()
        }
    }

    /// Resumes paused transfers, oldest first, as far as the backlog allows. libcurl hands over
    /// the chunk it kept from inside `curl_easy_pause` and reads the rest on the next perform.
    private func resumePaused() {
        var allowed = backlog.withLock { $0.resumable() }
        var resumed = 0
        var failed: [(FetchTransfer, CURLcode)] = []
        while pausedHead < pausedTransfers.count {
            let transfer = pausedTransfers[pausedHead]
            // Ended meanwhile (timeout, cancel): dropped, so that it is not kept alive here.
            guard transfer.pausedForBacklog, let easy = transfer.easy else {
                pausedHead += 1
                continue
            }
            guard allowed > 0 else { break }
            pausedHead += 1
            transfer.pausedForBacklog = false
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

    /// The largest body that shares a block on the completion queue with others; a larger one gets
    /// a block of its own, so that hashing big bodies still spreads over the queue's threads.
    static let sharedBlockBodyLimit = 256 << 10

    /// Hands the completions of this turn of the loop to ``completionQueue``: small responses
    /// together in one block (one wake-up of a thread instead of one each), large ones alone.
    private func deliverFinished() {
        guard let completionQueue, !finished.isEmpty else { return }
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

/// Reads `CURLINFO_PRIVATE` from a bare easy handle pointer, as `curl_multi_info_read` returns it.
enum CurlEasyHandleRef {
    static func transferPointer(_ handle: UnsafeMutableRawPointer) -> UnsafeMutableRawPointer? {
        var value: UnsafeMutableRawPointer? = nil
        return ifw_easy_getinfo_pointer(handle, CURLINFO_PRIVATE, &value) == CURLE_OK ? value : nil
    }
}
