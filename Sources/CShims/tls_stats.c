#include "CShims.h"
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

struct ifw_tls_stats {
    /* The store the previous connection got, with a reference held (see the header). Touched only on
     * the thread that drives the multi handle, like the callbacks. */
    X509_STORE *last_store;
    _Atomic unsigned long long ca_store_loads;
    _Atomic unsigned long long handshakes;
    _Atomic unsigned long long resumed;
};

/* Our own ex_data slots: the context's points at the stats, the connection's marks a handshake
 * already counted (TLS 1.3 may report more handshake-done events on one connection). */
static int ctx_index = -1;
static int ssl_index = -1;
static pthread_once_t indexes_once = PTHREAD_ONCE_INIT;

static void make_indexes(void) {
    ctx_index = SSL_CTX_get_ex_new_index(0, NULL, NULL, NULL, NULL);
    ssl_index = SSL_get_ex_new_index(0, NULL, NULL, NULL, NULL);
}

ifw_tls_stats *ifw_tls_stats_create(void) {
    pthread_once(&indexes_once, make_indexes);
    if (ctx_index < 0 || ssl_index < 0) return NULL;
    return calloc(1, sizeof(ifw_tls_stats));
}

void ifw_tls_stats_destroy(ifw_tls_stats *stats) {
    if (stats->last_store) X509_STORE_free(stats->last_store);
    free(stats);
}

ifw_tls_counts ifw_tls_stats_read(const ifw_tls_stats *stats) {
    ifw_tls_counts counts = {
        atomic_load_explicit(&stats->ca_store_loads, memory_order_relaxed),
        atomic_load_explicit(&stats->handshakes, memory_order_relaxed),
        atomic_load_explicit(&stats->resumed, memory_order_relaxed),
    };
    return counts;
}

static void info_callback(const SSL *ssl, int where, int ret) {
    (void)ret;
    if (!(where & SSL_CB_HANDSHAKE_DONE)) return;
    SSL *mutable_ssl = (SSL *)ssl;
    if (SSL_get_ex_data(ssl, ssl_index) != NULL) return;
    SSL_CTX *ctx = SSL_get_SSL_CTX(ssl);
    ifw_tls_stats *stats = SSL_CTX_get_ex_data(ctx, ctx_index);
    if (stats == NULL) return;
    SSL_set_ex_data(mutable_ssl, ssl_index, stats);
    /* The store the handshake used: libcurl 7.88 gives the context its store after the context
     * callback, so only here is it the real one. */
    X509_STORE *store = SSL_CTX_get_cert_store(ctx);
    if (store != NULL && store != stats->last_store && X509_STORE_up_ref(store)) {
        if (stats->last_store) X509_STORE_free(stats->last_store);
        stats->last_store = store;
        atomic_fetch_add_explicit(&stats->ca_store_loads, 1, memory_order_relaxed);
    }
    atomic_fetch_add_explicit(&stats->handshakes, 1, memory_order_relaxed);
    if (SSL_session_reused(ssl)) atomic_fetch_add_explicit(&stats->resumed, 1, memory_order_relaxed);
}

static CURLcode ssl_ctx_callback(CURL *easy, void *ssl_ctx, void *userptr) {
    (void)easy;
    ifw_tls_stats *stats = userptr;
    SSL_CTX *ctx = ssl_ctx;
    SSL_CTX_set_ex_data(ctx, ctx_index, stats);
    SSL_CTX_set_info_callback(ctx, info_callback);
    return CURLE_OK;
}

CURLcode ifw_easy_setopt_tls_stats(CURL *easy, ifw_tls_stats *stats) {
    CURLcode code = curl_easy_setopt(easy, CURLOPT_SSL_CTX_FUNCTION, ssl_ctx_callback);
    if (code != CURLE_OK) return code;
    return curl_easy_setopt(easy, CURLOPT_SSL_CTX_DATA, stats);
}
