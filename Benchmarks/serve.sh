#!/usr/bin/env bash
# hostsctl serve against dnsdist's DoH listener, side by side in one run, on loopback, release build.
#   Benchmarks/serve.sh [--requests N] [--rounds R] [--seconds S] [--baseline HOSTSCTL] [--profile one|many|dot|udp]
#                       [--flood QPS] [--no-ceiling] [--console]
#
# --console gives hostsctl serve an admin listener and polls it as the dashboard page does, once a second
# (/stats.json, and /stats.json?name=n0.test for a name's steering), for the whole run; the baseline server gets an
# admin listener too, never asked. With --baseline naming the same binary, "against the baseline build" is then what
# the polling costs.
#
# --no-ceiling leaves H2Ceiling out (its release build compiles SwiftNIO once more, in Benchmarks/.build).
#
# --flood measures the latency shapes again while an attacker on another /24 (dnsperf bound to 127.0.1.1) sends QPS
# UDP queries a second for new names under flood.test, whose server never answers (dnsmasq forwards that domain to
# a socket that reads and drops): misses that hold the attacker's upstream places and go nowhere. Each server's p99
# under the flood is printed beside its p99 without, from the same run (target: at most 1.10x for hostsctl serve).
# Then the control: the same rate of names every cache holds, from the same /24, so the cost of the misses shows
# apart from the cost of the packets.
#
# --profile records hostsctl serve with perf (call graphs) during one more run of that shape and prints the top of
# perf report (self time by symbol), and of the --baseline server after it; the data is left in
# Benchmarks/.perf/serve-SHAPE.data (baseline-SHAPE.data). Frame-pointer call
# graphs by default; HTTPDNS_PERF_CALLGRAPH="--call-graph dwarf,16384" gives whole Swift call chains for perf script.
#
# --baseline runs a fourth server, another hostsctl binary (an earlier build, say), with the same settings, so a
# change is measured against what it changed in the same run.
#
# Both servers answer the same 200 names (n0.test ... n199.test, from one dnsmasq) over TLS + HTTP/2 from their caches:
# dnsdist from its packet cache, hostsctl serve from its scored IP cache (c-ares to the same dnsmasq behind it).
# Both caches are filled first. Both are set up as an operator would on this 2-core machine: dnsdist with two DoH
# listeners on the port (reusePort, so two DoH frontend threads), hostsctl serve with its defaults (one event
# loop per core, connections handed to them in turn, answers kept per loop while steady). A third server,
# H2Ceiling (Benchmarks/Sources/H2Ceiling), is the ceiling of the stack hostsctl serve was built on before nghttp2:
# swift-nio-http2 behind NIOSSL answering every request with one fixed answer and doing nothing else (one
# connection only). Then, alternating the servers in each round (each round starting with the next server), in two
# shapes:
#   one       one TLS connection, 100 concurrent streams (h2load -c 1 -m 100)
#   many      64 TLS connections, 8 concurrent streams each (h2load -c 64 -m 8, two h2load threads)
#   peak      N RFC 8484 GET requests (the median of R rounds), with the server's CPU time per 1,000 requests
#             (user + system, from /proc/PID/stat, all threads)
#   latency   h2load at half of each server's own measured peak rate for S seconds; p50 and p99 from h2load's
#             per-request log
# Then DNS over TLS and plain UDP, dnsperf against dnsdist's DoT and UDP listeners and hostsctl serve's (and the baseline's)
# (serve.dot.listen, serve.dns.listen), the same names from the same caches:
#   dot       one TLS connection, 100 queries outstanding, pipelined (dnsperf -m dot -c 1 -q 100)
#   udp       100 queries outstanding from one client socket (dnsperf -m udp -c 1 -q 100)
set -euo pipefail
requests=200000
rounds=3
seconds=10
baseline=""
profile=""
flood=""
ceiling_too=1
console=""
while [ "$#" -gt 0 ]; do
    case "$1" in
        --requests) requests="$2"; shift 2 ;;
        --rounds) rounds="$2"; shift 2 ;;
        --seconds) seconds="$2"; shift 2 ;;
        --baseline) baseline="$(cd "$(dirname "$2")" && pwd)/$(basename "$2")"; shift 2 ;;
        --profile) profile="$2"; shift 2 ;;
        --flood) flood="$2"; shift 2 ;;
        --no-ceiling) ceiling_too=""; shift ;;
        --console) console=1; shift ;;
        *) echo "usage: $0 [--requests N] [--rounds R] [--seconds S] [--baseline HOSTSCTL] [--profile one|many|dot|udp] [--flood QPS] [--no-ceiling] [--console]" >&2
           exit 64 ;;
    esac
done
here="$(cd "$(dirname "$0")" && pwd)"
root="$here/.."
# shellcheck source=lab/common.sh
. "$here/lab/common.sh"
"$root/scripts/install-deps.sh" benchmarks
hostsctl="$(release_hostsctl "$root")"
if [ -n "$ceiling_too" ]; then
    (cd "$here" && swift build -c release --product H2Ceiling >&2)
    ceiling="$(cd "$here" && swift build -c release --show-bin-path)/H2Ceiling"
fi

start_lab

# A DNS server that never answers (for --flood): it reads every query and drops it.
sink_port="$(free_port DGRAM)"
python3 -c "
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(('127.0.0.1', $sink_port))
while True: s.recv(4096)
" &
pids+=($!)

# The zone, served by dnsmasq (loopback addresses only: nothing here ever connects outside 127.0.0.0/8);
# flood.test goes to the sink.
dnsmasq_port="$(free_port DGRAM)"
{
    echo "port=$dnsmasq_port"; echo "listen-address=127.0.0.1"; echo "bind-interfaces"; echo "no-resolv"
    echo "no-hosts"; echo "no-poll"; echo "local=/test/"; echo "pid-file="; echo "server=/flood.test/127.0.0.1#$sink_port"
    for i in $(seq 0 199); do echo "host-record=n$i.test,127.1.$((i / 256)).$((i % 256)),3600"; done
} > "$work/dnsmasq.conf"
dnsmasq --keep-in-foreground --conf-file="$work/dnsmasq.conf" --log-facility=- 2>/dev/null &
pids+=($!)

# One throw-away CA and one certificate for both servers.
make_certificate "$work"

# dnsdist: DoH over TLS with a packet cache, in front of dnsmasq.
dnsdist_port="$(free_port)"
dnsdist_dot_port="$(free_port)"
dnsdist_udp_port="$(free_dns_port)"
cat > "$work/dnsdist.conf" <<EOF
setSecurityPollSuffix("")
setACL({"127.0.0.0/8"})
setLocal("127.0.0.1:$(free_port DGRAM)")
newServer({address="127.0.0.1:$dnsmasq_port", checkName="n0.test.", checkInterval=60})
getPool(""):setCache(newPacketCache(10000, {maxTTL=86400, minTTL=0}))
addDOHLocal("127.0.0.1:$dnsdist_port", "$work/doh.pem", "$work/doh.key", "/dns-query", {reusePort=true})
addDOHLocal("127.0.0.1:$dnsdist_port", "$work/doh.pem", "$work/doh.key", "/dns-query", {reusePort=true})
addTLSLocal("127.0.0.1:$dnsdist_dot_port", "$work/doh.pem", "$work/doh.key", {reusePort=true})
addTLSLocal("127.0.0.1:$dnsdist_dot_port", "$work/doh.pem", "$work/doh.key", {reusePort=true})
addLocal("127.0.0.1:$dnsdist_udp_port", {reusePort=true})
addLocal("127.0.0.1:$dnsdist_udp_port", {reusePort=true})
EOF
dnsdist --supervised --disable-syslog -C "$work/dnsdist.conf" >"$work/dnsdist.log" 2>&1 &
pids+=($!)
declare -A pid_of
pid_of[dnsdist]=$!

# hostsctl serve: cache, then c-ares to the same dnsmasq (serve_settings, lab/common.sh); the baseline gets the same
# settings.
serve_port="$(free_port)"
serve_dns_port="$(free_dns_port)"
serve_dot_port="$(free_port)"
serve_settings serve "127.0.0.1:$dnsmasq_port" "$serve_port" "$serve_dns_port" "$serve_dot_port" > "$work/serve.json"
# No admin listener (its default port would be shared by both servers; a build from before it warns of the
# unknown variable and goes on).
export HOSTSCTL_SERVE_ADMIN_LISTEN=none
serve_admin="none"
[ -z "$console" ] || serve_admin="127.0.0.1:$(free_port)"
HOSTSCTL_SERVE_ADMIN_LISTEN="$serve_admin" HOSTSCTL_LOG_LEVEL=warning "$hostsctl" serve --config "$work/serve.json" \
    >"$work/serve.log" 2>&1 &
pids+=($!)
pid_of[serve]=$!
if [ -n "$console" ]; then
    # What an open dashboard asks, once a second, until this script ends.
    (
        while kill -0 $$ 2>/dev/null; do
            curl -s -o /dev/null "http://$serve_admin/stats.json" || true
            curl -s -o /dev/null "http://$serve_admin/stats.json?name=n0.test" || true
            sleep 1
        done
    ) &
    pids+=($!)
fi
servers="dnsdist serve${ceiling_too:+ ceiling}"
if [ -n "$baseline" ]; then
    baseline_port="$(free_port)"
    baseline_dns_port="$(free_dns_port)"
    baseline_dot_port="$(free_port)"
    serve_settings baseline "127.0.0.1:$dnsmasq_port" "$baseline_port" "$baseline_dns_port" "$baseline_dot_port" \
        "$baseline" > "$work/baseline.json"
    # With --console the baseline has an admin listener too, never asked: the difference is the polling alone.
    baseline_admin="none"
    [ -z "$console" ] || baseline_admin="127.0.0.1:$(free_port)"
    HOSTSCTL_SERVE_ADMIN_LISTEN="$baseline_admin" HOSTSCTL_LOG_LEVEL=warning "$baseline" serve \
        --config "$work/baseline.json" >"$work/baseline.log" 2>&1 &
    pids+=($!)
    pid_of[baseline]=$!
    servers="$servers baseline"
fi

ceiling_port=""
if [ -n "$ceiling_too" ]; then
    ceiling_port="$(free_port)"
    "$ceiling" "$ceiling_port" "$work/doh.pem" "$work/doh.key" >"$work/ceiling.log" 2>&1 &
    pids+=($!)
    pid_of[ceiling]=$!
fi

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
[ -z "$ceiling_too" ] || uris "$ceiling_port" > "$work/ceiling.uris"
[ -z "$baseline" ] || uris "$baseline_port" > "$work/baseline.uris"
for port in "$dnsdist_port" "$serve_port" ${ceiling_port:+"$ceiling_port"} ${baseline:+"$baseline_port"}; do
    for _ in $(seq 100); do
        python3 -c "import socket; socket.create_connection(('127.0.0.1', $port), 0.1)" 2>/dev/null && break
        sleep 0.1
    done
done

# The h2load options of a shape.
shape_options() {
    case "$1" in
        one) echo "-c 1 -t 1 -m 100" ;;
        many) echo "-c 64 -t 2 -m 8" ;;
    esac
}
# The servers measured in a shape (H2Ceiling listens on one loop: it is the one-connection ceiling only).
shape_servers() {
    case "$1" in
        one) echo "$servers" ;;
        many) echo "${servers/ ceiling/}" ;;
    esac
}
# A process's CPU time so far in milliseconds (user + system, every thread).
cpu_ms() {
    awk -v hz="$(getconf CLK_TCK)" '{ print ($14 + $15) * 1000 / hz }' "/proc/$1/stat"
}
# One h2load run; prints "REQ_PER_SECOND SUCCEEDED".
load() {
    local name="$1" shape="$2"; shift 2
    local out
    # shellcheck disable=SC2046
    out="$(h2load $(shape_options "$shape") --input-file "$work/$name.uris" "$@" 2>&1)"
    local rate ok
    rate="$(echo "$out" | sed -n 's/^finished in [^,]*, \([0-9.]*\) req\/s.*/\1/p')"
    # Answers with status 200 only (h2load's "succeeded" counts any status).
    ok="$(echo "$out" | sed -n 's/^status codes: \([0-9]*\) 2xx.*/\1/p')"
    echo "${rate:-0} ${ok:-0}"
}
# Fill both caches (each name asked several times) and check that every answer is a 200. At most 16 requests at
# once: hostsctl serve lets one client network wait for 64 upstream lookups at a time (serve.
# maxUpstreamLookupsPerNetwork) and answers 503 past that, and 200 misses at once from one client would pass it.
for name in $servers; do
    read -r _ ok < <(load "$name" one -n 2000 -m 16)
    if [ "$ok" != 2000 ]; then
        echo "$name: only $ok of 2000 warm-up requests succeeded" >&2
        cat "$work/$name.log" >&2 || true
        exit 1
    fi
done

median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
# rotated K WORDS...: the words, starting at the K-th (mod their count). Each round starts with another server, so
# none always runs right after the same one (on two cores, what ran before shows in what runs next).
rotated() {
    local k="$1"; shift
    local words=("$@") n=$#
    for i in $(seq 0 $((n - 1))); do echo "${words[$(((k + i) % n))]}"; done
}
declare -A peaks cpus p50s p99s rates
for shape in one many; do
    for name in $(shape_servers "$shape"); do : > "$work/$name.$shape.peaks"; : > "$work/$name.$shape.cpu"; done
done
for round in $(seq "$rounds"); do
    for shape in one many; do
        # shellcheck disable=SC2046
        for name in $(rotated "$round" $(shape_servers "$shape")); do
            before="$(cpu_ms "${pid_of[$name]}")"
            read -r rate ok < <(load "$name" "$shape" -n "$requests")
            after="$(cpu_ms "${pid_of[$name]}")"
            [ "$ok" = "$requests" ] || { echo "$name: $ok of $requests succeeded" >&2; exit 1; }
            cpu="$(echo "($after - $before) / ($requests / 1000)" | bc -l)"
            echo "$rate" >> "$work/$name.$shape.peaks"
            echo "$cpu" >> "$work/$name.$shape.cpu"
            printf 'round %d  %-4s %-8s %10.0f req/s  %6.2f ms CPU per 1,000\n' "$round" "$shape" "$name" "$rate" "$cpu"
        done
    done
done
for shape in one many; do
    for name in $(shape_servers "$shape"); do
        peaks[$name.$shape]="$(median < "$work/$name.$shape.peaks")"
        cpus[$name.$shape]="$(median < "$work/$name.$shape.cpu")"
    done
done

# Latency at half of each server's own peak: h2load --rps paces each client connection (the rate is split over
# them); the log has one line per request (start time, status, duration in microseconds).
percentiles() {
    awk '{ print $3 }' "$1" | sort -n | awk '{ v[NR] = $1 } END {
        p50 = v[int(NR * 0.50) > 0 ? int(NR * 0.50) : 1]; p99 = v[int(NR * 0.99) > 0 ? int(NR * 0.99) : 1]
        printf "%d %.2f %.2f\n", NR, p50 / 1000, p99 / 1000 }'
}
# latency_phase SUFFIX: each server's p50 and p99 at half its peak, kept under SHAPE and SHAPE+SUFFIX.
latency_phase() {
    local suffix="$1" shape connections name rate per_connection count p50 p99
    for shape in one many; do
        connections=1
        [ "$shape" = one ] || connections=64
        for name in $(shape_servers "$shape"); do
            [ "$name" != ceiling ] || continue
            rate="$(printf '%.0f' "$(echo "${peaks[$name.$shape]} / 2" | bc -l)")"
            per_connection="$(( (rate + connections - 1) / connections ))"
            # shellcheck disable=SC2046
            h2load $(shape_options "$shape") --input-file "$work/$name.uris" --rps "$per_connection" -D "$seconds" \
                --log-file "$work/$name.$shape$suffix.latency" >/dev/null 2>&1
            read -r count p50 p99 < <(percentiles "$work/$name.$shape$suffix.latency")
            p50s[$name.$shape$suffix]="$p50"
            p99s[$name.$shape$suffix]="$p99"
            rates[$name.$shape$suffix]="$rate"
            printf 'latency%s  %-4s %-8s at %6d req/s: %d requests, p50 %s ms, p99 %s ms\n' \
                "$suffix" "$shape" "$name" "$rate" "$count" "$p50" "$p99"
        done
    done
}
latency_phase ""
# flood_phase SUFFIX QUERY_FILE: the latency shapes again, for each server, while dnsperf on another /24 sends the
# queries of QUERY_FILE at the --flood rate.
flood_phase() {
    local suffix="$1" queries="$2" name port flood_pid saved_servers
    for name in dnsdist serve ${baseline:+baseline}; do
        case "$name" in
            dnsdist) port="$dnsdist_udp_port" ;;
            serve) port="$serve_dns_port" ;;
            baseline) port="$baseline_dns_port" ;;
        esac
        dnsperf -m udp -s 127.0.0.1 -p "$port" -a 127.0.1.1 -c 4 -q 1000 -Q "$flood" -l $((seconds * 2 + 30)) \
            -d "$queries" >"$work/$name$suffix.log" 2>&1 &
        flood_pid=$!
        sleep 2
        saved_servers="$servers"
        servers="$name"
        latency_phase "$suffix"
        servers="$saved_servers"
        kill "$flood_pid" 2>/dev/null || true
        wait "$flood_pid" 2>/dev/null || true
    done
}
if [ -n "$flood" ]; then
    # New names under flood.test for every query, from another /24 than the clients measured, at a fixed rate:
    # each server sees a miss it must send upstream (or refuse at its bound) for every one.
    python3 -c "
import random
for i in range(1000000): print(f'f{i}-{random.getrandbits(32):08x}.flood.test A')
" > "$work/flood.queries"
    flood_phase ".flood" "$work/flood.queries"
    # The control: the same rate of names every cache holds, from the same /24. What a flood of misses costs the
    # other clients beyond this is the cost of the misses; up to this it is the cost of the packets, which any
    # client sending that many queries has.
    for i in $(seq 0 199); do echo "n$i.test A"; done > "$work/hits.queries"
    flood_phase ".hits" "$work/hits.queries"
fi
# DNS over TLS and UDP with dnsperf: the same names, the caches already filled.
for i in $(seq 0 199); do echo "n$i.test A"; done > "$work/dnsperf.queries"
# One dnsperf run; prints "QUERIES_PER_SECOND LOST".
dnsperf_run() {
    local mode="$1" port="$2" out
    out="$(dnsperf -m "$mode" -s 127.0.0.1 -p "$port" -c 1 -q 100 -l "$seconds" -d "$work/dnsperf.queries" 2>&1)"
    echo "$(echo "$out" | sed -n 's/^ *Queries per second: *\([0-9.]*\).*/\1/p') \
        $(echo "$out" | sed -n 's/^ *Queries lost: *\([0-9]*\).*/\1/p')"
}
declare -A dns_rates dns_cpus
for mode in dot udp; do
    for name in dnsdist serve ${baseline:+baseline}; do : > "$work/$name.$mode.rates"; : > "$work/$name.$mode.cpu"; done
done
for round in $(seq "$rounds"); do
    for mode in dot udp; do
        for name in $(rotated "$round" dnsdist serve ${baseline:+baseline}); do
            case "$name.$mode" in
                dnsdist.dot) port="$dnsdist_dot_port" ;;
                dnsdist.udp) port="$dnsdist_udp_port" ;;
                serve.dot) port="$serve_dot_port" ;;
                serve.udp) port="$serve_dns_port" ;;
                baseline.dot) port="$baseline_dot_port" ;;
                baseline.udp) port="$baseline_dns_port" ;;
            esac
            before="$(cpu_ms "${pid_of[$name]}")"
            read -r rate lost < <(dnsperf_run "$mode" "$port")
            after="$(cpu_ms "${pid_of[$name]}")"
            cpu="$(echo "($after - $before) / ($rate * $seconds / 1000)" | bc -l)"
            echo "$rate" >> "$work/$name.$mode.rates"
            echo "$cpu" >> "$work/$name.$mode.cpu"
            printf 'round %d  %-4s %-8s %10.0f queries/s  %6.2f ms CPU per 1,000  lost %s\n' \
                "$round" "$mode" "$name" "$rate" "$cpu" "${lost:-?}"
        done
    done
done
for mode in dot udp; do
    for name in dnsdist serve ${baseline:+baseline}; do
        dns_rates[$name.$mode]="$(median < "$work/$name.$mode.rates")"
        dns_cpus[$name.$mode]="$(median < "$work/$name.$mode.cpu")"
    done
done

# profile_one NAME DOT_PORT DNS_PORT: perf record of one server during one more run of the profiled shape.
profile_one() {
    local name="$1" dot_port="$2" dns_port="$3"
    local data="$here/.perf/$name-$profile.data"
    perf record -F 2000 ${HTTPDNS_PERF_CALLGRAPH:--g} -o "$data" -p "${pid_of[$name]}" >/dev/null 2>&1 &
    local perf_pid=$!
    sleep 1
    case "$profile" in
        dot) dnsperf_run dot "$dot_port" >/dev/null ;;
        udp) dnsperf_run udp "$dns_port" >/dev/null ;;
        *) load "$name" "$profile" -n "$requests" >/dev/null ;;
    esac
    kill -INT "$perf_pid"; wait "$perf_pid" || true
    echo "perf report, $name, shape $profile (self time, symbols at 1 % or more):"
    perf report -i "$data" --no-children --sort dso,symbol --percent-limit 1 --stdio 2>/dev/null \
        | grep -E '^ +[0-9.]+%' | sed 's/  */ /g' | head -40
}
if [ -n "$profile" ]; then
    mkdir -p "$here/.perf"
    profile_one serve "$serve_dot_port" "$serve_dns_port"
    # The baseline too, so a change shows as a difference between two reports of the same run.
    [ -z "$baseline" ] || profile_one baseline "$baseline_dot_port" "$baseline_dns_port"
fi
ratio() { printf '%.2f' "$(echo "$1 / $2" | bc -l)"; }
echo
echo "| shape | server | peak req/s | x dnsdist | CPU ms per 1,000 | x dnsdist | p50 / p99 at half peak (ms) |"
echo "| --- | --- | --- | --- | --- | --- | --- |"
for shape in one many; do
    for name in $(shape_servers "$shape"); do
        latency="-"
        [ -z "${p99s[$name.$shape]:-}" ] || latency="${p50s[$name.$shape]} / ${p99s[$name.$shape]}"
        printf '| %s | %s | %.0f | %s | %.2f | %s | %s |\n' "$shape" "$name" "${peaks[$name.$shape]}" \
            "$(ratio "${peaks[$name.$shape]}" "${peaks[dnsdist.$shape]}")" "${cpus[$name.$shape]}" \
            "$(ratio "${cpus[$name.$shape]}" "${cpus[dnsdist.$shape]}")" "$latency"
    done
done
for mode in dot udp; do
    for name in dnsdist serve ${baseline:+baseline}; do
        printf '| %s | %s | %.0f | %s | %.2f | %s | |\n' "$mode" "$name" "${dns_rates[$name.$mode]}" \
            "$(ratio "${dns_rates[$name.$mode]}" "${dns_rates[dnsdist.$mode]}")" "${dns_cpus[$name.$mode]}" \
            "$(ratio "${dns_cpus[$name.$mode]}" "${dns_cpus[dnsdist.$mode]}")"
    done
done
echo
printf 'targets: DoT >= 0.5x dnsdist (%s), UDP >= 0.5x dnsdist (%s)\n' \
    "$(ratio "${dns_rates[serve.dot]}" "${dns_rates[dnsdist.dot]}")" \
    "$(ratio "${dns_rates[serve.udp]}" "${dns_rates[dnsdist.udp]}")"
printf 'targets: one connection >= 0.5x dnsdist (%s), 64 connections >= 1.0x (%s), p99 at half peak < 5 ms (%s / %s ms), CPU per 1,000 within 1.5x (%s / %s)\n' \
    "$(ratio "${peaks[serve.one]}" "${peaks[dnsdist.one]}")" "$(ratio "${peaks[serve.many]}" "${peaks[dnsdist.many]}")" \
    "${p99s[serve.one]}" "${p99s[serve.many]}" \
    "$(ratio "${cpus[serve.one]}" "${cpus[dnsdist.one]}")" "$(ratio "${cpus[serve.many]}" "${cpus[dnsdist.many]}")"
if [ -n "$flood" ]; then
    for name in dnsdist serve ${baseline:+baseline}; do
        printf 'under a flood of %s new names a second from another /24: %s p99 %s -> %s ms (one connection, %sx), %s -> %s ms (64 connections, %sx)\n' \
            "$flood" "$name" "${p99s[$name.one]}" "${p99s[$name.one.flood]}" \
            "$(ratio "${p99s[$name.one.flood]}" "${p99s[$name.one]}")" "${p99s[$name.many]}" \
            "${p99s[$name.many.flood]}" "$(ratio "${p99s[$name.many.flood]}" "${p99s[$name.many]}")"
        printf '  the same rate of cached names (the control): %s p99 %s -> %s ms (one connection, %sx), %s -> %s ms (64 connections, %sx)\n' \
            "$name" "${p99s[$name.one]}" "${p99s[$name.one.hits]}" \
            "$(ratio "${p99s[$name.one.hits]}" "${p99s[$name.one]}")" "${p99s[$name.many]}" \
            "${p99s[$name.many.hits]}" "$(ratio "${p99s[$name.many.hits]}" "${p99s[$name.many]}")"
    done
fi
if [ -n "$baseline" ]; then
    printf 'against the baseline build: one connection %sx, 64 connections %sx, DoT %sx, UDP %sx\n' \
        "$(ratio "${peaks[serve.one]}" "${peaks[baseline.one]}")" "$(ratio "${peaks[serve.many]}" "${peaks[baseline.many]}")" \
        "$(ratio "${dns_rates[serve.dot]}" "${dns_rates[baseline.dot]}")" "$(ratio "${dns_rates[serve.udp]}" "${dns_rates[baseline.udp]}")"
fi
