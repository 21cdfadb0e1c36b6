#ifndef HTTPDNS_SESSION_QUEUE_H
#define HTTPDNS_SESSION_QUEUE_H

// A handle on the dispatch queue a URLProtocol method was called on, so later calls to the protocol's client can be
// made on that same queue (see HTTPDNSURLProtocol+SessionQueue.swift for why). Only HTTPDNSURLProtocol imports it.

/// An opaque, retained reference to a dispatch queue.
typedef struct httpdns_session_queue *httpdns_session_queue_ref;

/// The queue the calling block runs on, retained; release it with `httpdns_session_queue_release`. Outside a queue
/// (a thread of its own) libdispatch answers with a global queue, which is still valid to submit to.
httpdns_session_queue_ref _Nonnull httpdns_session_queue_current(void);

/// Releases a reference from `httpdns_session_queue_current`.
void httpdns_session_queue_release(httpdns_session_queue_ref _Nonnull queue);

/// Submits `work(context)` to `queue`, asynchronously.
void httpdns_session_queue_async(
    httpdns_session_queue_ref _Nonnull queue, void *_Nullable context, void (*_Nonnull work)(void *_Nullable));

#endif
