#ifndef HTTPDNS_CARES_DRIVER_H
#define HTTPDNS_CARES_DRIVER_H

/// The outcome of one run of the C baseline.
typedef struct {
    double elapsed_seconds;   ///< wall time from the first send to the last answer
    long answered;            ///< queries answered with at least one A record
    long failed;              ///< queries that failed
    double *latencies_us;     ///< per-query latency in microseconds (caller-allocated, `total` entries), or NULL
} cares_driver_result;

/// Sends `total` A queries for `names` (round robin) to `server` ("IP:PORT"), keeping `in_flight` outstanding,
/// driving c-ares from epoll readiness events exactly like the Swift resolver, and parsing every answer with
/// ares_parse_a_reply. Returns 0 on success, or a c-ares / errno code.
int cares_driver_run(const char *server, const char *const *names, int name_count, int total, int in_flight,
                     cares_driver_result *result);

#endif
