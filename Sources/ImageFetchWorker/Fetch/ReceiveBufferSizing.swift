/// How large a receive buffer (`CURLOPT_BUFFERSIZE`) libcurl gets for the next transfer: large
/// enough that the bodies this worker has been seeing arrive in one read, and never above the
/// pool's share of the budget. Pure: the pool feeds it body sizes and reads ``bytes``.
///
/// libcurl 7.88 allocates the buffer whole when a transfer connects and frees it when the transfer
/// ends, so the next one lands elsewhere in the heap. A buffer much larger than the response (128
/// KiB for a 12 KB image at concurrency 32) then moves the few pages that a read writes across the
/// whole span the buffers cycle through, and over a run all of it becomes resident: 2–3 MB more
/// peak RSS at png32 in some runs than in others. Sized to the bodies, the pages a read writes are
/// most of the buffer, wherever it lands.
///
/// Large bodies still get large buffers, so they take few reads: one large body raises the size at
/// once, and it falls back by a thirty-second per smaller body.
struct ReceiveBufferSizing: Sendable {
    /// The smallest size asked for (libcurl's own default), unless the budget's share is smaller.
    static let minimum = 16 << 10
    /// Room for the status line and headers that arrive in the same read as the body.
    static let headroom = 2 << 10

    /// The pool's share of the budget: no buffer is larger.
    let ceiling: Int
    /// The largest recent body, decaying towards smaller ones.
    private var recentBody = 0

    /// Every easy handle keeps a receive buffer during its transfer, and the pool holds up to one
    /// handle per concurrent transfer. So the buffers share a budget of 4 MiB: up to 256 KiB each
    /// at 16 transfers (fewer reads and callbacks for large bodies), 16 KiB at 256, 4 KiB at
    /// 1,024, where 16 KiB each would be 16 MiB of the worker's memory.
    init(maxConnections: Int) {
        let budget = 4 << 20
        self.ceiling = min(max(budget / max(maxConnections, 1), 4 << 10), 256 << 10)
    }

    /// The size for the next transfer: the recent bodies and their headers, rounded up to a power
    /// of two (so that freed buffers fit the next ones), between ``minimum`` and ``ceiling``.
    var bytes: Int {
        let wanted = recentBody + Self.headroom
        let rounded = wanted <= Self.minimum ? Self.minimum : 1 << (Int.bitWidth - (wanted - 1).leadingZeroBitCount)
        return min(rounded, ceiling)
    }

    /// A transfer delivered a body of `bodyBytes`.
    mutating func observe(bodyBytes: Int) {
        recentBody = max(bodyBytes, recentBody - recentBody / 32)
    }
}
