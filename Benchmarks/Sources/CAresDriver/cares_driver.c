// The C baseline for the resolver benchmark: c-ares driven directly, with nothing in between.
#include "cares_driver.h"

#include <ares.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    ares_channel channel;
    int epoll_fd;
    const char *const *names;
    int name_count;
    int total;
    int sent;
    int done;
    cares_driver_result *result;
    struct timespec *send_times;
} driver;

typedef struct {
    driver *d;
    int index;
} query_ref;

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static void sock_state(void *data, ares_socket_t fd, int readable, int writable) {
    driver *d = data;
    struct epoll_event ev;
    memset(&ev, 0, sizeof ev);
    ev.events = (readable ? EPOLLIN : 0) | (writable ? EPOLLOUT : 0);
    ev.data.fd = fd;
    if (!readable && !writable) {
        epoll_ctl(d->epoll_fd, EPOLL_CTL_DEL, fd, &ev);
    } else if (epoll_ctl(d->epoll_fd, EPOLL_CTL_MOD, fd, &ev) != 0 && errno == ENOENT) {
        epoll_ctl(d->epoll_fd, EPOLL_CTL_ADD, fd, &ev);
    }
}

static void send_next(driver *d);

static void on_answer(void *arg, int status, int timeouts, unsigned char *abuf, int alen) {
    (void)timeouts;
    query_ref *ref = arg;
    driver *d = ref->d;
    struct ares_addrttl ttls[256];
    int count = 256;
    if (status == ARES_SUCCESS && ares_parse_a_reply(abuf, alen, NULL, ttls, &count) == ARES_SUCCESS && count > 0) {
        d->result->answered++;
    } else {
        d->result->failed++;
    }
    if (d->result->latencies_us) {
        struct timespec *t = &d->send_times[ref->index];
        d->result->latencies_us[ref->index] = now_us() - (t->tv_sec * 1e6 + t->tv_nsec / 1e3);
    }
    d->done++;
    free(ref);
    if (status != ARES_EDESTRUCTION) send_next(d);
}

static void send_next(driver *d) {
    if (d->sent >= d->total) return;
    query_ref *ref = malloc(sizeof *ref);
    ref->d = d;
    ref->index = d->sent++;
    clock_gettime(CLOCK_MONOTONIC, &d->send_times[ref->index]);
    ares_query(d->channel, d->names[ref->index % d->name_count], 1 /* C_IN */, 1 /* A */, on_answer, ref);
}

int cares_driver_run(const char *server, const char *const *names, int name_count, int total, int in_flight,
                     cares_driver_result *result) {
    driver d;
    memset(&d, 0, sizeof d);
    d.names = names;
    d.name_count = name_count;
    d.total = total;
    d.result = result;
    result->answered = 0;
    result->failed = 0;
    d.send_times = calloc((size_t)total, sizeof *d.send_times);
    d.epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    if (d.epoll_fd < 0 || !d.send_times) return errno;

    struct ares_options options;
    memset(&options, 0, sizeof options);
    options.timeout = 2000;
    options.tries = 2;
    options.sock_state_cb = sock_state;
    options.sock_state_cb_data = &d;
    options.socket_receive_buffer_size = 4 << 20;
    options.flags = ARES_FLAG_NOCHECKRESP;
    int mask = ARES_OPT_TIMEOUTMS | ARES_OPT_TRIES | ARES_OPT_SOCK_STATE_CB | ARES_OPT_SOCK_RCVBUF | ARES_OPT_FLAGS;
    int status = ares_init_options(&d.channel, &options, mask);
    if (status != ARES_SUCCESS) return status;
    status = ares_set_servers_ports_csv(d.channel, server);
    if (status != ARES_SUCCESS) {
        ares_destroy(d.channel);
        return status;
    }

    double start = now_us();
    for (int i = 0; i < in_flight; i++) send_next(&d);
    struct epoll_event events[128];
    while (d.done < total) {
        struct timeval tv, *next = ares_timeout(d.channel, NULL, &tv);
        int timeout_ms = next ? (int)((next->tv_sec * 1000000L + next->tv_usec + 999) / 1000) : -1;
        int n = epoll_wait(d.epoll_fd, events, 128, timeout_ms);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            ares_process_fd(d.channel, ARES_SOCKET_BAD, ARES_SOCKET_BAD);
            continue;
        }
        for (int i = 0; i < n; i++) {
            int fd = events[i].data.fd;
            ares_socket_t r = (events[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) ? fd : ARES_SOCKET_BAD;
            ares_socket_t w = (events[i].events & EPOLLOUT) ? fd : ARES_SOCKET_BAD;
            ares_process_fd(d.channel, r, w);
        }
    }
    result->elapsed_seconds = (now_us() - start) / 1e6;
    ares_destroy(d.channel);
    close(d.epoll_fd);
    free(d.send_times);
    return 0;
}
