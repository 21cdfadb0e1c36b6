# Shell helpers shared by the benchmark scripts (sourced, not run).

# A free loopback port: free_port [STREAM|DGRAM] (TCP by default).
free_port() {
    python3 -c "import socket; s=socket.socket(socket.AF_INET, socket.SOCK_${1:-STREAM}); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])"
}

# A port of 127.0.0.1 free for both UDP and TCP (a DNS listener takes both).
free_dns_port() {
    python3 -c "
import socket
while True:
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(('127.0.0.1', 0)); port = u.getsockname()[1]
    t = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        t.bind(('127.0.0.1', port)); print(port); break
    except OSError:
        pass
"
}

# A throw-away CA (DIR/ca.pem) and a certificate for doh.bench and 127.0.0.1 signed by it (DIR/doh.pem, DIR/doh.key).
make_certificate() {
    local dir="$1"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 -subj "/CN=bench CA" \
        -keyout "$dir/ca.key" -out "$dir/ca.pem" -addext basicConstraints=critical,CA:TRUE 2>/dev/null
    openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "/CN=doh.bench" \
        -keyout "$dir/doh.key" -out "$dir/doh.csr" 2>/dev/null
    printf 'subjectAltName=DNS:doh.bench,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' > "$dir/doh.ext"
    openssl x509 -req -in "$dir/doh.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" -CAcreateserial -days 2 \
        -extfile "$dir/doh.ext" -out "$dir/doh.pem" 2>/dev/null
}

# The release build of hostsctl from the package at ROOT, built first: release_hostsctl ROOT prints its path.
release_hostsctl() {
    (cd "$1" && swift build -c release --product hostsctl >&2)
    echo "$(cd "$1" && swift build -c release --show-bin-path)/hostsctl"
}

# A work directory ($work), removed at exit after every process whose pid is in $pids is stopped.
start_lab() {
    work="$(mktemp -d)"
    pids=()
    trap stop_lab EXIT
}
stop_lab() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}

# The settings of a measured hostsctl serve, on stdout:
#   serve_settings NAME UPSTREAM DOH_PORT DNS_PORT DOT_PORT [BINARY]
# its cache (in $work/NAME-cache.json), then c-ares to UPSTREAM (ADDRESS:PORT); no probes (the zones' addresses have
# no listeners); DoH with the lab's certificate ($work/doh.pem), plain DNS and DoT on 127.0.0.1. The zones' addresses
# are loopback ones, which a server facing the internet refuses from upstreams unless serve.probeGuardedAddresses
# lets them through (a build from before that key would refuse them, and so measure its upstream path).
# The load comes from one address standing for a whole fleet, as dnsdist (which has neither limit by default)
# sees it: the per-network rates (UDP, and the verified one of TCP, DoT and HTTP), connection share and TLS handshake
# rate, which would throttle that one address, are lifted, for a BINARY (a baseline build) only with the keys it
# knows (an unknown key is an error).
serve_settings() {
    local lifted='"maxConnectionsPerClient": 1024, "rateLimitPerSecond": 0'
    # The keys are read whole first: `grep -q` stops reading at the first match, and under `pipefail` the binary's
    # SIGPIPE would then make the test false, now and then, lifting nothing (UDP measured at its 500/s limit).
    local keys=""
    [ -z "${6:-}" ] || keys="$("$6" config keys 2>/dev/null || true)"
    if [ -z "${6:-}" ] || grep -q 'serve.udpRateLimitPerSecond' <<<"$keys"; then
        lifted="$lifted"', "udpRateLimitPerSecond": 0, "tlsHandshakesPerSecond": 1000000'
    fi
    cat <<SETTINGS
{
  "sources": { "order": ["cache", "cares"], "systemFallback": false },
  "reload": { "intervalMs": 0 },
  "cares": { "servers": ["$2"] },
  "probe": { "enabled": false },
  "cache": { "path": "$work/$1-cache.json" },
  "serve": { "listen": "127.0.0.1:$3", "certificate": "$work/doh.pem", "privateKey": "$work/doh.key",
             "dns": { "listen": "127.0.0.1:$4" }, "dot": { "listen": "127.0.0.1:$5" }, "probeGuardedAddresses": true,
             $lifted }
}
SETTINGS
}
