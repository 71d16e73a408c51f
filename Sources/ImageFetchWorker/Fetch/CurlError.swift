import CCurl
import CShims

/// A failed libcurl call, with the code libcurl returned.
enum CurlError: Error, Sendable {
    /// An easy-interface call (`curl_easy_*`) failed.
    case easy(CURLcode)
    /// A multi-interface call (`curl_multi_*`) failed.
    case multi(CURLMcode)
    /// A share-interface call (`curl_share_*`) failed.
    case share(CURLSHcode)
    /// `curl_global_init`, `curl_easy_init`, `curl_multi_init` or `curl_slist_append` returned nothing.
    case initFailed
    /// The event source of the multi handle (epoll, eventfd) failed, with `errno`.
    case events(Int32)

    /// libcurl's own short description; it never contains a URL.
    var reason: String {
        switch self {
        case .easy(let code): return String(cString: curl_easy_strerror(code))
        case .multi(let code): return String(cString: curl_multi_strerror(code))
        case .share(let code): return String(cString: curl_share_strerror(code))
        case .initFailed: return "libcurl could not allocate a handle"
        case .events(let code): return "the fetch loop's event source failed (errno \(code))"
        }
    }
}

/// Process-wide libcurl initialisation, done once before the first handle is created.
enum CurlGlobal {
    /// The result of `curl_global_init`; Swift runs this initialiser exactly once, thread-safely.
    static let initialization: CURLcode = curl_global_init(Int(CURL_GLOBAL_DEFAULT))

    /// Initialises libcurl if it was not yet, and reports whether that worked.
    static func ensureInitialized() throws(CurlError) {
        let code = initialization
        guard code == CURLE_OK else { throw .easy(code) }
    }
}
