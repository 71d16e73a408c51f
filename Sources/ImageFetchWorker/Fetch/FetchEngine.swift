import CCurl
import CShims
import Dispatch
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Runs HTTP transfers on libcurl's multi interface, all driven by one event loop on one serial
/// fetch queue: no thread per fetch, no blocking easy-interface transfer.
///
/// Easy handles are pooled and reused, and the multi handle keeps a connection cache, so
/// repeated fetches from one origin reuse their keep-alive connections. Every new connection
/// (each redirect hop included) passes the address policy before it connects, and every hop's
/// host passes `fetch.allowed_hosts` and `fetch.denied_hosts` before it is requested (see
/// ``FetchRequest/checkAddresses``).
///
/// All methods may be called from any thread. Inspectors and the address policy run on the fetch
/// queue, one at a time; they must be quick and must not block. Completions run there too, unless
/// the engine was given a completion queue.
package final class FetchEngine: Sendable {
    private let loop: FetchLoop
    private let nextID = Atomic<UInt64>(1)
    private let maxBytes: Int
    private let addressPolicy: (@Sendable (UnsafePointer<sockaddr>) -> String?)?
    /// The host lists and redirect host checks of guarded transfers.
    private let hostGuard: HostGuard

    /// Creates an engine and starts its event loop.
    ///
    /// - Parameters:
    ///   - configuration: the limits applied to every transfer.
    ///   - addressPolicy: called from the open-socket callback with each resolved address before
    ///     connect; return nil to allow, or a short class name to veto
    ///     (→ ``FetchError/addressRefused(addressClass:)``).
    ///     nil allows every address.
    ///   - maxConnections: the concurrent transfers to plan for: the connection cache
    ///     (`CURLMOPT_MAXCONNECTS`) holds at least this many (and 64), plus idle connections for
    ///     the origins in use (``ConnectionCacheSizing``).
    ///   - completionQueue: where completions run. The loop gathers the transfers that finish in
    ///     one turn and hands the small ones over in a single block, so a burst of finished
    ///     transfers wakes one thread instead of one each. nil: each runs on the fetch queue.
    ///   - maxWaitingBodies: with a completion queue, how many complete bodies may wait for it
    ///     before transfers are paused ahead of their body, so that a burst of responses waits in
    ///     the kernel's socket buffers instead of in memory (see `BodyBacklog`). nil: no limit.
    ///   - runBatch: wraps each block of completions on `completionQueue` (the worker gathers
    ///     the wake-ups of a block there, see `CompletionBatch`); by default it just runs it.
    package init(
        configuration: WorkerConfiguration.Fetch,
        addressPolicy: (@Sendable (UnsafePointer<sockaddr>) -> String?)?,
        maxConnections: Int = 1024,
        completionQueue: DispatchQueue? = nil,
        maxWaitingBodies: Int? = nil,
        runBatch: @escaping @Sendable (_ block: () -> Void) -> Void = { $0() }
    ) throws(FetchError) {
        do {
            hostGuard = try HostGuard(
                policy: HostPolicy(allowed: configuration.allowedHosts, denied: configuration.deniedHosts))
            loop = try FetchLoop(
                configuration: configuration, addressPolicy: addressPolicy, maxConnections: maxConnections,
                completionQueue: completionQueue, maxWaitingBodies: maxWaitingBodies, runBatch: runBatch)
        } catch {
            throw .initFailed(reason: error.reason)
        }
        self.maxBytes = configuration.maxBytes
        self.addressPolicy = addressPolicy
        loop.start()
    }

    deinit {
        shutdown()
    }

    /// The worker's `maxWaitingBodies`: enough complete bodies to keep the work queue busy for
    /// tens of milliseconds while the loop resumes more, so the limit costs no throughput; beyond
    /// it, waiting bodies only cost memory. It only comes into play above concurrency 256.
    package static let defaultMaxWaitingBodies = 256

    /// With a completion queue, the completions of one turn of the event loop whose bodies are at
    /// most this many bytes run together in one block; a larger body gets a block of its own.
    package static let batchedCompletionBodyLimit = FetchLoop.sharedBlockBodyLimit

    /// Starts a transfer; `completion` runs exactly once: on the engine's completion queue when it
    /// has one (several small responses to a block), else on the fetch queue, where it must not
    /// block (hop to another queue for real work).
    ///
    /// After ``shutdown()`` the completion gets ``FetchError/aborted`` at once.
    @discardableResult
    package func fetch(_ request: FetchRequest, completion: @escaping @Sendable (FetchResponse) -> Void) -> FetchTicket
    {
        let id = nextID.wrappingAdd(1, ordering: .relaxed).oldValue
        let transfer = FetchTransfer(
            id: id, request: request, queue: loop.queue, maxBytes: maxBytes, addressPolicy: addressPolicy,
            hostGuard: hostGuard, completion: completion)
        loop.submit(transfer)
        return FetchTicket(id: id)
    }

    /// Aborts one transfer; its completion gets ``FetchError/aborted``. Does nothing if it has
    /// already completed.
    package func cancel(_ ticket: FetchTicket) {
        loop.send(.cancel(ticket.id))
    }

    /// Aborts all transfers (drain deadline); each completion gets ``FetchError/aborted``.
    package func cancelAll() {
        loop.send(.cancelAll)
    }

    /// Stops the engine after aborting everything; idempotent.
    ///
    /// Returns once every completion has run (with a completion queue: has been handed to it),
    /// except when called on the fetch queue (from a completion), where it cannot wait for
    /// itself; the loop then stops right after.
    package func shutdown() {
        loop.send(.shutdown)
        if !loop.isOnLoopThread {
            loop.exited.wait()
        }
    }

    /// The engine's TLS work so far: CA store loads, handshakes, resumed sessions. Any thread.
    package var tlsCounts: FetchTLSCounts {
        loop.tlsStats.counts
    }

    /// Transfers started and not yet completed.
    package var activeTransfers: Int {
        loop.active.load(ordering: .relaxed)
    }

    /// Complete bodies waiting for the completion queue, as the flow control counts them
    /// (`maxWaitingBodies`); 0 without it.
    package var waitingBodies: Int {
        loop.backlogCounts.waiting
    }

    /// Transfers paused ahead of their body by the flow control right now; 0 without it.
    package var pausedTransfers: Int {
        loop.backlogCounts.paused
    }
}
