import CCurl
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
/// (each redirect hop included) passes the address policy before it connects.
///
/// All methods may be called from any thread. Completions, inspectors and the address policy run
/// on the fetch queue, one at a time; they must be quick and must not block.
public final class FetchEngine: Sendable {
    private let loop: FetchLoop
    private let nextID = Atomic<UInt64>(1)
    private let maxBytes: Int
    private let addressPolicy: (@Sendable (UnsafePointer<sockaddr>) -> String?)?

    /// Creates an engine and starts its event loop.
    ///
    /// - Parameters:
    ///   - configuration: the limits applied to every transfer.
    ///   - addressPolicy: called from the open-socket callback with each resolved address before
    ///     connect; return nil to allow, or a short class name to veto
    ///     (→ `JobError(.forbiddenAddress, "refused to connect to a <class> address")`).
    ///     nil allows every address.
    ///   - maxConnections: the size of the connection cache (`CURLMOPT_MAXCONNECTS`); give at
    ///     least the number of concurrent transfers so that keep-alive connections survive.
    public init(
        configuration: WorkerConfiguration.Fetch,
        addressPolicy: (@Sendable (UnsafePointer<sockaddr>) -> String?)?,
        maxConnections: Int = 1024
    ) throws(JobError) {
        do {
            loop = try FetchLoop(
                configuration: configuration, addressPolicy: addressPolicy, maxConnections: maxConnections)
        } catch {
            throw JobError(.connectFailed, "libcurl could not be initialised: \(error.reason)")
        }
        self.maxBytes = configuration.maxBytes
        self.addressPolicy = addressPolicy
        loop.start()
    }

    deinit {
        shutdown()
    }

    /// Starts a transfer; `completion` runs exactly once, on the fetch queue (it must not block:
    /// hop to another queue for real work).
    ///
    /// After ``shutdown()`` the completion gets `.aborted` at once.
    @discardableResult
    public func fetch(_ request: FetchRequest, completion: @escaping @Sendable (FetchResponse) -> Void) -> FetchTicket {
        let id = nextID.wrappingAdd(1, ordering: .relaxed).oldValue
        let transfer = FetchTransfer(
            id: id, request: request, maxBytes: maxBytes, addressPolicy: addressPolicy, completion: completion)
        loop.submit(transfer)
        return FetchTicket(id: id)
    }

    /// Aborts one transfer; its completion gets error code `.aborted`. Does nothing if it has
    /// already completed.
    public func cancel(_ ticket: FetchTicket) {
        loop.send(.cancel(ticket.id))
    }

    /// Aborts all transfers (drain deadline); each completion gets `.aborted`.
    public func cancelAll() {
        loop.send(.cancelAll)
    }

    /// Stops the engine after aborting everything; idempotent.
    ///
    /// Returns once every completion has run, except when called on the fetch queue (from a
    /// completion), where it cannot wait for itself; the loop then stops right after.
    public func shutdown() {
        loop.send(.shutdown)
        if !loop.isOnLoopThread {
            loop.exited.wait()
        }
    }

    /// Transfers started and not yet completed.
    public var activeTransfers: Int {
        loop.active.load(ordering: .relaxed)
    }
}
