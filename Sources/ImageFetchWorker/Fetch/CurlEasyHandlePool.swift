import CCurl

/// The fetch loop's idle easy handles: a reused handle keeps its caches (see
/// ``CurlEasyHandle/reset()``) and its receive buffer, and costs no `curl_easy_init`.
///
/// Fetch queue only, like the loop that owns it.
struct CurlEasyHandlePool {
    /// `CURLOPT_BUFFERSIZE` of every handle: see ``receiveBufferSize(maxConnections:)``.
    let receiveBufferBytes: Int
    /// Idle handles beyond this are closed.
    private let limit: Int
    private var idle: [CurlEasyHandle] = []

    init(maxConnections: Int) {
        self.limit = max(maxConnections, 16)
        self.receiveBufferBytes = Self.receiveBufferSize(maxConnections: maxConnections)
    }

    /// Every easy handle keeps a receive buffer of its own (libcurl's default is 16 KiB), and the
    /// pool holds up to one handle per concurrent transfer. So the buffers share a budget of
    /// 4 MiB: 256 KiB each at 16 transfers (fewer reads and callbacks for large bodies), 16 KiB at
    /// 256, 4 KiB at 1,024, where 16 KiB each would be 16 MiB of the worker's memory.
    static func receiveBufferSize(maxConnections: Int) -> Int {
        let budget = 4 << 20
        return min(max(budget / max(maxConnections, 1), 4 << 10), 256 << 10)
    }

    /// An idle handle, or a new one.
    mutating func take() throws(CurlError) -> CurlEasyHandle {
        if let pooled = idle.popLast() { return pooled }
        // Pooled handles get their buffer size back in put(_:), after the reset.
        let easy = try CurlEasyHandle()
        try easy.set(CURLOPT_BUFFERSIZE, receiveBufferBytes)
        return easy
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
            try easy.set(CURLOPT_BUFFERSIZE, receiveBufferBytes)
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
