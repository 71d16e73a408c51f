import CCurl
import CShims

/// Owns one libcurl multi handle (`CURLM*`) and frees it in `deinit`.
///
/// `@unchecked Sendable` because only ``wakeup()`` may be called from any thread
/// (`curl_multi_wakeup` is documented as thread-safe); every other method is called only on the
/// engine's fetch queue, and the handle outlives every caller of ``wakeup()``.
final class CurlMultiHandle: @unchecked Sendable {
    /// The handle.
    let raw: UnsafeMutableRawPointer

    /// Creates a multi handle.
    init() throws(CurlError) {
        try CurlGlobal.ensureInitialized()
        guard let handle = curl_multi_init() else { throw .initFailed }
        raw = handle
    }

    deinit {
        // Every easy handle has been removed by then (the engine removes each one as it finishes).
        curl_multi_cleanup(raw)
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

    /// Drives every transfer as far as it can go without blocking.
    func perform() throws(CurlError) {
        var running: Int32 = 0
        try check(curl_multi_perform(raw, &running))
    }

    /// Waits for activity on any transfer's socket, for curl's next timeout, for ``wakeup()``, or
    /// at most `timeoutMilliseconds`, whichever comes first.
    func poll(timeoutMilliseconds: Int32) throws(CurlError) {
        try check(curl_multi_poll(raw, nil, 0, timeoutMilliseconds, nil))
    }

    /// Interrupts a ``poll(timeoutMilliseconds:)`` in progress, or makes the next one return at once.
    /// Callable from any thread.
    func wakeup() throws(CurlError) {
        try check(curl_multi_wakeup(raw))
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
