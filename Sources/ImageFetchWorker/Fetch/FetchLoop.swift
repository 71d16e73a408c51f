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
/// drives a libcurl multi handle through its multi_socket interface (``CurlMultiHandle``): it
/// sleeps in `epoll_wait` and runs only the transfers whose socket is ready or whose timer is due.
///
/// Other threads talk to it only through a locked inbox of commands, and wake it with
/// ``CurlMultiHandle/wakeup()`` when the inbox goes from empty to not empty, so a new transfer
/// reaches the wire at once and an idle loop sleeps without using CPU. The completion queue also
/// wakes it when the body flow control (``BodyBacklog``) lets paused transfers go on.
///
/// `@unchecked Sendable` because the inbox and the flow control's state are behind `Mutex`es, the
/// counters are atomics, the multi handle is only woken from other threads (thread-safe), and
/// everything else (the running and paused transfers, the handle pool, the multi handle's other
/// calls) is touched only by ``run()`` on the fetch queue, which debug builds check where the
/// loop's work starts (``assertOnFetchQueue()``).
///
/// The body flow control is in `FetchLoop+FlowControl.swift`, the hand-over of completions in
/// `FetchLoop+Completions.swift`, the easy-handle options in ``CurlTransferOptions``.
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
    /// Where completions run, in batches; nil: one by one on ``queue``.
    let completionQueue: DispatchQueue?
    /// Wraps each block of completions on ``completionQueue``.
    let runBatch: @Sendable (_ block: () -> Void) -> Void
    let multi: CurlMultiHandle
    private let inbox = Mutex(Inbox())
    /// `pthread_self()` of the loop while it runs, 0 otherwise.
    private let loopThread = Atomic<UInt>(0)

    // Fetch-queue-only state (internal only for the extensions in the other files).
    private var drained: [Command] = []
    private var running: [UInt64: FetchTransfer] = [:]
    private var pool: CurlEasyHandlePool
    /// Completions gathered during one turn of the loop, for ``completionQueue``.
    var finished: [(FetchTransfer, FetchResponse)] = []
    /// Transfers paused by the flow control, oldest first from ``pausedHead``; entries whose
    /// transfer ended meanwhile are skipped.
    var pausedTransfers: [FetchTransfer] = []
    var pausedHead = 0

    /// Whether transfers are under body flow control: only with a completion queue (without one,
    /// completions run on the loop, so no complete body ever waits) and a limit.
    let flowControl: Bool
    /// The body flow control's state, shared with the completion queue.
    let backlog: Mutex<BodyBacklog>

    /// Turns each request into easy-handle options, with the engine's limits converted once.
    private let options: CurlTransferOptions
    /// The engine's TLS counters (the multi handle keeps them alive, see ``CurlTLSStats``).
    let tlsStats: CurlTLSStats
    /// `CURLMOPT_MAXCONNECTS` from the origins in use (fetch queue only).
    private var connectionCache: ConnectionCacheSizing

    /// The longest sleep; libcurl's next timeout shortens it and a wake-up interrupts it, so this
    /// only bounds how long an idle loop sleeps.
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
        self.completionQueue = completionQueue
        self.runBatch = runBatch
        self.queue = DispatchQueue(label: "image-fetch-worker.fetch")
        let share = try CurlShareHandle()
        let tlsStats = try CurlTLSStats()
        // The multi handle outlives every easy handle; what its cached connections point at
        // (the TLS counters) and the share go after it.
        self.multi = try CurlMultiHandle(keepingAlive: [share, tlsStats])
        self.tlsStats = tlsStats
        self.pool = CurlEasyHandlePool(maxConnections: maxConnections)
        self.options = try CurlTransferOptions(
            configuration: configuration, vetoActive: addressPolicy != nil, share: share, tlsStats: tlsStats)
        // The connection cache; idle connections beyond it are closed, oldest first.
        self.connectionCache = ConnectionCacheSizing(concurrency: maxConnections)
        try multi.set(CURLMOPT_MAXCONNECTS, connectionCache.size)
        // Make sure waking works here, before anything depends on it.
        try multi.wakeup()
        drained.reserveCapacity(64)
        running.reserveCapacity(64)
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

    /// Traps in debug builds when not on the fetch queue; compiled out of release builds.
    @inline(__always)
    func assertOnFetchQueue() {
        assert(
            {
                dispatchPrecondition(condition: .onQueue(queue))
                return true
            }())
    }

    // MARK: Any thread

    /// Hands a new transfer to the loop; after shutdown it completes at once with `.aborted`.
    func submit(_ transfer: FetchTransfer) {
        active.add(1, ordering: .relaxed)
        if !send(.start(transfer)) {
            queue.async {
                self.complete(transfer, FetchResponse(failure: .aborted))
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

    /// The loop; returns after a shutdown command, with every transfer completed.
    private func run() {
        assertOnFetchQueue()
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
        assertOnFetchQueue()
        inbox.withLock { inbox in
            swap(&inbox.commands, &self.drained)
            inbox.wakeupPending = false
        }
        var stopping = false
        for command in drained {
            switch command {
            case .start(let transfer):
                if stopping {
                    complete(transfer, FetchResponse(failure: .aborted))
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
        assertOnFetchQueue()
        if let hostGuard = transfer.hostGuard, let refusal = hostGuard.refusal(forURL: transfer.request.url) {
            complete(transfer, FetchResponse(failure: refusal))
            return
        }
        let easy: CurlEasyHandle
        do {
            easy = try pool.take()
        } catch {
            complete(transfer, FetchResponse(failure: FetchError(setup: error)))
            return
        }
        transfer.easy = easy
        if flowControl { transfer.loop = self }
        let now = Double(DispatchTime.now().uptimeNanoseconds) / 1e9
        let origin = ConnectionCacheSizing.originKey(of: transfer.request.url)
        if let size = connectionCache.started(origin: origin, now: now) {
            try? multi.set(CURLMOPT_MAXCONNECTS, size)  // only a bad value fails; the old size stays
        }
        do {
            try options.apply(to: easy, for: transfer)
            try multi.add(easy)
        } catch {
            release(easy, of: transfer)
            complete(transfer, FetchResponse(failure: FetchError(setup: error)))
            return
        }
        running[transfer.id] = transfer
    }

    /// Removes a transfer from the multi handle, gathers its outcome and completes it.
    func finish(_ transfer: FetchTransfer, result: CURLcode, aborted: Bool = false) {
        assertOnFetchQueue()
        guard let easy = transfer.easy else { return }
        running[transfer.id] = nil
        if transfer.ended() {
            backlog.withLock { $0.pausedEnded() }
        }
        do {
            try multi.remove(easy)
        } catch {
            // Only fails for a handle that is not in this multi handle; nothing left to undo.
        }
        let status = easy.long(CURLINFO_RESPONSE_CODE) ?? 0
        var response = FetchResponse()
        // libcurl keeps an interim answer's code (`100 Continue`) when the connection drops
        // after it: that is no response. A 1xx that ended the transfer well (a `101` no one
        // asked for, read to the close) was the answer.
        if status >= 200 || (status >= 100 && result == CURLE_OK) {
            response.httpStatus = status
            response.contentType = transfer.contentType
            response.retryAfter = transfer.retryAfter
            response.etag = transfer.etag
            response.lastModified = transfer.lastModified
        }
        response.finalURL = easy.string(CURLINFO_EFFECTIVE_URL)
        response.redirects = easy.long(CURLINFO_REDIRECT_COUNT) ?? 0
        response.connectionsOpened = easy.long(CURLINFO_NUM_CONNECTS) ?? 0
        response.httpVersion = FetchResponse.HTTPVersion(curl: easy.long(CURLINFO_HTTP_VERSION) ?? 0)
        response.timings = FetchTimings(
            dnsMs: Self.ms(easy, CURLINFO_NAMELOOKUP_TIME_T),
            connectMs: Self.ms(easy, CURLINFO_CONNECT_TIME_T),
            tlsMs: Self.ms(easy, CURLINFO_APPCONNECT_TIME_T),
            ttfbMs: Self.ms(easy, CURLINFO_STARTTRANSFER_TIME_T),
            totalMs: Self.ms(easy, CURLINFO_TOTAL_TIME_T))
        response.heldByWorker = transfer.heldByWorker
        response.endedByClose =
            transfer.bodyEndsAtClose && (response.httpVersion == .http10 || response.httpVersion == .http11)
        if aborted {
            response.failure = .aborted
        } else {
            response.failure = transfer.failure(
                for: result, status: status, maxRedirects: transfer.request.maxRedirects ?? configuration.maxRedirects)
        }
        if response.failure == nil {
            // A body without a Content-Length is complete only now.
            transfer.bodyComplete()
            response.body = transfer.takeBody()
            pool.delivered(bodyBytes: response.body.count)
        }
        release(easy, of: transfer)
        complete(transfer, response)
    }

    @inline(__always)
    private static func ms(_ easy: CurlEasyHandle, _ info: CURLINFO) -> Double {
        Double(easy.offset(info) ?? 0) / 1000
    }

    /// Resets the easy handle (dropping its pointers into the transfer) and pools it.
    private func release(_ easy: CurlEasyHandle, of transfer: FetchTransfer) {
        easy.reset()
        transfer.easy = nil
        transfer.loop = nil
        transfer.headerList = nil
        pool.put(easy)
    }

    private func complete(_ transfer: FetchTransfer, _ response: FetchResponse) {
        assertOnFetchQueue()
        active.subtract(1, ordering: .relaxed)
        guard completionQueue != nil else { return transfer.completion(response) }
        finished.append((transfer, response))
    }
}
