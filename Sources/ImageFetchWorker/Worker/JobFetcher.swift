/// What the job runner (``JobRunner``) and the robots.txt gate need of a fetch engine: a seam, so
/// that the pipeline runs in process against scripted responses in the tests, while
/// ``FetchEngine`` is the one the worker runs. The runner is generic over it (specialised, direct
/// calls); the robots.txt gate, which fetches once per origin, holds it as an existential.
package protocol JobFetcher: AnyObject, Sendable {
    /// Starts a transfer; `completion` runs exactly once, with ``FetchError/aborted`` when it was
    /// cancelled or the fetcher was shut down.
    @discardableResult
    func fetch(_ request: FetchRequest, completion: @escaping @Sendable (FetchResponse) -> Void) -> FetchTicket
    /// Aborts every transfer (the drain's deadline); each completion gets ``FetchError/aborted``.
    func cancelAll()
    /// Aborts everything and stops; idempotent.
    func shutdown()
    /// The TLS work so far, for `/metrics`.
    var tlsCounts: FetchTLSCounts { get }
}

extension FetchEngine: JobFetcher {}
