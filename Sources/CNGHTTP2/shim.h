#ifndef HTTPDNS_NGHTTP2_SHIM_H
#define HTTPDNS_NGHTTP2_SHIM_H

// nghttp2 (the HTTP/2 library of curl, h2load, dnsdist and unbound), the server side of hostsctl serve's HTTP/2.
#include <nghttp2/nghttp2.h>

#endif
