#include "session_queue.h"

// libdispatch's own header is not on the C include path of a SwiftPM target on Linux (it ships inside the Swift
// toolchain's resource directory), so the four entry points used here are declared with their C ABI: a queue is a
// pointer to an opaque object. libdispatch itself is always linked, since Foundation depends on it.
typedef void *httpdns_dispatch_object;
extern httpdns_dispatch_object dispatch_get_current_queue(void);
extern void dispatch_retain(httpdns_dispatch_object object);
extern void dispatch_release(httpdns_dispatch_object object);
extern void dispatch_async_f(httpdns_dispatch_object queue, void *context, void (*work)(void *));

httpdns_session_queue_ref httpdns_session_queue_current(void) {
    httpdns_dispatch_object queue = dispatch_get_current_queue();
    dispatch_retain(queue);
    return (httpdns_session_queue_ref)queue;
}

void httpdns_session_queue_release(httpdns_session_queue_ref queue) {
    dispatch_release((httpdns_dispatch_object)queue);
}

void httpdns_session_queue_async(httpdns_session_queue_ref queue, void *context, void (*work)(void *)) {
    dispatch_async_f((httpdns_dispatch_object)queue, context, work);
}
