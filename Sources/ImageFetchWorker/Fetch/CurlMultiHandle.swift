import CCurl
import CShims

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Owns one libcurl multi handle (`CURLM*`) and the epoll-based event source it runs on, and frees
/// both in `deinit`.
///
/// The handle uses libcurl's multi_socket interface: ``poll(timeoutMilliseconds:)`` waits on the
/// sockets libcurl asked to have watched, and ``perform()`` runs only the transfers whose socket is
/// ready or whose timer is due. `curl_multi_perform` instead visits every transfer and polls each
/// one's socket on every call, which at a thousand transfers cost about twenty `poll(2)` calls per
/// fetched image (docs/benchmarks.md, "What limits each figure").
///
/// `@unchecked Sendable` because only ``wakeup()`` may be called from any thread (it writes an
/// eventfd); every other method is called only on the engine's fetch queue, and the handle outlives
/// every caller of ``wakeup()``.
final class CurlMultiHandle: @unchecked Sendable {
    /// The handle.
    let raw: UnsafeMutableRawPointer
    private let events: OpaquePointer
    /// Released only after `curl_multi_cleanup` (a deinit body runs before the stored properties
    /// are released): what the cached connections or the easy handles still point at.
    private let keptAlive: [AnyObject]

    /// Creates a multi handle with its event source; `keepingAlive` outlives the handle.
    init(keepingAlive: [AnyObject] = []) throws(CurlError) {
        keptAlive = keepingAlive
        try CurlGlobal.ensureInitialized()
        guard let handle = curl_multi_init() else { throw .initFailed }
        guard let events = ifw_curl_events_create(handle) else {
            let code = errno
            curl_multi_cleanup(handle)
            throw .events(code)
        }
        raw = handle
        self.events = events
    }

    deinit {
        // Every easy handle has been removed by then (the engine removes each one as it finishes).
        // The cleanup may still call the socket callback, so the event source goes after it.
        curl_multi_cleanup(raw)
        ifw_curl_events_destroy(events)
    }

    @inline(__always)
    private func check(_ code: CURLMcode) throws(CurlError) {
        guard code == CURLM_OK else { throw .multi(code) }
    }

    /// Sets a `long` option.
    func set(_ option: CURLMoption, _ value: Int) throws(CurlError) {
        try check(ifw_multi_setopt_long(raw, option, value))
    }

    /// Adds an easy handle; the transfer starts on the next ``perform()``.
    func add(_ easy: CurlEasyHandle) throws(CurlError) {
        try check(curl_multi_add_handle(raw, easy.raw))
    }

    /// Removes an easy handle, finished or not; an unfinished transfer stops at once.
    func remove(_ easy: CurlEasyHandle) throws(CurlError) {
        try check(curl_multi_remove_handle(raw, easy.raw))
    }

    /// Drives the transfers whose sockets the last ``poll(timeoutMilliseconds:)`` found ready, and
    /// those whose timer is due (new, resumed, timed out), as far as they go without blocking.
    func perform() throws(CurlError) {
        try check(ifw_curl_events_act(events))
    }

    /// Waits for activity on any transfer's socket, for curl's next timeout, for ``wakeup()``, or
    /// at most `timeoutMilliseconds`, whichever comes first.
    func poll(timeoutMilliseconds: Int32) throws(CurlError) {
        guard ifw_curl_events_wait(events, timeoutMilliseconds) >= 0 else { throw .events(errno) }
    }

    /// Interrupts a ``poll(timeoutMilliseconds:)`` in progress, or makes the next one return at once.
    /// Callable from any thread.
    func wakeup() throws(CurlError) {
        guard ifw_curl_events_wake(events) == 0 else { throw .events(errno) }
    }

    /// The next finished transfer, or nil when there is none.
    ///
    /// Copies the message out, since libcurl invalidates it when the handle is removed.
    func nextCompletion() -> (easy: UnsafeMutableRawPointer, result: CURLcode)? {
        var remaining: Int32 = 0
        while let message = curl_multi_info_read(raw, &remaining) {
            if message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle {
                return (easy, message.pointee.data.result)
            }
        }
        return nil
    }
}
