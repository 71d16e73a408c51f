import CCurl
import CShims

/// Owns one libcurl URL handle (`CURLU *`) and frees it in `deinit`: libcurl's own URL parser, so
/// that the host checked is the host libcurl goes to.
final class CurlURL {
    private let raw: OpaquePointer

    init() throws(CurlError) {
        guard let handle = curl_url() else { throw .initFailed }
        raw = handle
    }

    deinit {
        curl_url_cleanup(raw)
    }

    /// Sets the whole URL; a relative one is resolved against the URL set before. False when
    /// libcurl refuses it.
    func set(_ url: String, flags: Int32) -> Bool {
        url.withCString { curl_url_set(raw, CURLUPART_URL, $0, UInt32(flags)) } == CURLUE_OK
    }

    /// The host part (IPv6 in brackets), as set; nil when there is none.
    var host: String? { part(CURLUPART_HOST) }

    /// Whether the URL as set carries a user name or a password.
    var hasUserInfo: Bool { part(CURLUPART_USER) != nil || part(CURLUPART_PASSWORD) != nil }

    private func part(_ which: CURLUPart) -> String? {
        var part: UnsafeMutablePointer<CChar>? = nil
        guard curl_url_get(raw, which, &part, 0) == CURLUE_OK, let part else { return nil }
        defer { curl_free(part) }
        return String(cString: part)
    }
}

/// The host checks that the engine makes itself for guarded transfers (those that apply the
/// address veto): the host lists of ``HostPolicy`` on the first hop, and on every redirect hop the
/// same IDNA and host-list checks a job's URL gets from ``URLPolicy`` and the pipeline.
///
/// A redirect target is resolved with libcurl's URL parser and the flags libcurl's own redirect
/// code uses, so what is checked is what libcurl would request next.
///
/// `@unchecked Sendable` because the engine creates it and hands it to transfers, which use it
/// only on the fetch queue (in `begin` and in the header callback); the URL handle is never
/// touched from two threads.
final class HostGuard: @unchecked Sendable {
    let policy: HostPolicy?
    private let parser: CurlURL

    init(policy: HostPolicy?) throws(CurlError) {
        self.policy = policy
        self.parser = try CurlURL()
    }

    /// The flags of libcurl 7.88's `Curl_follow` for a redirect.
    private static let redirectFlags = CURLU_URLENCODE | CURLU_ALLOW_SPACE

    /// Why the first hop's URL is refused (its host list, or an invalid name); nil without host lists.
    func refusal(forURL url: String) -> FetchError? {
        guard policy != nil else { return nil }
        guard parser.set(url, flags: CURLU_NON_SUPPORT_SCHEME), let host = parser.host else {
            return nil  // libcurl refuses it as well, with its own error
        }
        return check(host, redirect: false)
    }

    /// Why the redirect from `current` (the effective URL) to `location` is refused, or nil.
    func redirectProblem(from current: String, to location: UnsafeRawBufferPointer.SubSequence) -> FetchError? {
        let target = String(decoding: location, as: UTF8.self)
        let base = CURLU_NON_SUPPORT_SCHEME | CURLU_ALLOW_SPACE
        guard parser.set(current, flags: base), parser.set(target, flags: Self.redirectFlags) else {
            // A scheme libcurl does not speak: its redirect protocols refuse it (`unsupported_scheme`).
            if parser.set(current, flags: base),
                parser.set(target, flags: Self.redirectFlags | CURLU_NON_SUPPORT_SCHEME)
            {
                return nil
            }
            // libcurl's own redirect should fail on the same parse; should it not, the target
            // would go unchecked, so it is refused here (fail closed).
            return .redirectRefused(.unparsable)
        }
        // No host (`file:`): the redirect protocols refuse it too.
        guard let host = parser.host else { return nil }
        // Also where the bytes hide it: libcurl takes one to three slashes after the scheme.
        if parser.hasUserInfo { return .redirectRefused(.userInfo) }
        return check(host, redirect: true)
    }

    private func check(_ host: String, redirect: Bool) -> FetchError? {
        var name = host
        if IDNA.needsConversion(host.utf8) {
            switch IDNA.toASCII(host) {
            case .success(let ascii): name = ascii
            case .failure(let problem): return .invalidHost(problem: problem.message, redirect: redirect)
            }
        }
        guard let policy, let refusal = policy.refusal(forHost: name) else { return nil }
        return .hostNotAllowed(refusal, redirect: redirect)
    }
}
