import Dispatch
import Foundation
import Synchronization

/// Keeps the S3 sink's credentials current: fixed keys as they are; temporary ones fetched at
/// start-up and refreshed before they expire, on a queue of its own.
///
/// The refresh is due when a quarter of the credentials' lifetime is left (at most 5 minutes
/// before expiry); a failed refresh is tried again after 1, 2, 4 … up to 30 seconds. Uploads keep
/// the old credentials until a minute before they expire; after that, and until a refresh
/// succeeds, ``current()``
/// is a retryable `storage_failed`, so the jobs go through the retry queues instead of failing.
///
/// Temporary credentials are fetched with a ``FetchEngine`` of the provider's own, without the
/// address veto: the endpoints are the platform's (often link-local), not a job's.
package final class CredentialProvider: Sendable {
    private struct State {
        var credentials: AWSCredentials?
        /// When ``credentials`` were had: their lifetime sets the margin before expiry.
        var since = Date()
        var lastError: String?
        var failures = 0
    }

    private let source: AWSCredentialSource
    private let engine: FetchEngine?
    private let state: Mutex<State>
    private let queue = DispatchQueue(label: "image-fetch-worker.s3-credentials")
    private let stopped = Atomic<Bool>(false)

    /// The longest wait for the credentials endpoint or STS.
    static let requestTimeout: Double = 10

    /// Creates the provider and, for a temporary source, fetches the first credentials.
    ///
    /// - Throws: ``ConfigurationError`` (key `s3.credentials`, exit 78) when they cannot be had.
    package init(source: AWSCredentialSource, userAgent: String) throws(ConfigurationError) {
        self.source = source
        if case .fixed(let credentials) = source {
            self.engine = nil
            self.state = Mutex(State(credentials: credentials))
            return
        }
        var limits = WorkerConfiguration.Fetch()
        limits.timeout = Self.requestTimeout
        limits.connectTimeout = 5
        limits.maxBytes = 1 << 20
        limits.maxRedirects = 0
        limits.userAgent = userAgent
        do {
            self.engine = try FetchEngine(configuration: limits, addressPolicy: nil, maxConnections: 2)
        } catch {
            throw ConfigurationError(
                key: "s3.credentials", problem: "cannot start the credentials client: \(error.message)")
        }
        self.state = Mutex(State())
        switch fetchNow() {
        case .success(let credentials):
            state.withLock { $0.credentials = credentials }
            schedule(after: Self.refreshDelay(for: credentials, now: Date()))
        case .failure(let problem):
            engine?.shutdown()
            throw ConfigurationError(key: "s3.credentials", problem: problem.text)
        }
    }

    deinit {
        stopped.store(true, ordering: .relaxed)
        engine?.shutdown()
    }

    /// The credentials to sign with now, or a retryable `storage_failed` while they are expired.
    package func current(now: Date = Date()) -> Result<AWSCredentials, StorageError> {
        let (credentials, since, lastError) = state.withLock { ($0.credentials, $0.since, $0.lastError) }
        guard let credentials else {
            return .failure(StorageError("no S3 credentials yet", retryable: true))
        }
        if let expiration = credentials.expiration, now >= Self.lastUse(expiration: expiration, since: since) {
            return .failure(
                StorageError(
                    "the S3 credentials expired (or expire within a minute) and could not be refreshed yet"
                        + (lastError.map { ": \($0)" } ?? ""),
                    retryable: true))
        }
        return .success(credentials)
    }

    /// The last moment to sign with credentials that expire at `expiration`: a request signed
    /// just before would reach S3 after (a `HEAD` first, clocks apart) and get `400 ExpiredToken`,
    /// a final failure. A minute before, or a tenth of a shorter lifetime.
    static func lastUse(expiration: Date, since: Date) -> Date {
        let lifetime = max(0, expiration.timeIntervalSince(since))
        return expiration.addingTimeInterval(-min(60, lifetime / 10))
    }

    // MARK: Refresh

    /// When to refresh credentials that expire: with a quarter of their lifetime left, at most
    /// 5 minutes before expiry, and not sooner than in 1 second.
    static func refreshDelay(for credentials: AWSCredentials, now: Date) -> Double? {
        guard let expiration = credentials.expiration else { return nil }
        let lifetime = expiration.timeIntervalSince(now)
        return max(1, lifetime - min(300, lifetime / 4))
    }

    /// The wait before retry `failures` (1, 2, 4 … 30 seconds).
    static func retryDelay(failures: Int) -> Double {
        min(30, pow(2, Double(max(failures - 1, 0))))
    }

    private func schedule(after seconds: Double?) {
        guard let seconds, !stopped.load(ordering: .relaxed) else { return }
        queue.asyncAfter(deadline: .now() + seconds) { [weak self] in
            self?.refresh()
        }
    }

    private func refresh() {
        guard !stopped.load(ordering: .relaxed) else { return }
        switch fetchNow() {
        case .success(let credentials):
            state.withLock {
                $0.credentials = credentials
                $0.since = Date()
                $0.lastError = nil
                $0.failures = 0
            }
            schedule(after: Self.refreshDelay(for: credentials, now: Date()))
        case .failure(let problem):
            let failures = state.withLock { state -> Int in
                state.lastError = problem.text
                state.failures += 1
                return state.failures
            }
            schedule(after: Self.retryDelay(failures: failures))
        }
    }

    /// One request to the source, waited for on the calling thread (never the fetch queue).
    private func fetchNow() -> Result<AWSCredentials, ConfigProblem> {
        guard let engine else {
            if case .fixed(let credentials) = source { return .success(credentials) }
            return .failure(ConfigProblem("no credentials client"))
        }
        let request: FetchRequest
        switch CredentialRequests.request(for: source) {
        case .success(let built): request = built
        case .failure(let problem): return .failure(problem)
        }
        guard let response = engine.fetchAndWait(request, timeout: .now() + Self.requestTimeout + 5) else {
            return .failure(ConfigProblem("the credentials request did not finish"))
        }
        return CredentialRequests.parse(response, for: source)
    }
}
