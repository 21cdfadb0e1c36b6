#ifndef HTTPDNS_CNETLINK_H
#define HTTPDNS_CNETLINK_H

#include <stdint.h>

// The two system calls of the network-change watcher that Swift's Glibc module does not declare (the netlink socket
// address and setns need _GNU_SOURCE and linux/ headers). Only HTTPDNS's Network folder imports it.

/// The rtnetlink groups for address and route changes of both families (RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR |
/// RTMGRP_IPV4_ROUTE | RTMGRP_IPV6_ROUTE) and links (RTMGRP_LINK).
uint32_t httpdns_netlink_route_groups(void);

/// Opens a non-blocking, close-on-exec NETLINK_ROUTE socket bound to `groups`; the descriptor, or -errno.
int httpdns_netlink_open(uint32_t groups);

/// Moves the calling thread into the network namespace at `path` (`/var/run/netns/NAME`); 0, or -errno.
int httpdns_enter_network_namespace(const char *_Nonnull path);

#endif
