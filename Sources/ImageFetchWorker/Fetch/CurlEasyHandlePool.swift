import CCurl
import CShims

/// The fetch loop's idle easy handles: a reused handle keeps its caches (see
/// ``CurlEasyHandle/reset()``), and costs no `curl_easy_init`.
///
/// Fetch queue only, like the loop that owns it.
struct CurlEasyHandlePool {
    /// The `CURLOPT_BUFFERSIZE` each handle gets for its next transfer.
    private var receiveBuffer: ReceiveBufferSizing
    /// Idle handles beyond this are closed.
    private let limit: Int
    private var idle: [CurlEasyHandle] = []

    init(maxConnections: Int) {
        self.limit = max(maxConnections, 16)
        self.receiveBuffer = ReceiveBufferSizing(maxConnections: maxConnections)
    }

    /// An idle handle, or a new one.
    mutating func take() throws(CurlError) -> CurlEasyHandle {
        if let pooled = idle.popLast() { return pooled }
        // Pooled handles get their buffer size back in put(_:), after the reset.
        let easy = try CurlEasyHandle()
        try easy.set(CURLOPT_BUFFERSIZE, receiveBuffer.bytes)
        return easy
    }

    /// A transfer delivered a body of `bodyBytes`: the handles put back from now on are sized
    /// for it.
    mutating func delivered(bodyBytes: Int) {
        receiveBuffer.observe(bodyBytes: bodyBytes)
    }

    /// Takes back a handle the caller has reset (dropping its pointers into the transfer).
    ///
    /// libcurl 7.88 frees a handle's receive buffer when a transfer is done, but not after one
    /// that failed before connecting (a bad URL, an unknown host), and then refuses a new
    /// `CURLOPT_BUFFERSIZE` (CURLE_BAD_FUNCTION_ARGUMENT) while `curl_easy_reset` has put the size
    /// back to its default: such a handle is closed instead of pooled.
    mutating func put(_ easy: CurlEasyHandle) {
        guard idle.count < limit else { return }
        do {
            try easy.set(CURLOPT_BUFFERSIZE, receiveBuffer.bytes)
            idle.append(easy)
        } catch {
            // Dropped: its deinit calls curl_easy_cleanup.
        }
    }

    /// Closes every idle handle.
    mutating func removeAll() {
        idle.removeAll()
    }
}
