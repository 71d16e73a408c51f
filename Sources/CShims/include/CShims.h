#ifndef IFW_CSHIMS_H
#define IFW_CSHIMS_H

/*
 * Typed, non-variadic wrappers around the variadic C APIs that Swift cannot call:
 * curl_easy_setopt, curl_easy_getinfo, curl_multi_setopt and amqp_login_with_properties.
 * Each wrapper fixes the type of the variadic argument, so a call from Swift is checked
 * by the compiler instead of being reinterpreted by va_arg. At the end, glibc's mallopt, whose
 * header Swift's Glibc module does not import, memmem, libidn2, and the fetch loop's event source for
 * libcurl's multi_socket interface (curl_events.c).
 */

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/socket.h>
/* This header and CCurl's both include <curl/curl.h>, and this one and CRabbitMQ's both include
 * <amqp.h>. When a compile batch loads this module first, those declarations belong to it, and a
 * Swift file that imports CCurl or CRabbitMQ alone cannot see them ("cannot find 'CURLE_OK' in
 * scope", "cannot find 'AMQP_RESPONSE_NORMAL' in scope"; which batch loads what first changes
 * with the files, so a build can break on an unrelated change): every Swift file that imports
 * CCurl or CRabbitMQ imports CShims too. */
#include <curl/curl.h>
#include "ifw_vips.h"
#if __has_include(<rabbitmq-c/amqp.h>)
#include <rabbitmq-c/amqp.h>
#else
#include <amqp.h>
#endif

/* curl_easy_setopt, one function per argument type. */
CURLcode ifw_easy_setopt_long(CURL *easy, CURLoption option, long value);
CURLcode ifw_easy_setopt_pointer(CURL *easy, CURLoption option, void *_Nullable value);
CURLcode ifw_easy_setopt_string(CURL *easy, CURLoption option, const char *_Nullable value);
CURLcode ifw_easy_setopt_off_t(CURL *easy, CURLoption option, curl_off_t value);
CURLcode ifw_easy_setopt_slist(CURL *easy, CURLoption option, struct curl_slist *_Nullable value);

/* Callbacks, typed. */
typedef size_t (*ifw_write_callback)(char *_Nonnull data, size_t size, size_t nmemb, void *_Nullable userdata);
typedef size_t (*ifw_header_callback)(char *_Nonnull data, size_t size, size_t nitems, void *_Nullable userdata);
typedef int (*ifw_xferinfo_callback)(void *_Nullable userdata, curl_off_t dltotal, curl_off_t dlnow,
                                     curl_off_t ultotal, curl_off_t ulnow);
typedef curl_socket_t (*ifw_opensocket_callback)(void *_Nullable userdata, curlsocktype purpose,
                                                 struct curl_sockaddr *_Nonnull address);
typedef size_t (*ifw_read_callback)(char *_Nonnull buffer, size_t size, size_t nitems, void *_Nullable userdata);

CURLcode ifw_easy_setopt_write_callback(CURL *easy, ifw_write_callback _Nullable callback);
CURLcode ifw_easy_setopt_header_callback(CURL *easy, ifw_header_callback _Nullable callback);
CURLcode ifw_easy_setopt_xferinfo_callback(CURL *easy, ifw_xferinfo_callback _Nullable callback);
CURLcode ifw_easy_setopt_opensocket_callback(CURL *easy, ifw_opensocket_callback _Nullable callback);
CURLcode ifw_easy_setopt_read_callback(CURL *easy, ifw_read_callback _Nullable callback);

/* curl_easy_getinfo, one function per result type. */
CURLcode ifw_easy_getinfo_long(CURL *easy, CURLINFO info, long *_Nonnull value);
CURLcode ifw_easy_getinfo_off_t(CURL *easy, CURLINFO info, curl_off_t *_Nonnull value);
CURLcode ifw_easy_getinfo_string(CURL *easy, CURLINFO info, const char *_Nullable *_Nonnull value);
CURLcode ifw_easy_getinfo_pointer(CURL *easy, CURLINFO info, void *_Nullable *_Nonnull value);

/* curl_multi_setopt. */
CURLMcode ifw_multi_setopt_long(CURLM *multi, CURLMoption option, long value);
CURLMcode ifw_multi_setopt_pointer(CURLM *multi, CURLMoption option, void *_Nullable value);

/* amqp_login_with_properties with the PLAIN mechanism (user, password). */
amqp_rpc_reply_t ifw_amqp_login_plain(amqp_connection_state_t state, const char *vhost, int channel_max,
                                      int frame_max, int heartbeat,
                                      const amqp_table_t *_Nullable client_properties,
                                      const char *user, const char *password);

/*
 * glibc malloc: serve blocks up to `bytes` from the heap instead of mmap, keep up to `bytes` of
 * free memory at the top of a heap instead of handing it back to the kernel at once, and create
 * at most `arenas` arenas (mallopt M_MMAP_THRESHOLD, M_TRIM_THRESHOLD and M_ARENA_MAX). A zero
 * `bytes` leaves the thresholds alone, a zero `arenas` the arena count. Returns 1 when what was
 * asked was applied, 0 when mallopt refused a value (glibc caps the mmap threshold at 32 MiB on
 * 64-bit), -1 where the C library is not glibc.
 */
int ifw_malloc_keep_freed(size_t bytes, int arenas);

/* memmem (memmem.c): where `needle` first occurs in `haystack`, or NULL; linear in the haystack. */
const void *_Nullable ifw_memmem(const void *_Nonnull haystack, size_t haystack_length, const void *_Nonnull needle,
                                 size_t needle_length);

/* IDNA 2008 with the UTS #46 mapping (libidn2), as libcurl looks names up. 0 on success, else a negative
 * libidn2 code; *output is then NULL. Free *output with ifw_idna_free. */
int ifw_idna_to_ascii(const char *_Nonnull input, char *_Nullable *_Nonnull output);
int ifw_idna_to_unicode(const char *_Nonnull input, char *_Nullable *_Nonnull output);
void ifw_idna_free(void *_Nullable pointer);

/*
 * libcurl's multi_socket interface on Linux epoll: the socket callback keeps an epoll set in step
 * with the sockets libcurl wants watched, the timer callback records libcurl's next deadline, and an
 * eventfd in the same set wakes a wait from any thread. Unlike curl_multi_perform, which visits
 * every transfer (and polls each one's socket) on every call, curl_multi_socket_action only runs
 * the transfers whose socket is ready or whose timer is due. Only the wake function may be called
 * from another thread than the one driving the multi handle.
 */
typedef struct ifw_curl_events ifw_curl_events;
/* Creates the epoll set and the eventfd and installs the callbacks on `multi`, which the other functions
 * drive; NULL (errno set) on failure. */
ifw_curl_events *_Nullable ifw_curl_events_create(CURLM *_Nonnull multi);
/* Closes both descriptors. Call after curl_multi_cleanup, whose socket callbacks still use them. */
void ifw_curl_events_destroy(ifw_curl_events *_Nonnull events);
/* Makes the current or next wait return at once (any thread). 0, or -1 with errno. */
int ifw_curl_events_wake(ifw_curl_events *_Nonnull events);
/* Waits up to `timeout_ms` (-1: no limit), less when libcurl's deadline comes first, for ready sockets
 * or a wake. Returns the number of ready sockets (a wake counts none), or -1 with errno. */
int ifw_curl_events_wait(ifw_curl_events *_Nonnull events, int timeout_ms);
/* Hands the sockets of the last wait to curl_multi_socket_action, then runs libcurl's timers if their
 * deadline has come. The first failing code, else CURLM_OK. */
CURLMcode ifw_curl_events_act(ifw_curl_events *_Nonnull events);

/* CRC-32 by carry-less multiplication (crc32_fold.c). ifw_crc32_fold takes the running register
 * (not inverted on entry or exit), at least 64 bytes, and a length that is a multiple of 16; call
 * it only when ifw_crc32_fold_available() says the processor can. */
int ifw_crc32_fold_available(void);
uint32_t ifw_crc32_fold(uint32_t crc, const uint8_t *_Nonnull buf, size_t length);

/*
 * TLS counters of one fetch engine, from OpenSSL (tls_stats.c). libcurl 7.88 builds an SSL_CTX
 * for every new TLS connection and hands it to CURLOPT_SSL_CTX_FUNCTION after it has given the
 * context its CA store; ifw_tls_ssl_ctx_callback is that function, with the stats as
 * CURLOPT_SSL_CTX_DATA. It counts:
 * - handshakes completed, and of those, resumed sessions (SSL_session_reused), from an info
 *   callback on the context, once per connection;
 * - CA store loads: a completed handshake whose context had a different X509_STORE than the
 *   previous one. The stats hold a reference to the last store, so a new store can never reuse
 *   its address and pass for the old one. With libcurl's CA cache every connection gets the
 *   cached store; a handshake that fails (a certificate that does not verify) is not seen.
 * It also keeps the engine's TLS session cache: libcurl 7.88's shared cache holds only the 8
 * sessions used last, so the context's new-session callback (libcurl's, wrapped) keeps each
 * origin's latest session ("host:port") in a table of 512, and the info callback offers it before
 * the ClientHello when libcurl has none. Touched only on the thread driving the multi handle.
 * Counters are atomics: written on the thread driving the multi handle, read from any thread.
 */
typedef struct ifw_tls_stats ifw_tls_stats;
typedef struct ifw_tls_counts {
    unsigned long long ca_store_loads;
    unsigned long long handshakes;
    unsigned long long resumed;
} ifw_tls_counts;
ifw_tls_stats *_Nullable ifw_tls_stats_create(void);
/* Drops the reference to the last store and the cached sessions. Call after curl_multi_cleanup and
 * every easy handle's cleanup. */
void ifw_tls_stats_destroy(ifw_tls_stats *_Nonnull stats);
ifw_tls_counts ifw_tls_stats_read(const ifw_tls_stats *_Nonnull stats);
CURLcode ifw_easy_setopt_tls_stats(CURL *_Nonnull easy, ifw_tls_stats *_Nonnull stats);

/* curl_share_setopt with a long (CURLSHOPT_SHARE, CURLSHOPT_UNSHARE). */
CURLSHcode ifw_share_setopt_long(CURLSH *_Nonnull share, CURLSHoption option, long value);

/*
 * Start-up checks of the PEM files the configuration names, read with the OpenSSL that libcurl and
 * rabbitmq-c use (pem_check.c). An encrypted key counts as unreadable: nobody is there to type its
 * password.
 */
/* The certificates in a PEM file; -1 when it cannot be opened or a PEM block in it does not parse. */
int ifw_pem_certificate_count(const char *_Nonnull path);
/* 1 when the file's first PEM private key parses without a password, else 0. */
int ifw_pem_private_key_readable(const char *_Nonnull path);
/* 1 when the first certificate of one file and the private key of the other are a pair, else 0. */
int ifw_pem_key_matches_certificate(const char *_Nonnull certificate_path, const char *_Nonnull key_path);

#endif
