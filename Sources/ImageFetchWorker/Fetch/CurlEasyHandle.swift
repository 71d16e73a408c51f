import CCurl
import CShims

#if canImport(Glibc)
import Glibc
#endif

/// Owns one libcurl easy handle (`CURL*`) and frees it in `deinit`.
///
/// Not thread-safe: ``FetchEngine`` touches its handles only on its fetch queue.
final class CurlEasyHandle {
    /// The handle.
    let raw: UnsafeMutableRawPointer
    /// `CURLOPT_ERRORBUFFER`: libcurl's message for a transfer's first failure.
    private let errorBuffer: UnsafeMutablePointer<CChar>

    /// Creates a handle with libcurl's default options.
    init() throws(CurlError) {
        try CurlGlobal.ensureInitialized()
        guard let handle = curl_easy_init() else { throw .initFailed }
        raw = handle
        errorBuffer = .allocate(capacity: Int(CURL_ERROR_SIZE))
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE))
    }

    deinit {
        curl_easy_cleanup(raw)
        errorBuffer.deallocate()
    }

    /// Points `CURLOPT_ERRORBUFFER` at the handle's own buffer, emptied (a reset unsets it).
    func setErrorBuffer() throws(CurlError) {
        errorBuffer[0] = 0
        try set(CURLOPT_ERRORBUFFER, pointer: UnsafeMutableRawPointer(errorBuffer))
    }

    /// Whether the transfer's first failure was its socket's: libcurl's "Recv failure: …" or
    /// "Send failure: …", written with `CURLINFO_OS_ERRNO` at the same moment. That value alone
    /// may be older: libcurl never clears it, and a pooled handle keeps an earlier transfer's.
    var firstFailureWasSocket: Bool {
        for prefix in ["Recv failure: ", "Send failure: "] {
            if strncmp(errorBuffer, prefix, prefix.utf8.count) == 0 { return true }
        }
        return false
    }

    /// Resets every option to its default, keeping the handle's caches, for reuse from a pool.
    func reset() {
        curl_easy_reset(raw)
    }

    // MARK: Options, one setter per argument type

    @inline(__always)
    private func check(_ code: CURLcode) throws(CurlError) {
        guard code == CURLE_OK else { throw .easy(code) }
    }

    /// Sets a `long` option.
    func set(_ option: CURLoption, _ value: Int) throws(CurlError) {
        try check(ifw_easy_setopt_long(raw, option, value))
    }

    /// Sets a string option; libcurl keeps its own copy.
    func set(_ option: CURLoption, _ value: String) throws(CurlError) {
        try check(value.withCString { ifw_easy_setopt_string(raw, option, $0) })
    }

    /// Sets a `curl_off_t` option.
    func set(_ option: CURLoption, offset value: Int64) throws(CurlError) {
        try check(ifw_easy_setopt_off_t(raw, option, curl_off_t(value)))
    }

    /// Sets a pointer option; the caller keeps the pointee alive while the handle uses it.
    func set(_ option: CURLoption, pointer value: UnsafeMutableRawPointer?) throws(CurlError) {
        try check(ifw_easy_setopt_pointer(raw, option, value))
    }

    /// Sets a string-list option; the caller keeps the list alive while the handle uses it.
    func set(_ option: CURLoption, list: CurlStringList) throws(CurlError) {
        try check(ifw_easy_setopt_slist(raw, option, list.raw))
    }

    /// Sets `CURLOPT_WRITEFUNCTION`.
    func setWriteCallback(_ callback: ifw_write_callback) throws(CurlError) {
        try check(ifw_easy_setopt_write_callback(raw, callback))
    }

    /// Sets `CURLOPT_HEADERFUNCTION`.
    func setHeaderCallback(_ callback: ifw_header_callback) throws(CurlError) {
        try check(ifw_easy_setopt_header_callback(raw, callback))
    }

    /// Sets `CURLOPT_OPENSOCKETFUNCTION`.
    func setOpenSocketCallback(_ callback: ifw_opensocket_callback) throws(CurlError) {
        try check(ifw_easy_setopt_opensocket_callback(raw, callback))
    }

    // MARK: Information

    /// A `long` piece of information, or nil if libcurl has none.
    func long(_ info: CURLINFO) -> Int? {
        var value = 0
        return ifw_easy_getinfo_long(raw, info, &value) == CURLE_OK ? value : nil
    }

    /// A `curl_off_t` piece of information, or nil if libcurl has none.
    func offset(_ info: CURLINFO) -> Int64? {
        var value: curl_off_t = 0
        return ifw_easy_getinfo_off_t(raw, info, &value) == CURLE_OK ? Int64(value) : nil
    }

    /// A string piece of information, copied, or nil if libcurl has none.
    func string(_ info: CURLINFO) -> String? {
        var value: UnsafePointer<CChar>? = nil
        guard ifw_easy_getinfo_string(raw, info, &value) == CURLE_OK, let value else { return nil }
        return String(cString: value)
    }

    /// A pointer piece of information (`CURLINFO_PRIVATE`), or nil.
    func pointer(_ info: CURLINFO) -> UnsafeMutableRawPointer? {
        var value: UnsafeMutableRawPointer? = nil
        return ifw_easy_getinfo_pointer(raw, info, &value) == CURLE_OK ? value : nil
    }
}

/// Reads `CURLINFO_PRIVATE` from a bare easy handle pointer, as `curl_multi_info_read` returns it.
enum CurlEasyHandleRef {
    static func transferPointer(_ handle: UnsafeMutableRawPointer) -> UnsafeMutableRawPointer? {
        var value: UnsafeMutableRawPointer? = nil
        return ifw_easy_getinfo_pointer(handle, CURLINFO_PRIVATE, &value) == CURLE_OK ? value : nil
    }
}
