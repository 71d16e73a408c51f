import CCurl
import CShims

/// Owns one libcurl share handle (`CURLSH*`) that the easy handles of one fetch engine use for
/// their DNS cache and their TLS sessions, and frees it in `deinit`.
///
/// - TLS sessions: without the share each easy handle keeps its own session cache, and the pool
///   hands out whichever handle is idle, so a new connection to an origin almost never found the
///   session of the last one. Shared, any handle resumes any session of the engine.
/// - DNS: the multi handle already gives all its easy handles one DNS cache; the share keeps
///   that cache in one place that outlives each handle's pooling and resets.
/// - Connections are not shared: the multi handle's connection cache already holds every
///   connection of the engine, and a shared one would only matter across multi handles.
///
/// No lock callbacks: libcurl locks a share only when the easy handles using it run on several
/// threads. Every call that touches it (setopt, the transfers, the cleanups) runs on the fetch
/// queue; the threaded resolver's thread only calls `getaddrinfo`, and the loop stores the answer
/// in the DNS cache on its own thread.
///
/// Not thread-safe, like ``CurlEasyHandle``. `curl_share_cleanup` refuses (and the handle leaks)
/// while an easy handle still uses the share, so an early release cannot free it under a handle.
final class CurlShareHandle {
    let raw: UnsafeMutableRawPointer

    init() throws(CurlError) {
        try CurlGlobal.ensureInitialized()
        guard let handle = curl_share_init() else { throw .initFailed }
        raw = handle
        for data in [CURL_LOCK_DATA_SSL_SESSION, CURL_LOCK_DATA_DNS] {
            let code = ifw_share_setopt_long(raw, CURLSHOPT_SHARE, Int(data.rawValue))
            guard code == CURLSHE_OK else {
                curl_share_cleanup(raw)
                throw .share(code)
            }
        }
    }

    deinit {
        curl_share_cleanup(raw)
    }
}
