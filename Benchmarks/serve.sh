#!/usr/bin/env bash
# hostsctl serve against dnsdist's DoH listener, side by side in one run, on loopback, release build.
#   Benchmarks/serve.sh [--requests N] [--rounds R] [--seconds S] [--baseline HOSTSCTL]
#
# --baseline runs a fourth server, another hostsctl binary (an earlier build, say), with the same settings, so a
# change is measured against what it changed in the same run.
#
# Both servers answer the same 200 names (n0.test ... n199.test, from one dnsmasq) over TLS + HTTP/2 from their caches:
# dnsdist from its packet cache, hostsctl serve from its scored IP cache (c-ares to the same dnsmasq behind it).
# Both caches are filled first. A third server, H2Ceiling (Benchmarks/Sources/H2Ceiling), is the ceiling of the stack
# hostsctl serve is built on: swift-nio-http2 behind NIOSSL in the same pipeline shape, answering every request with
# one fixed answer and doing nothing else. Then, alternating the three servers in each round:
#   peak      h2load, one TLS connection, 100 concurrent streams, N RFC 8484 GET requests (the median of R rounds)
#   latency   h2load at half of each server's own measured peak rate for S seconds; p50 and p99 from h2load's
#             per-request log
set -euo pipefail
requests=200000
rounds=3
seconds=10
baseline=""
while [ "$#" -gt 0 ]; do
    case "$1" in
        --requests) requests="$2"; shift 2 ;;
        --rounds) rounds="$2"; shift 2 ;;
        --seconds) seconds="$2"; shift 2 ;;
        --baseline) baseline="$(cd "$(dirname "$2")" && pwd)/$(basename "$2")"; shift 2 ;;
        *) echo "usage: $0 [--requests N] [--rounds R] [--seconds S] [--baseline HOSTSCTL]" >&2; exit 64 ;;
    esac
done
here="$(cd "$(dirname "$0")" && pwd)"
root="$here/.."
"$root/scripts/install-deps.sh" benchmarks
(cd "$root" && swift build -c release --product hostsctl >&2)
hostsctl="$(cd "$root" && swift build -c release --show-bin-path)/hostsctl"
(cd "$here" && swift build -c release --product H2Ceiling >&2)
ceiling="$(cd "$here" && swift build -c release --show-bin-path)/H2Ceiling"

work="$(mktemp -d)"
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
# shellcheck source=lab/common.sh
. "$here/lab/common.sh"

# The zone, served by dnsmasq (loopback addresses only: nothing here ever connects outside 127.0.0.0/8).
dnsmasq_port="$(free_port DGRAM)"
{
    echo "port=$dnsmasq_port"; echo "listen-address=127.0.0.1"; echo "bind-interfaces"; echo "no-resolv"
    echo "no-hosts"; echo "no-poll"; echo "local=/test/"; echo "pid-file="
    for i in $(seq 0 199); do echo "host-record=n$i.test,127.1.$((i / 256)).$((i % 256)),3600"; done
} > "$work/dnsmasq.conf"
dnsmasq --keep-in-foreground --conf-file="$work/dnsmasq.conf" --log-facility=- 2>/dev/null &
pids+=($!)

# One throw-away CA and one certificate for both servers.
make_certificate "$work"

# dnsdist: DoH over TLS with a packet cache, in front of dnsmasq.
dnsdist_port="$(free_port)"
cat > "$work/dnsdist.conf" <<EOF
setSecurityPollSuffix("")
setACL({"127.0.0.0/8"})
setLocal("127.0.0.1:$(free_port DGRAM)")
newServer({address="127.0.0.1:$dnsmasq_port", checkName="n0.test.", checkInterval=60})
getPool(""):setCache(newPacketCache(10000, {maxTTL=86400, minTTL=0}))
addDOHLocal("127.0.0.1:$dnsdist_port", "$work/doh.pem", "$work/doh.key", "/dns-query")
EOF
dnsdist --supervised --disable-syslog -C "$work/dnsdist.conf" >"$work/dnsdist.log" 2>&1 &
pids+=($!)

# hostsctl serve: cache, then c-ares to the same dnsmasq; no probes (the zone's addresses have no listeners). The
# zone's addresses are loopback ones, which a server facing the internet refuses from upstreams unless
# serve.probeGuardedAddresses lets them through (a baseline from before that key gets the settings without it).
serve_settings() {
    cat <<EOF
{
  "sources": { "order": ["cache", "cares"], "systemFallback": false },
  "reload": { "intervalMs": 0 },
  "cares": { "servers": ["127.0.0.1:$dnsmasq_port"] },
  "probe": { "enabled": false },
  "cache": { "path": "$work/$1-cache.json" },
  "serve": { "listen": "127.0.0.1:$2", "certificate": "$work/doh.pem", "privateKey": "$work/doh.key"$3 }
}
EOF
}
serve_port="$(free_port)"
serve_settings serve "$serve_port" ', "probeGuardedAddresses": true' > "$work/serve.json"
HOSTSCTL_LOG_LEVEL=warning "$hostsctl" serve --config "$work/serve.json" >"$work/serve.log" 2>&1 &
pids+=($!)
servers="dnsdist serve ceiling"
if [ -n "$baseline" ]; then
    baseline_port="$(free_port)"
    serve_settings baseline "$baseline_port" "" > "$work/baseline.json"
    HOSTSCTL_LOG_LEVEL=warning "$baseline" serve --config "$work/baseline.json" >"$work/baseline.log" 2>&1 &
    pids+=($!)
    servers="$servers baseline"
fi

ceiling_port="$(free_port)"
"$ceiling" "$ceiling_port" "$work/doh.pem" "$work/doh.key" >"$work/ceiling.log" 2>&1 &
pids+=($!)

# The RFC 8484 GET requests (A queries, ID 0, RD), one per name.
uris() {
    python3 - "$1" <<'PY'
import base64, struct, sys
for i in range(200):
    labels = b"".join(bytes([len(l)]) + l.encode() for l in f"n{i}.test".split("."))
    query = struct.pack(">HHHHHH", 0, 0x0100, 1, 0, 0, 0) + labels + b"\0" + struct.pack(">HH", 1, 1)
    print(f"https://127.0.0.1:{sys.argv[1]}/dns-query?dns=" + base64.urlsafe_b64encode(query).decode().rstrip("="))
PY
}
uris "$dnsdist_port" > "$work/dnsdist.uris"
uris "$serve_port" > "$work/serve.uris"
uris "$ceiling_port" > "$work/ceiling.uris"
[ -z "$baseline" ] || uris "$baseline_port" > "$work/baseline.uris"
for port in "$dnsdist_port" "$serve_port" "$ceiling_port" ${baseline:+"$baseline_port"}; do
    for _ in $(seq 100); do
        python3 -c "import socket; socket.create_connection(('127.0.0.1', $port), 0.1)" 2>/dev/null && break
        sleep 0.1
    done
done

# One h2load run; prints "REQ_PER_SECOND SUCCEEDED".
load() {
    local name="$1"; shift
    local out
    out="$(h2load -c 1 -t 1 -m 100 --input-file "$work/$name.uris" "$@" 2>&1)"
    local rate ok
    rate="$(echo "$out" | sed -n 's/^finished in [^,]*, \([0-9.]*\) req\/s.*/\1/p')"
    ok="$(echo "$out" | sed -n 's/^requests: .* \([0-9]*\) succeeded.*/\1/p')"
    echo "${rate:-0} ${ok:-0}"
}
# Fill both caches (each name asked several times) and check that every answer is a 200.
for name in $servers; do
    read -r _ ok < <(load "$name" -n 2000)
    if [ "$ok" != 2000 ]; then
        echo "$name: only $ok of 2000 warm-up requests succeeded" >&2
        cat "$work/$name.log" >&2 || true
        exit 1
    fi
done

median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
declare -A peaks
for name in $servers; do : > "$work/$name.peaks"; done
for round in $(seq "$rounds"); do
    for name in $servers; do
        read -r rate ok < <(load "$name" -n "$requests")
        [ "$ok" = "$requests" ] || { echo "$name: $ok of $requests succeeded" >&2; exit 1; }
        echo "$rate" >> "$work/$name.peaks"
        printf 'round %d  %-8s %10.0f req/s\n' "$round" "$name" "$rate"
    done
done
for name in $servers; do peaks[$name]="$(median < "$work/$name.peaks")"; done

# Latency at half of each server's own peak: h2load --rps paces the one client; the log has one line per request
# (start time, status, duration in microseconds).
percentiles() {
    awk '{ print $3 }' "$1" | sort -n | awk '{ v[NR] = $1 } END {
        p50 = v[int(NR * 0.50) > 0 ? int(NR * 0.50) : 1]; p99 = v[int(NR * 0.99) > 0 ? int(NR * 0.99) : 1]
        printf "%d %.2f %.2f\n", NR, p50 / 1000, p99 / 1000 }'
}
declare -A p99s
for name in $servers; do
    rate="$(printf '%.0f' "$(echo "${peaks[$name]} / 2" | bc -l)")"
    h2load -c 1 -t 1 -m 100 --input-file "$work/$name.uris" --rps "$rate" -D "$seconds" \
        --log-file "$work/$name.latency" >/dev/null 2>&1
    read -r count p50 p99 < <(percentiles "$work/$name.latency")
    p99s[$name]="$p99"
    printf 'latency  %-8s at %6d req/s: %d requests, p50 %s ms, p99 %s ms\n' "$name" "$rate" "$count" "$p50" "$p99"
done
echo
printf 'peak: hostsctl serve %.0f req/s, dnsdist %.0f req/s: %.2fx (target >= 0.5x)\n' \
    "${peaks[serve]}" "${peaks[dnsdist]}" "$(echo "${peaks[serve]} / ${peaks[dnsdist]}" | bc -l)"
printf 'p99 at half of peak: hostsctl serve %s ms, dnsdist %s ms (target < 5 ms)\n' "${p99s[serve]}" "${p99s[dnsdist]}"
printf 'stack ceiling: H2Ceiling %.0f req/s, %.2fx dnsdist; hostsctl serve reaches %.2f of it\n' \
    "${peaks[ceiling]}" "$(echo "${peaks[ceiling]} / ${peaks[dnsdist]}" | bc -l)" \
    "$(echo "${peaks[serve]} / ${peaks[ceiling]}" | bc -l)"
if [ -n "$baseline" ]; then
    printf 'against the baseline build: peak %.2fx (%.0f req/s), p99 at half of peak %s ms against %s ms\n' \
        "$(echo "${peaks[serve]} / ${peaks[baseline]}" | bc -l)" "${peaks[baseline]}" "${p99s[serve]}" "${p99s[baseline]}"
fi
