import CCurl
import CShims
import Dispatch

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The state of one transfer while libcurl works on it: the request, the body received so far, the
/// facts the callbacks gathered, and why the engine aborted it, if it did.
///
/// libcurl reaches it through `Unmanaged` user-data pointers (`CURLOPT_PRIVATE`, `WRITEDATA`,
/// `HEADERDATA`, `OPENSOCKETDATA`); the engine's table of running transfers holds the strong
/// reference until the easy handle has been removed from the multi handle and reset.
///
/// `@unchecked Sendable` because it is created by the caller of ``FetchEngine/fetch(_:completion:)``
/// and handed to the fetch queue through the engine's locked inbox. From then on it is touched
/// only on the fetch queue (libcurl calls the callbacks from `curl_multi_socket_action`, which runs only
/// there), until the loop hands it to the completion queue, which only reads what no longer
/// changes by then (``completion``, ``phase``). Debug builds check the queue where the loop and
/// libcurl enter (``assertOnFetchQueue()``).
final class FetchTransfer: @unchecked Sendable {
    let id: UInt64
    let request: FetchRequest
    /// The engine's fetch queue, for the confinement checks of debug builds.
    let queue: DispatchQueue
    let completion: @Sendable (FetchResponse) -> Void
    /// `fetch.max_bytes`.
    let maxBytes: Int
    /// The connect-time veto, nil when this transfer skips it.
    let addressPolicy: (@Sendable (UnsafePointer<sockaddr>) -> String?)?
    /// The host checks, nil when this transfer skips them (with the veto).
    let hostGuard: HostGuard?

    /// The easy handle while the transfer runs.
    var easy: CurlEasyHandle?
    /// The loop running the transfer when it applies body flow control (``BodyBacklog``); set by
    /// the loop when the transfer starts, cleared when it ends.
    var loop: FetchLoop?
    /// Where the current response's body is: dropped, paused by the flow control, kept,
    /// inspected, complete.
    private(set) var phase = BodyPhase.awaitingBody
    /// `CURLOPT_HTTPHEADER`; lives as long as the easy handle points at it.
    var headerList: CurlStringList?

    /// The body of the current response.
    private(set) var body: [UInt8] = []
    /// Content-Type of the current (in the end: final) response.
    private(set) var contentType: String?
    /// Content-Length of the current response, if declared.
    private(set) var contentLength: Int64?
    /// The response has a `Transfer-Encoding` (chunked or any other): its `Content-Length`, if it
    /// sends one too, is ignored, as libcurl ignores it (RFC 9112, 6.3) and reads the body by its
    /// chunks or to the connection's close.
    private var transferCoded = false
    /// The response's `Transfer-Encoding` names `chunked`: its body ends with its last chunk.
    private var chunked = false
    /// A 417 came: libcurl sends an upload again only after the first.
    private var expectationFailed = false
    /// `Retry-After` of the current response, as sent (only kept for 429 and 503, which the
    /// origin scheduler reads as a pause).
    private(set) var retryAfter: String?
    /// `ETag` and `Last-Modified` of the current response, when they keep to ``CacheValidators``'
    /// rule (a broken or hostile value is dropped).
    private(set) var etag: String?
    private(set) var lastModified: String?
    /// The status of the current response, from its status line (0 until one is seen).
    private var statusFromLine = 0
    /// Whether the next header line is a response's first: the transfer's, or one after the blank
    /// line that ended a response's headers (a redirect hop, a 100 Continue).
    private var awaitingStatusLine = true
    /// The headers of a final answer have ended (not a 1xx, a followed 3xx, or the first 417 to an
    /// upload that sent `Expect`): any later header line is a trailer after its body, which may
    /// neither start a response nor change the answer.
    private var finalHeadersEnded = false
    /// The hops libcurl had counted when a 3xx's headers ended. Lines that come before it counts
    /// another are the 3xx's trailers (all of them, when it is not followed: no `Location`, the
    /// redirect limit); the first after it is the next response's status line.
    private var redirectsAtHeadersEnd: Int?
    /// The body size at which an undecided inspector looks again.
    private var nextInspection = 0
    /// The current response's `X-Robots-Tag` and `tdm-reservation` values, gathered only when
    /// the request checks opt-out signals (``FetchRequest/optOut``).
    private var optOutHeaders = OptOutHeaders()
    /// The body was cut at ``FetchRequest/truncateBodyAt``: the abort that follows is a success.
    private var cutAtLimit = false
    /// The loop's flow control holds the transfer ahead of its body now (paused, not yet given
    /// back): a timeout then is the worker's. Once resumed, a stall is the origin's again.
    private(set) var heldByWorker = false
    /// Why the engine stopped the transfer from a callback (libcurl then reports `WRITE_ERROR`).
    private(set) var abortReason: FetchError?
    /// The class of the last address the veto refused (libcurl then reports `COULDNT_CONNECT`).
    private(set) var vetoedClass: String?
    /// Sockets opened since the last status line: a `COULDNT_CONNECT` is the veto's only when the
    /// veto refused every address of the hop; else an allowed address failed on its own.
    private var socketsOpened = 0
    /// A followed `Location` names a scheme other than http and https: libcurl's
    /// `UNSUPPORTED_PROTOCOL` is then the redirect's, not an answer that is no HTTP.
    private var redirectsToForeignScheme = false

    /// A non-2xx body larger than this is not drained for keep-alive; the transfer stops instead.
    static let discardLimit = 64 * 1024

    init(
        id: UInt64, request: FetchRequest, queue: DispatchQueue, maxBytes: Int,
        addressPolicy: (@Sendable (UnsafePointer<sockaddr>) -> String?)?, hostGuard: HostGuard? = nil,
        completion: @escaping @Sendable (FetchResponse) -> Void
    ) {
        self.id = id
        self.request = request
        self.queue = queue
        self.maxBytes = maxBytes
        self.addressPolicy = request.checkAddresses ? addressPolicy : nil
        self.hostGuard = request.checkAddresses ? hostGuard : nil
        self.completion = completion
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

    /// The pointer handed to libcurl as user data.
    var opaque: UnsafeMutableRawPointer { Unmanaged.passUnretained(self).toOpaque() }

    /// The transfer behind a user-data pointer.
    @inline(__always)
    static func from(_ pointer: UnsafeMutableRawPointer?) -> FetchTransfer {
        Unmanaged<FetchTransfer>.fromOpaque(pointer!).takeUnretainedValue()
    }

    /// Hands the body over, leaving the transfer without one.
    func takeBody() -> [UInt8] {
        assertOnFetchQueue()
        defer { body = [] }
        return body
    }

    // MARK: Callbacks (fetch queue, inside curl_multi_socket_action)

    /// What the write callback tells libcurl.
    enum WriteOutcome {
        /// The chunk was taken.
        case accepted
        /// Stop the transfer (``abortReason`` says why).
        case abort
        /// Keep the chunk and pause the transfer (`CURL_WRITEFUNC_PAUSE`): the loop's flow control.
        case pause
    }

    /// The write callback: one chunk of the current response's body. No queue check here: it
    /// runs per chunk, inside `curl_multi_socket_action`, whose caller (the loop) is checked.
    func receive(_ data: UnsafePointer<UInt8>, count: Int) -> WriteOutcome {
        // The status is read only until the body's fate is known (the first chunk).
        var status = 0
        if case .awaitingBody = phase { status = currentStatus }
        var inspect = false
        switch phase.chunk(count: count, status: status, discardLimit: Self.discardLimit) {
        case .drop:
            return .accepted
        case .stopDiscarding:
            abortReason = .httpStatus(currentStatus)
            return .abort
        case .stayPaused:
            return .pause
        case .admit:
            if let loop, !loop.admitBody(of: self) {
                phase.pausedByFlowControl()
                heldByWorker = true
                return .pause
            }
            admitBody()
            inspect = request.inspector != nil
        case .keep(let inspecting):
            inspect = inspecting
        }
        if let limit = request.truncateBodyAt, body.count + count >= limit {
            body.append(contentsOf: UnsafeBufferPointer(start: data, count: min(count, max(limit - body.count, 0))))
            cutAtLimit = true
            return .abort
        }
        if body.count + count > maxBytes {
            abortReason = .tooLarge(limit: maxBytes, declared: false)
            return .abort
        }
        body.append(contentsOf: UnsafeBufferPointer(start: data, count: count))
        // An undecided inspector looks again once the body has doubled: it reads the body from
        // its start, so looking after every chunk would cost the square of the body.
        if inspect, let inspector = request.inspector, body.count >= nextInspection {
            switch body.withUnsafeBytes(inspector) {
            case .needMore:
                nextInspection = 2 * body.count
            case .accept:
                phase.inspected()
            case .reject(let rejection):
                phase.inspected()
                abortReason = .rejected(rejection)
                return .abort
            }
        }
        if let declared = contentLength, Int64(body.count) >= declared { bodyComplete() }
        return .accepted
    }

    /// The kept body may come in: its buffer is reserved at the declared length, up to
    /// ``reserveLimit``. The loop calls this for a paused transfer just before resuming it.
    func admitBody() {
        assertOnFetchQueue()
        heldByWorker = false
        phase.admitted(inspecting: request.inspector != nil)
        if let declared = contentLength, declared > 0 {
            body.reserveCapacity(Int(min(declared, Int64(min(maxBytes, Self.reserveLimit)))))
        }
    }

    /// The most reserved on a declared length: past it the buffer grows with the bytes that
    /// come, so a length that lies costs no more than the body does.
    static let reserveLimit = 16 << 20

    /// The body is complete (all declared bytes, or the transfer ended): from now on it counts in
    /// the loop's backlog, once.
    func bodyComplete() {
        guard let loop, phase.bodyComplete() else { return }
        loop.bodyCompleted()
    }

    /// The transfer ends (the loop removes it); true when it was paused by the flow control.
    func ended() -> Bool {
        assertOnFetchQueue()
        return phase.ended()
    }

    /// The current response's body has no framing of HTTP/1 (neither a `Content-Length` nor
    /// chunks; libcurl reads any other coding to the close): it ends where the connection
    /// closes. HTTP/2 frames every body.
    var bodyEndsAtClose: Bool {
        contentLength == nil && !chunked
    }

    /// libcurl 7.88 sends `Expect: 100-continue` with an upload over 1 MiB, unless the request
    /// blanks it, which a SigV4 request cannot (``CurlTransferOptions``).
    private var sentExpect: Bool {
        request.awsSigV4 != nil && (request.uploadBody?.count ?? 0) > 1 << 20
    }

    private var currentStatus: Int {
        easy?.long(CURLINFO_RESPONSE_CODE) ?? 0
    }

    /// The header callback: one header line (status line included, CRLF included). Returns false
    /// to abort the transfer (a redirect target that fails the URL checks).
    func header(_ line: UnsafeRawBufferPointer) -> Bool {
        assertOnFetchQueue()
        guard let first = line.first, !finalHeadersEnded else { return true }
        if let hops = redirectsAtHeadersEnd {
            // The 3xx's trailers, until libcurl has counted a hop; after it, the next response.
            guard (easy?.long(CURLINFO_REDIRECT_COUNT) ?? 0) > hops else { return true }
            redirectsAtHeadersEnd = nil
        }
        // Only a response's first line is its status line. libcurl reads a later line that starts
        // with `HTTP/` and has a colon as an ordinary header; taken as a status line, it would
        // hide the `Location` that libcurl follows from the redirect checks.
        let firstLine = awaitingStatusLine
        awaitingStatusLine = false
        switch first {
        case UInt8(ascii: "H"):
            // A status line starts a new response (a redirect hop, a 100 Continue, the final one).
            if firstLine, Self.hasPrefix(line, Self.statusLinePrefix) {
                startResponse()
                statusFromLine = Self.parseStatus(line)
            }
        case UInt8(ascii: "C"), UInt8(ascii: "c"):
            if let value = Self.value(of: Self.contentTypePrefix, in: line) {
                contentType = String(decoding: value, as: UTF8.self)
            } else if !transferCoded, let value = Self.value(of: Self.contentLengthPrefix, in: line) {
                contentLength = Self.parseLength(value)
            }
        case UInt8(ascii: "E"), UInt8(ascii: "e"):
            if let value = Self.value(of: Self.etagPrefix, in: line) {
                etag = CacheValidators.etag(from: value)
            }
        case UInt8(ascii: "R"), UInt8(ascii: "r"):
            if statusFromLine == 429 || statusFromLine == 503,
                let value = Self.value(of: Self.retryAfterPrefix, in: line)
            {
                retryAfter = String(decoding: value, as: UTF8.self)
            }
        case UInt8(ascii: "L"), UInt8(ascii: "l"):
            // libcurl follows redirects itself; it checks the scheme (CURLOPT_REDIR_PROTOCOLS_STR)
            // and the veto checks the address, but the target's user info, length and host are
            // ours to check. Whether it follows is decided by its own reading of the status.
            if let value = Self.location(in: line), Self.isFollowed(currentStatus) {
                if let problem = Self.redirectProblem(value) ?? redirectHostProblem(value) {
                    abortReason = problem
                    return false
                }
                if Self.hasForeignScheme(value) { redirectsToForeignScheme = true }
            } else if let value = Self.value(of: Self.lastModifiedPrefix, in: line) {
                lastModified = CacheValidators.lastModified(from: value)
            }
        case UInt8(ascii: "X"), UInt8(ascii: "x"), UInt8(ascii: "T"), UInt8(ascii: "t"):
            if let value = Self.value(of: Self.transferEncodingPrefix, in: line) {
                transferCoded = true
                chunked = chunked || Self.namesChunked(value)
                contentLength = nil
            }
            if request.optOut != nil { optOutHeaders.gather(line) }
        case UInt8(ascii: "\r"), UInt8(ascii: "\n"):
            // The blank line that ends a response's headers: the last moment before its body.
            // Only an interim answer, a redirect hop, or the 417 to an upload's `Expect:
            // 100-continue` (libcurl then sends the upload again) is followed by another response.
            awaitingStatusLine =
                (100...199).contains(statusFromLine) || (300...399).contains(statusFromLine)
                || (statusFromLine == 417 && sentExpect && !expectationFailed)
            if statusFromLine == 417 { expectationFailed = true }
            finalHeadersEnded = !awaitingStatusLine
            if (300...399).contains(statusFromLine) {
                redirectsAtHeadersEnd = easy?.long(CURLINFO_REDIRECT_COUNT) ?? 0
            }
            if let policy = request.optOut, (200...299).contains(statusFromLine), !optOutHeaders.isEmpty,
                let signal = policy.signal(
                    xRobotsTag: optOutHeaders.xRobotsTag, tdmReservation: optOutHeaders.tdmReservation)
            {
                abortReason = .optedOut(signal)
                return false
            }
            // A 204 and a HEAD's answer have no body (libcurl reads none), whatever length they name.
            if statusFromLine == 204 || request.method == .head { contentLength = nil }
            // A body declared over what would be taken of it is refused before it comes. Here and
            // not by libcurl's CURLOPT_MAXFILESIZE, which judged every answer's length, a
            // redirect's too.
            if let declared = contentLength {
                if (200...299).contains(statusFromLine), request.truncateBodyAt == nil, declared > Int64(maxBytes) {
                    abortReason = .tooLarge(limit: maxBytes, declared: true)
                    return false
                }
                // An error page longer than is ever read of it: the answer is its status, at once.
                if statusFromLine >= 400, declared > Int64(Self.discardLimit) {
                    abortReason = .httpStatus(statusFromLine)
                    return false
                }
            }
        default:
            break
        }
        return true
    }

    /// The host checks of a redirect target (``HostGuard``), resolved against the current URL.
    private func redirectHostProblem(_ location: UnsafeRawBufferPointer.SubSequence) -> FetchError? {
        guard let hostGuard, let current = easy?.string(CURLINFO_EFFECTIVE_URL) else { return nil }
        return hostGuard.redirectProblem(from: current, to: location)
    }

    private func startResponse() {
        socketsOpened = 0
        contentType = nil
        contentLength = nil
        transferCoded = false
        chunked = false
        retryAfter = nil
        optOutHeaders = OptOutHeaders()
        etag = nil
        lastModified = nil
        phase.statusLine()
        nextInspection = 0
        if !body.isEmpty { body.removeAll(keepingCapacity: true) }
    }

    /// The open-socket callback: applies the veto, then opens the socket as libcurl would.
    func openSocket(_ address: UnsafeMutablePointer<curl_sockaddr>) -> curl_socket_t {
        assertOnFetchQueue()
        if let addressPolicy {
            // `addr` is followed by enough storage for the whole address (IPv6 included), so
            // point at it in place instead of copying the 16-byte `struct sockaddr`.
            let offset = MemoryLayout<curl_sockaddr>.offset(of: \curl_sockaddr.addr)!
            let sockaddrPointer = UnsafeRawPointer(address).advanced(by: offset)
                .assumingMemoryBound(to: sockaddr.self)
            if let veto = addressPolicy(sockaddrPointer) {
                vetoedClass = veto
                return -1  // CURL_SOCKET_BAD
            }
        }
        #if canImport(Glibc)
        let type = address.pointee.socktype | Int32(SOCK_CLOEXEC.rawValue)
        #else
        let type = address.pointee.socktype
        #endif
        socketsOpened += 1
        return socket(address.pointee.family, type, address.pointee.protocol)
    }

    // MARK: Outcome

    /// Why the transfer failed, given libcurl's result, or nil for a complete 2xx response.
    func failure(for result: CURLcode, status: Int, maxRedirects: Int) -> FetchError? {
        assertOnFetchQueue()
        if cutAtLimit, result == CURLE_WRITE_ERROR {
            return (200...299).contains(status) ? nil : .httpStatus(status)
        }
        if result == CURLE_OK {
            guard status > 0 else { return .connectFailed(.noResponse) }
            guard (200...299).contains(status) else { return .httpStatus(status) }
            if request.method == .get, let declared = contentLength, Int64(body.count) < declared {
                return .truncated(received: body.count, declared: declared)
            }
            return nil
        }
        if let abortReason, result == CURLE_WRITE_ERROR || result == CURLE_ABORTED_BY_CALLBACK {
            return abortReason
        }
        if let vetoedClass, result == CURLE_COULDNT_CONNECT, socketsOpened == 0 {
            return .addressRefused(addressClass: vetoedClass)
        }
        // libcurl 7.88 also says UNSUPPORTED_PROTOCOL for an answer that is not HTTP (HTTP/0.9,
        // an unknown version, a status of other than three digits).
        if result == CURLE_UNSUPPORTED_PROTOCOL, !redirectsToForeignScheme {
            var url = request.url
            let foreign = url.withUTF8 { Self.hasForeignScheme(UnsafeRawBufferPointer($0)[...]) }
            if !foreign { return .connectFailed(.notHTTP) }
        }
        // Read only for a failed handshake, the one result whose meaning depends on it, and only
        // when the socket's failure came first (``CurlEasyHandle/firstFailureWasSocket``).
        var osErrno = 0
        if result == CURLE_SSL_CONNECT_ERROR, let easy, easy.firstFailureWasSocket {
            osErrno = easy.long(CURLINFO_OS_ERRNO) ?? 0
        }
        return FetchError(
            curlCode: result, status: status, declaredLength: contentLength, received: body.count,
            maxRedirects: maxRedirects, maxBytes: maxBytes, osErrno: Int32(truncatingIfNeeded: osErrno))
    }
}
