#include "CShims.h"
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#if defined(__linux__)
#include <time.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>

/* Ready sockets taken per wait; more stay ready (level-triggered) for the next one. */
#define IFW_EVENTS_MAX 256

struct ifw_curl_events {
    CURLM *multi;
    int epoll_fd;
    int wake_fd;
    /* CLOCK_MONOTONIC nanoseconds at which libcurl wants CURL_SOCKET_TIMEOUT; -1: no timer. */
    int64_t deadline_ns;
    int ready;
    struct epoll_event events[IFW_EVENTS_MAX];
};

static int64_t ifw_now_ns(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
}

/* Marks a socket as in the epoll set (curl_multi_assign's pointer); libcurl forgets it with the socket. */
static char ifw_watched;

static int ifw_socket_callback(CURL *easy, curl_socket_t socket, int what, void *userp, void *socketp) {
    (void)easy;
    struct ifw_curl_events *events = userp;
    if (what == CURL_POLL_REMOVE) {
        /* Fails harmlessly when libcurl already closed the socket (closing leaves the set). */
        epoll_ctl(events->epoll_fd, EPOLL_CTL_DEL, socket, NULL);
        return 0;
    }
    struct epoll_event event = {0};
    event.events = ((what & CURL_POLL_IN) ? EPOLLIN : 0) | ((what & CURL_POLL_OUT) ? EPOLLOUT : 0);
    event.data.fd = socket;
    /* A socket libcurl has not marked is new to the set (a keep-alive connection is removed after
     * each transfer and comes back with the next): one call, not a failing MOD and then an ADD. The
     * other operation stays as the fallback should the set and the mark ever disagree. */
    int first = socketp == NULL ? EPOLL_CTL_ADD : EPOLL_CTL_MOD;
    int second = socketp == NULL ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
    if (epoll_ctl(events->epoll_fd, first, socket, &event) != 0 &&
        epoll_ctl(events->epoll_fd, second, socket, &event) != 0) {
        return 0;
    }
    if (socketp == NULL) curl_multi_assign(events->multi, socket, &ifw_watched);
    return 0;
}

static int ifw_timer_callback(CURLM *multi, long timeout_ms, void *userp) {
    (void)multi;
    struct ifw_curl_events *events = userp;
    events->deadline_ns = timeout_ms < 0 ? -1 : ifw_now_ns() + (int64_t)timeout_ms * 1000000;
    return 0;
}

ifw_curl_events *ifw_curl_events_create(CURLM *multi) {
    struct ifw_curl_events *events = calloc(1, sizeof *events);
    if (events == NULL) return NULL;
    events->multi = multi;
    events->deadline_ns = -1;
    events->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    events->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    struct epoll_event wake = {.events = EPOLLIN, .data.fd = events->wake_fd};
    if (events->epoll_fd < 0 || events->wake_fd < 0 ||
        epoll_ctl(events->epoll_fd, EPOLL_CTL_ADD, events->wake_fd, &wake) != 0) {
        int saved = errno;
        ifw_curl_events_destroy(events);
        errno = saved;
        return NULL;
    }
    if (curl_multi_setopt(multi, CURLMOPT_SOCKETFUNCTION, ifw_socket_callback) != CURLM_OK ||
        curl_multi_setopt(multi, CURLMOPT_SOCKETDATA, events) != CURLM_OK ||
        curl_multi_setopt(multi, CURLMOPT_TIMERFUNCTION, ifw_timer_callback) != CURLM_OK ||
        curl_multi_setopt(multi, CURLMOPT_TIMERDATA, events) != CURLM_OK) {
        ifw_curl_events_destroy(events);
        errno = EINVAL;
        return NULL;
    }
    return events;
}

void ifw_curl_events_destroy(ifw_curl_events *events) {
    if (events->epoll_fd >= 0) close(events->epoll_fd);
    if (events->wake_fd >= 0) close(events->wake_fd);
    free(events);
}

int ifw_curl_events_wake(ifw_curl_events *events) {
    uint64_t one = 1;
    /* EAGAIN: the counter is full, so a wake is pending anyway. */
    if (write(events->wake_fd, &one, sizeof one) < 0 && errno != EAGAIN) return -1;
    return 0;
}

int ifw_curl_events_wait(ifw_curl_events *events, int timeout_ms) {
    events->ready = 0;
    if (events->deadline_ns >= 0) {
        int64_t left_ns = events->deadline_ns - ifw_now_ns();
        /* Rounded up, so that a deadline under a millisecond away does not spin. */
        int64_t left_ms = left_ns <= 0 ? 0 : (left_ns + 999999) / 1000000;
        if (timeout_ms < 0 || left_ms < timeout_ms) timeout_ms = (int)left_ms;
    }
    int count = epoll_wait(events->epoll_fd, events->events, IFW_EVENTS_MAX, timeout_ms);
    if (count < 0) return errno == EINTR ? 0 : -1;
    int ready = 0;
    for (int i = 0; i < count; i++) {
        if (events->events[i].data.fd == events->wake_fd) {
            uint64_t value;
            (void)read(events->wake_fd, &value, sizeof value);
            continue;
        }
        events->events[ready++] = events->events[i];
    }
    events->ready = ready;
    return ready;
}

CURLMcode ifw_curl_events_act(ifw_curl_events *events) {
    CURLM *multi = events->multi;
    CURLMcode first = CURLM_OK;
    int running = 0;
    int ready = events->ready;
    events->ready = 0;
    for (int i = 0; i < ready; i++) {
        uint32_t flags = events->events[i].events;
        int mask = ((flags & EPOLLIN) ? CURL_CSELECT_IN : 0) | ((flags & EPOLLOUT) ? CURL_CSELECT_OUT : 0) |
                   ((flags & (EPOLLERR | EPOLLHUP)) ? CURL_CSELECT_ERR : 0);
        /* A socket that an earlier action closed is unknown to libcurl by now, which ignores it. */
        CURLMcode code = curl_multi_socket_action(multi, events->events[i].data.fd, mask, &running);
        if (code != CURLM_OK && first == CURLM_OK) first = code;
    }
    if (events->deadline_ns >= 0 && events->deadline_ns <= ifw_now_ns()) {
        /* One-shot: libcurl sets the next deadline from inside the action if it needs one. */
        events->deadline_ns = -1;
        CURLMcode code = curl_multi_socket_action(multi, CURL_SOCKET_TIMEOUT, 0, &running);
        if (code != CURLM_OK && first == CURLM_OK) first = code;
    }
    return first;
}

#else
/* Without epoll (a development build on macOS): curl_multi_perform and curl_multi_poll, which visit
 * every transfer on each turn but behave the same. */
struct ifw_curl_events {
    CURLM *multi;
};

ifw_curl_events *ifw_curl_events_create(CURLM *multi) {
    struct ifw_curl_events *events = calloc(1, sizeof *events);
    if (events != NULL) events->multi = multi;
    return events;
}

void ifw_curl_events_destroy(ifw_curl_events *events) { free(events); }

int ifw_curl_events_wake(ifw_curl_events *events) {
    return curl_multi_wakeup(events->multi) == CURLM_OK ? 0 : (errno = EINVAL, -1);
}

int ifw_curl_events_wait(ifw_curl_events *events, int timeout_ms) {
    return curl_multi_poll(events->multi, NULL, 0, timeout_ms < 0 ? 60000 : timeout_ms, NULL) == CURLM_OK
               ? 0 : (errno = EINVAL, -1);
}

CURLMcode ifw_curl_events_act(ifw_curl_events *events) {
    int running = 0;
    return curl_multi_perform(events->multi, &running);
}
#endif
