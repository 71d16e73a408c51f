import Dispatch
import Synchronization

extension FetchEngine {
    /// Runs one request and waits for its response on the calling thread, which must not be the
    /// engine's own queue: for the clients that run outside the job pipeline (the S3 credentials,
    /// the command line's management API). Nil when `timeout` passed first.
    func fetchAndWait(_ request: FetchRequest, timeout: DispatchTime = .distantFuture) -> FetchResponse? {
        let done = DispatchSemaphore(value: 0)
        let box = Mutex<FetchResponse?>(nil)
        fetch(request) { response in
            box.withLock { $0 = response }
            done.signal()
        }
        guard done.wait(timeout: timeout) == .success else { return nil }
        return box.withLock { $0 }
    }
}
