#include "CShims.h"
#include <limits.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

CURLcode ifw_easy_setopt_long(CURL *easy, CURLoption option, long value) {
    return curl_easy_setopt(easy, option, value);
}
CURLcode ifw_easy_setopt_pointer(CURL *easy, CURLoption option, void *value) {
    return curl_easy_setopt(easy, option, value);
}
CURLcode ifw_easy_setopt_string(CURL *easy, CURLoption option, const char *value) {
    return curl_easy_setopt(easy, option, value);
}
CURLcode ifw_easy_setopt_off_t(CURL *easy, CURLoption option, curl_off_t value) {
    return curl_easy_setopt(easy, option, value);
}
CURLcode ifw_easy_setopt_slist(CURL *easy, CURLoption option, struct curl_slist *value) {
    return curl_easy_setopt(easy, option, value);
}
CURLcode ifw_easy_setopt_write_callback(CURL *easy, ifw_write_callback callback) {
    return curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, callback);
}
CURLcode ifw_easy_setopt_header_callback(CURL *easy, ifw_header_callback callback) {
    return curl_easy_setopt(easy, CURLOPT_HEADERFUNCTION, callback);
}
CURLcode ifw_easy_setopt_xferinfo_callback(CURL *easy, ifw_xferinfo_callback callback) {
    return curl_easy_setopt(easy, CURLOPT_XFERINFOFUNCTION, callback);
}
CURLcode ifw_easy_setopt_opensocket_callback(CURL *easy, ifw_opensocket_callback callback) {
    return curl_easy_setopt(easy, CURLOPT_OPENSOCKETFUNCTION, callback);
}
CURLcode ifw_easy_setopt_read_callback(CURL *easy, ifw_read_callback callback) {
    return curl_easy_setopt(easy, CURLOPT_READFUNCTION, callback);
}
CURLcode ifw_easy_getinfo_long(CURL *easy, CURLINFO info, long *value) {
    return curl_easy_getinfo(easy, info, value);
}
CURLcode ifw_easy_getinfo_off_t(CURL *easy, CURLINFO info, curl_off_t *value) {
    return curl_easy_getinfo(easy, info, value);
}
CURLcode ifw_easy_getinfo_string(CURL *easy, CURLINFO info, const char **value) {
    return curl_easy_getinfo(easy, info, value);
}
CURLcode ifw_easy_getinfo_pointer(CURL *easy, CURLINFO info, void **value) {
    return curl_easy_getinfo(easy, info, value);
}
CURLMcode ifw_multi_setopt_long(CURLM *multi, CURLMoption option, long value) {
    return curl_multi_setopt(multi, option, value);
}
CURLMcode ifw_multi_setopt_pointer(CURLM *multi, CURLMoption option, void *value) {
    return curl_multi_setopt(multi, option, value);
}
CURLSHcode ifw_share_setopt_long(CURLSH *share, CURLSHoption option, long value) {
    return curl_share_setopt(share, option, value);
}
amqp_rpc_reply_t ifw_amqp_login_plain(amqp_connection_state_t state, const char *vhost, int channel_max,
                                      int frame_max, int heartbeat, const amqp_table_t *client_properties,
                                      const char *user, const char *password) {
    return amqp_login_with_properties(state, vhost, channel_max, frame_max, heartbeat, client_properties,
                                      AMQP_SASL_METHOD_PLAIN, user, password);
}

int ifw_malloc_keep_freed(size_t bytes, int arenas) {
#if defined(__GLIBC__)
    if (bytes > INT_MAX || arenas < 0) return 0;
    if (bytes > 0) {
        if (mallopt(M_MMAP_THRESHOLD, (int)bytes) != 1) return 0;
        if (mallopt(M_TRIM_THRESHOLD, (int)bytes) != 1) return 0;
    }
    if (arenas > 0 && mallopt(M_ARENA_MAX, arenas) != 1) return 0;
    return 1;
#else
    (void)bytes;
    (void)arenas;
    return -1;
#endif
}
