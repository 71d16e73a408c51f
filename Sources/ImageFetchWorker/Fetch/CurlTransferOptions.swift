import CCurl
import CShims

#if canImport(Glibc)
import Glibc
#endif

/// Turns a ``FetchRequest`` into the options of an easy handle: the engine's limits (converted
/// once, here), the method and body, the headers, and the callbacks that lead back to the
/// ``FetchTransfer``. Owned by ``FetchLoop`` and used on the fetch queue only.
struct CurlTransferOptions {
    private let configuration: WorkerConfiguration.Fetch
    private let connectTimeoutMs: Int
    private let timeoutMs: Int
    /// `fetch.resolve` as `CURLOPT_RESOLVE`; shared by every easy handle, so it lives as long as
    /// the loop.
    private let resolveList: CurlStringList?
    /// The engine has a connect-time address veto (see ``FetchRequest/checkAddresses``).
    private let vetoActive: Bool
    /// The engine's DNS cache and TLS sessions, shared by every easy handle.
    private let share: CurlShareHandle
    /// Counts the engine's CA store loads, handshakes and resumptions.
    private let tlsStats: CurlTLSStats

    init(
        configuration: WorkerConfiguration.Fetch, vetoActive: Bool, share: CurlShareHandle, tlsStats: CurlTLSStats
    ) throws(CurlError) {
        self.configuration = configuration
        self.share = share
        self.tlsStats = tlsStats
        self.connectTimeoutMs = Self.milliseconds(configuration.connectTimeout)
        self.timeoutMs = Self.milliseconds(configuration.timeout)
        self.resolveList = configuration.resolve.isEmpty ? nil : try CurlStringList(configuration.resolve)
        self.vetoActive = vetoActive
    }

    private static func milliseconds(_ seconds: Double) -> Int {
        guard seconds.isFinite, seconds > 0 else { return 0 }  // 0 = no limit for libcurl
        return Int(min(seconds * 1000, Double(Int32.max)).rounded(.up))
    }

    /// Sets every option of `transfer` on `easy` (a fresh or reset handle); keeps the header list
    /// alive on the transfer.
    func apply(to easy: CurlEasyHandle, for transfer: FetchTransfer) throws(CurlError) {
        let request = transfer.request
        // memchr: `utf8.contains` went byte by byte through the generic path, 1,100 instructions a job.
        var url = request.url
        let hasNUL = url.withUTF8 { utf8 in utf8.baseAddress.map { memchr($0, 0, utf8.count) != nil } ?? false }
        if hasNUL { throw .easy(CURLE_URL_MALFORMAT) }
        try easy.set(CURLOPT_URL, request.url)
        try easy.set(CURLOPT_NOSIGNAL, 1)
        try easy.setErrorBuffer()
        // A lookup that outlives its transfer (a timeout, a cancel) is left to finish on its own
        // resolver thread: without this, libcurl joins that thread on the fetch loop, and one
        // host name whose DNS never answers holds every transfer for glibc's whole retry time.
        try easy.set(CURLOPT_QUICK_EXIT, 1)
        try easy.set(CURLOPT_PROTOCOLS_STR, "http,https")
        try easy.set(CURLOPT_REDIR_PROTOCOLS_STR, "http,https")
        // No proxy from the environment: the address veto must see the origin's address.
        try easy.set(CURLOPT_PROXY, "")
        if let resolveList { try easy.set(CURLOPT_RESOLVE, list: resolveList) }
        try easy.set(CURLOPT_SHARE, pointer: share.raw)
        try applyTLS(to: easy)
        try easy.set(CURLOPT_CONNECTTIMEOUT_MS, connectTimeoutMs)
        try easy.set(CURLOPT_TIMEOUT_MS, timeoutMs)
        if configuration.lowSpeedLimit > 0, configuration.lowSpeedTime > 0 {
            try easy.set(CURLOPT_LOW_SPEED_LIMIT, configuration.lowSpeedLimit)
            try easy.set(CURLOPT_LOW_SPEED_TIME, configuration.lowSpeedTime)
        }
        try easy.set(CURLOPT_USERAGENT, configuration.userAgent)
        // libcurl 7.88 decodes a `Transfer-Encoding` such as gzip unasked (it never asks for a
        // Content-Encoding here), and a paused transfer's decoded bytes pile up in its pause
        // buffer, up to 64 MiB, past `fetch.max_bytes`. Bodies come as sent; `chunked` is still read.
        try easy.set(CURLOPT_HTTP_CONTENT_DECODING, 0)

        var headers = request.headers
        switch request.method {
        case .get, .head:
            if request.method == .head { try easy.set(CURLOPT_NOBODY, 1) }
            try easy.set(CURLOPT_FOLLOWLOCATION, 1)
            try easy.set(CURLOPT_MAXREDIRS, request.maxRedirects ?? configuration.maxRedirects)
        case .put, .post:
            // The body goes in as (copied) POST fields, under the PUT method for a PUT, so libcurl
            // knows its length up front and CURLOPT_AWS_SIGV4 can hash the payload.
            if request.method == .put { try easy.set(CURLOPT_CUSTOMREQUEST, "PUT") }
            let upload = request.uploadBody ?? []
            try easy.set(CURLOPT_POSTFIELDSIZE_LARGE, offset: Int64(upload.count))
            if upload.isEmpty {
                try easy.set(CURLOPT_COPYPOSTFIELDS, "")
            } else {
                let code = upload.withUnsafeBytes {
                    ifw_easy_setopt_pointer(
                        easy.raw, CURLOPT_COPYPOSTFIELDS, UnsafeMutableRawPointer(mutating: $0.baseAddress))
                }
                guard code == CURLE_OK else { throw .easy(code) }
            }
            // Drop the form Content-Type libcurl would add for POST fields, and Expect: 100-continue.
            // Not for SigV4: libcurl 7.88 signs every custom header, the blank ones that only
            // remove a header included, so the signature would cover headers never sent (S3
            // answers 403 SignatureDoesNotMatch). Headers libcurl adds by itself are not signed.
            if request.awsSigV4 == nil {
                if !headers.contains(where: { Self.isHeader($0, named: "content-type") }) {
                    headers.append("Content-Type:")
                }
                headers.append("Expect:")
            }
        }
        if !headers.isEmpty {
            let list = try CurlStringList(headers)
            transfer.headerList = list
            try easy.set(CURLOPT_HTTPHEADER, list: list)
        }
        if let sigV4 = request.awsSigV4 { try easy.set(CURLOPT_AWS_SIGV4, sigV4) }
        if let userPassword = request.userPassword { try easy.set(CURLOPT_USERPWD, userPassword) }
        if vetoActive, !request.checkAddresses {
            // A connection opened without the veto must never carry a vetted transfer: do not
            // keep it for reuse, and do not multiplex HTTP/2 streams of other transfers onto it.
            try easy.set(CURLOPT_FORBID_REUSE, 1)
            try easy.set(CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_1_1))
        } else if Self.isHTTPS(request.url) {
            // HTTP/2 where the origin offers it by ALPN (libcurl's default for https), and a new
            // transfer waits for a connection to its origin that is still being set up, to
            // multiplex on it, instead of racing a connection of its own. The wait ends with
            // that handshake: if ALPN chose HTTP/1.1, the transfers open connections of their
            // own and keep them alive. Not for http://, where libcurl would only learn that
            // nothing multiplexes from the first response, a whole origin delay later.
            try easy.set(CURLOPT_PIPEWAIT, 1)
        }

        let opaque = transfer.opaque
        try easy.set(CURLOPT_PRIVATE, pointer: opaque)
        try easy.set(CURLOPT_WRITEDATA, pointer: opaque)
        try easy.setWriteCallback { data, size, count, userdata in
            let bytes = size * count
            switch FetchTransfer.from(userdata).receive(
                UnsafeRawPointer(data).assumingMemoryBound(to: UInt8.self), count: bytes)
            {
            case .accepted: return bytes
            case .abort: return 0
            case .pause: return Int(CURL_WRITEFUNC_PAUSE)
            }
        }
        try easy.set(CURLOPT_HEADERDATA, pointer: opaque)
        try easy.setHeaderCallback { data, size, count, userdata in
            let bytes = size * count
            let ok = FetchTransfer.from(userdata).header(UnsafeRawBufferPointer(start: data, count: bytes))
            return ok ? bytes : 0
        }
        if transfer.addressPolicy != nil {
            try easy.set(CURLOPT_OPENSOCKETDATA, pointer: opaque)
            try easy.setOpenSocketCallback { userdata, _, address in
                FetchTransfer.from(userdata).openSocket(address)
            }
        }
    }

    /// The CA store is built once per engine, not once per connection: libcurl (7.87+, OpenSSL)
    /// keeps the store it built from `CURLOPT_CAINFO` in the multi handle for
    /// `CURLOPT_CA_CACHE_TIMEOUT` (24 h by default) and hands it to every new connection, but
    /// only when no CA directory is set. Debian's libcurl sets `/etc/ssl/certs` as its default
    /// `CURLOPT_CAPATH`, which turned the cache off: every connection parsed the whole bundle
    /// again. The bundle (`ca-certificates.crt`) already holds every CA of that directory.
    private func applyTLS(to easy: CurlEasyHandle) throws(CurlError) {
        if let caFile = configuration.tls.caFile { try easy.set(CURLOPT_CAINFO, caFile) }
        let code = ifw_easy_setopt_string(easy.raw, CURLOPT_CAPATH, nil)
        guard code == CURLE_OK else { throw .easy(code) }
        try tlsStats.install(on: easy)
    }

    private static func isHTTPS(_ url: String) -> Bool {
        var prefix = url.utf8.prefix(8).makeIterator()
        for expected in "https://".utf8 {
            guard let byte = prefix.next(), byte | 0x20 == expected | 0x20 else { return false }
        }
        return true
    }

    private static func isHeader(_ line: String, named name: String) -> Bool {
        guard let colon = line.firstIndex(of: ":") else { return false }
        return line[..<colon].lowercased() == name
    }
}
