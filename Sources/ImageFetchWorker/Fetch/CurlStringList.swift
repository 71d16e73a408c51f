import CCurl
import CShims

/// Owns one libcurl string list (`curl_slist*`), as used for `CURLOPT_HTTPHEADER`, and frees it in
/// `deinit`. It must outlive every easy handle that points at it.
final class CurlStringList {
    /// The head of the list; nil when empty.
    private(set) var raw: UnsafeMutablePointer<curl_slist>?

    /// Builds a list of copies of `items`.
    init(_ items: [String]) throws(CurlError) {
        for item in items {
            guard let head = curl_slist_append(raw, item) else { throw .initFailed }
            raw = head
        }
    }

    deinit {
        curl_slist_free_all(raw)
    }
}
