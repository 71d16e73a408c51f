import CCurl
import CShims

/// Owns one engine's TLS counters in C (`ifw_tls_stats`, see `Sources/CShims/tls_stats.c`): CA
/// store loads, handshakes and resumed sessions, counted by OpenSSL callbacks that libcurl calls
/// on the fetch queue. Reading them is safe from any thread (atomics). The same callbacks keep
/// the engine's TLS session cache, a session per origin, since libcurl 7.88's holds only 8.
///
/// `@unchecked Sendable` because ``counts`` only reads atomics, and ``install(on:)`` is called on
/// the fetch queue only. Freed after the multi handle (which keeps it alive), since connections
/// in its cache hold OpenSSL contexts that point at the counters.
final class CurlTLSStats: @unchecked Sendable {
    private let raw: OpaquePointer

    init() throws(CurlError) {
        guard let stats = ifw_tls_stats_create() else { throw .initFailed }
        raw = stats
    }

    deinit {
        ifw_tls_stats_destroy(raw)
    }

    /// Makes `easy`'s new TLS connections count here (`CURLOPT_SSL_CTX_FUNCTION`).
    func install(on easy: CurlEasyHandle) throws(CurlError) {
        let code = ifw_easy_setopt_tls_stats(easy.raw, raw)
        guard code == CURLE_OK else { throw .easy(code) }
    }

    /// The counts since the engine started.
    var counts: FetchTLSCounts {
        let counts = ifw_tls_stats_read(raw)
        return FetchTLSCounts(
            caStoreLoads: Int(counts.ca_store_loads), handshakes: Int(counts.handshakes),
            resumedSessions: Int(counts.resumed))
    }
}

/// The TLS work of one ``FetchEngine`` since it started.
package struct FetchTLSCounts: Sendable, Equatable {
    /// CA stores built from the CA bundle: 1 for the engine's life when libcurl's CA cache works,
    /// one per new connection when it does not.
    package var caStoreLoads: Int
    /// TLS handshakes completed (new connections).
    package var handshakes: Int
    /// Of those, the ones that resumed an earlier session.
    package var resumedSessions: Int

    package init(caStoreLoads: Int = 0, handshakes: Int = 0, resumedSessions: Int = 0) {
        self.caStoreLoads = caStoreLoads
        self.handshakes = handshakes
        self.resumedSessions = resumedSessions
    }
}
