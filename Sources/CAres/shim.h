#ifndef HTTPDNS_CARES_SHIM_H
#define HTTPDNS_CARES_SHIM_H

// c-ares itself, plus the Linux readiness APIs the event loop drives it with.
#include <ares.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>

// prctl is variadic, which Swift cannot call: name the calling thread (at most 15 bytes are kept).
static inline int httpdns_set_thread_name(const char *name) {
    return prctl(PR_SET_NAME, (unsigned long)name, 0UL, 0UL, 0UL);
}

#endif
