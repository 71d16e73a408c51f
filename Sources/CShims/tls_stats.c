#include "CShims.h"
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The engine's own TLS session cache. libcurl 7.88's shared cache keeps only the 8 sessions used
 * last (share.c), so with more origins than that in turn a reconnection finds its session gone.
 * This one keeps a session per origin ("host:port" of the URL the connection was made for) in a
 * fixed table, the newer session of two origins that hash alike winning: bounded memory, O(1). A
 * session is only ever offered to a connection for the same host name and port, as libcurl's own
 * cache does, and only when libcurl had none to offer. */
enum { session_slots = 512 };

struct session_slot {
    char *key;
    SSL_SESSION *session;
};

struct ifw_tls_stats {
    /* The store the previous connection got, with a reference held (see the header). Touched only on
     * the thread that drives the multi handle, like the callbacks. */
    X509_STORE *last_store;
    _Atomic unsigned long long ca_store_loads;
    _Atomic unsigned long long handshakes;
    _Atomic unsigned long long resumed;
    /* libcurl's new-session callback, which ours passes each session on to. */
    int (*curl_new_session)(SSL *, SSL_SESSION *);
    struct session_slot *slots; /* session_slots of them, allocated with the first session */
};

/* Our own ex_data slots: the context's point at the stats and at its connection's origin key
 * (freed with the context), the connection's marks a handshake already counted (TLS 1.3 may
 * report more handshake-done events on one connection). */
static int ctx_index = -1;
static int key_index = -1;
static int ssl_index = -1;
static pthread_once_t indexes_once = PTHREAD_ONCE_INIT;

static void free_key(void *parent, void *ptr, CRYPTO_EX_DATA *ad, int idx, long argl, void *argp) {
    (void)parent, (void)ad, (void)idx, (void)argl, (void)argp;
    free(ptr);
}

static void make_indexes(void) {
    ctx_index = SSL_CTX_get_ex_new_index(0, NULL, NULL, NULL, NULL);
    key_index = SSL_CTX_get_ex_new_index(0, NULL, NULL, NULL, free_key);
    ssl_index = SSL_get_ex_new_index(0, NULL, NULL, NULL, NULL);
}

ifw_tls_stats *ifw_tls_stats_create(void) {
    pthread_once(&indexes_once, make_indexes);
    if (ctx_index < 0 || key_index < 0 || ssl_index < 0) return NULL;
    return calloc(1, sizeof(ifw_tls_stats));
}

void ifw_tls_stats_destroy(ifw_tls_stats *stats) {
    if (stats->last_store) X509_STORE_free(stats->last_store);
    if (stats->slots) {
        for (size_t i = 0; i < session_slots; i++) {
            free(stats->slots[i].key);
            if (stats->slots[i].session) SSL_SESSION_free(stats->slots[i].session);
        }
        free(stats->slots);
    }
    free(stats);
}

static struct session_slot *slot_for(ifw_tls_stats *stats, const char *key) {
    uint32_t hash = 2166136261u; /* FNV-1a */
    for (const unsigned char *c = (const unsigned char *)key; *c; c++) hash = (hash ^ *c) * 16777619u;
    return &stats->slots[hash % session_slots];
}

/* Keeps `session` as its origin's, then hands it to libcurl's callback as if ours were not there. */
static int new_session_callback(SSL *ssl, SSL_SESSION *session) {
    SSL_CTX *ctx = SSL_get_SSL_CTX(ssl);
    ifw_tls_stats *stats = SSL_CTX_get_ex_data(ctx, ctx_index);
    const char *key = SSL_CTX_get_ex_data(ctx, key_index);
    if (stats == NULL) return 0;
    if (key != NULL && stats->slots == NULL) stats->slots = calloc(session_slots, sizeof(struct session_slot));
    if (key != NULL && stats->slots != NULL) {
        struct session_slot *slot = slot_for(stats, key);
        char *copy = strdup(key);
        if (copy != NULL && SSL_SESSION_up_ref(session)) {
            free(slot->key);
            if (slot->session) SSL_SESSION_free(slot->session);
            slot->key = copy;
            slot->session = session;
        } else {
            free(copy);
        }
    }
    return stats->curl_new_session ? stats->curl_new_session(ssl, session) : 0;
}

/* Before the ClientHello: the origin's session, when libcurl set none and ours is still good. */
static void offer_session(SSL *ssl) {
    if (SSL_get_session(ssl) != NULL) return;
    SSL_CTX *ctx = SSL_get_SSL_CTX(ssl);
    ifw_tls_stats *stats = SSL_CTX_get_ex_data(ctx, ctx_index);
    const char *key = SSL_CTX_get_ex_data(ctx, key_index);
    if (stats == NULL || stats->slots == NULL || key == NULL) return;
    struct session_slot *slot = slot_for(stats, key);
    if (slot->session == NULL || strcmp(slot->key, key) != 0) return;
    time_t expires = SSL_SESSION_get_time(slot->session) + SSL_SESSION_get_timeout(slot->session);
    if (expires <= time(NULL) || !SSL_SESSION_is_resumable(slot->session)) return;
    SSL_set_session(ssl, slot->session);
}

/* "host:port" of the URL the connection is for (a redirect's target, after a redirect). */
static char *origin_key(CURL *easy) {
    char *url = NULL;
    if (curl_easy_getinfo(easy, CURLINFO_EFFECTIVE_URL, &url) != CURLE_OK || url == NULL) return NULL;
    CURLU *parsed = curl_url();
    if (parsed == NULL) return NULL;
    char *host = NULL, *port = NULL, *key = NULL;
    if (curl_url_set(parsed, CURLUPART_URL, url, 0) == CURLUE_OK &&
        curl_url_get(parsed, CURLUPART_HOST, &host, 0) == CURLUE_OK &&
        curl_url_get(parsed, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) == CURLUE_OK) {
        size_t length = strlen(host) + strlen(port) + 2;
        key = malloc(length);
        if (key != NULL) snprintf(key, length, "%s:%s", host, port);
    }
    curl_free(host);
    curl_free(port);
    curl_url_cleanup(parsed);
    return key;
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
    SSL *mutable_ssl = (SSL *)ssl;
    if (where & SSL_CB_HANDSHAKE_START) {
        offer_session(mutable_ssl);
        return;
    }
    if (!(where & SSL_CB_HANDSHAKE_DONE)) return;
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
    ifw_tls_stats *stats = userptr;
    SSL_CTX *ctx = ssl_ctx;
    SSL_CTX_set_ex_data(ctx, ctx_index, stats);
    SSL_CTX_set_info_callback(ctx, info_callback);
    /* libcurl set its new-session callback on this context just before calling us. */
    int (*curl_new_session)(SSL *, SSL_SESSION *) = SSL_CTX_sess_get_new_cb(ctx);
    if (curl_new_session != NULL && curl_new_session != new_session_callback) {
        stats->curl_new_session = curl_new_session;
        char *key = origin_key(easy);
        if (!SSL_CTX_set_ex_data(ctx, key_index, key)) free(key);
        SSL_CTX_sess_set_new_cb(ctx, new_session_callback);
    }
    return CURLE_OK;
}

CURLcode ifw_easy_setopt_tls_stats(CURL *easy, ifw_tls_stats *stats) {
    CURLcode code = curl_easy_setopt(easy, CURLOPT_SSL_CTX_FUNCTION, ssl_ctx_callback);
    if (code != CURLE_OK) return code;
    return curl_easy_setopt(easy, CURLOPT_SSL_CTX_DATA, stats);
}
