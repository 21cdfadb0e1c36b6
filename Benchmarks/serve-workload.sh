#!/usr/bin/env bash
# hostsctl serve against dnsdist and unbound on a realistic workload, all in one run, on loopback, release build.
#   Benchmarks/serve-workload.sh [--rounds R] [--seconds S] [--names N] [--transports "udp tcp dot doh"]
#                                [--rate QPS] [--miss-rate QPS] [--baseline HOSTSCTL] [--hostsctl HOSTSCTL]
#                                [--profile TRANSPORT]
#
# The day of a DNS service rather than its best case: N names (100,000) with Zipf popularity (s = 1) from an
# authoritative server, TTLs from 5 s to 1 h (some expire during the run), 5 % of the queries for names never asked
# before (misses for every cache), half of the queries with an EDNS Client Subnet option for one of 300 /24s, and
# 1 % of the names answered by the client's network (PowerDNS LUA view() records, as a CDN's authoritative does).
# The zone and the query files come from Benchmarks/lab/workload.py (seeded: every run asks the same).
#
# The authoritative: PowerDNS (pdns-server, bind backend, its caches off), one instance per server measured, each on
# its own loopback port, so that the queries each one saw are exactly that server's upstream queries.
# The servers, each set up as an operator would on this 2-core machine:
#   dnsdist   its packet cache (100,000 entries) in front of its PowerDNS; two listeners per transport (reusePort)
#   unbound   a caching forwarder to its PowerDNS, two threads, the subnetcache module (ECS answers kept per network)
#   serve     hostsctl serve with its defaults: its cache, then c-ares to its PowerDNS
#   baseline  (--baseline) another hostsctl binary with the same settings
# Every server is warmed first: S seconds of UDP from a file of its own (not counted).
#
# Then, in each of R rounds (each round starting with the next server), for each transport (dnsperf -m udp, tcp, dot;
# h2load for DoH; 4 sockets or connections, 100 queries outstanding), each server for S seconds from that round's
# query file (the same file for every server; its never-seen names are the file's own). DoH goes through h2load
# (RFC 8484 GET, 4 connections of 25 streams) because Debian's dnsperf 2.10 counts most DoH answers of dnsdist and
# hostsctl serve as lost though every one arrives with status 200 (its own count of HTTP/2 statuses says so; the
# symptom of DNS-OARC/dnsperf#240), while unbound's are read correctly.
#   qps       queries per second answered (closed loop: dnsperf keeps 100 outstanding), and the share lost (no answer
#             within 5 s) and answered SERVFAIL
#   cpu       the server's CPU time per 1,000 queries (user + system, all threads, from /proc/PID/stat)
# After the rounds, per transport and server, latency at a fixed rate (--rate, 5,000 queries a second by default,
# under every server's peak) for S seconds: p50 and p99 of dnsperf's per-query times. Then the same for misses alone
# (--miss-rate, 1,000 a second by default): every query a name never asked before, so the latency of a miss (the path
# to the upstream and back, which is what the workload's p99 is made of: about a quarter of its queries miss in
# serve), and the server's CPU time per miss.
# At the end, per server: resident memory (VmRSS) and its growth since the start, per distinct name asked; the
# cache hit ratio as 1 - (queries its PowerDNS saw) / (queries it answered).
#
# --hostsctl measures that binary as serve instead of building this tree's (release).
# --profile TRANSPORT records hostsctl serve with perf during one more run of that transport and prints the top of
# perf report; the data is left in Benchmarks/.perf/workload-TRANSPORT.data. Frame-pointer call graphs by default;
# HTTPDNS_PERF_CALLGRAPH="--call-graph dwarf,16384" gives whole Swift call chains.
set -euo pipefail

rounds=3
seconds=10
names=100000
transports="udp tcp dot doh"
rate=5000
miss_rate=1000
baseline=""
hostsctl=""
profile=""
while [ $# -gt 0 ]; do
    case "$1" in
        --rounds) rounds="$2"; shift 2 ;;
        --seconds) seconds="$2"; shift 2 ;;
        --names) names="$2"; shift 2 ;;
        --transports) transports="$2"; shift 2 ;;
        --rate) rate="$2"; shift 2 ;;
        --miss-rate) miss_rate="$2"; shift 2 ;;
        --baseline) baseline="$2"; shift 2 ;;
        --hostsctl) hostsctl="$2"; shift 2 ;;
        --profile) profile="$2"; shift 2 ;;
        *)
            echo "usage: $0 [--rounds R] [--seconds S] [--names N] [--transports LIST] [--rate QPS] [--miss-rate QPS] [--baseline HOSTSCTL] [--hostsctl HOSTSCTL] [--profile TRANSPORT]" >&2
            exit 64 ;;
    esac
done
here="$(cd "$(dirname "$0")" && pwd)"
root="$here/.."
# shellcheck source=lab/common.sh
. "$here/lab/common.sh"
"$root/scripts/install-deps.sh" benchmarks
if [ -z "$hostsctl" ]; then
    hostsctl="$(release_hostsctl "$root")"
fi

start_lab

servers="dnsdist unbound serve${baseline:+ baseline}"
declare -A pid_of pdns_port_of udp_port_of dot_port_of doh_port_of

# The zone, and one PowerDNS per server.
python3 "$here/lab/workload.py" zone --names "$names" > "$work/work.test.zone"
for name in $servers; do
    mkdir -p "$work/pdns-$name"
    echo "zone \"work.test\" { type master; file \"$work/work.test.zone\"; };" > "$work/pdns-$name/named.conf"
    port="$(free_dns_port)"
    cat > "$work/pdns-$name/pdns.conf" <<EOF
launch=bind
bind-config=$work/pdns-$name/named.conf
local-address=127.0.0.1
local-port=$port
enable-lua-records=yes
edns-subnet-processing=yes
socket-dir=$work/pdns-$name
guardian=no
daemon=no
disable-syslog=yes
loglevel=3
webserver=no
security-poll-suffix=
query-cache-ttl=0
cache-ttl=0
negquery-cache-ttl=0
EOF
    pdns_server --config-dir="$work/pdns-$name" >"$work/pdns-$name.log" 2>&1 &
    pids+=($!)
    pdns_port_of[$name]="$port"
    udp_port_of[$name]="$(free_dns_port)"
    dot_port_of[$name]="$(free_port)"
    doh_port_of[$name]="$(free_port)"
done
# The queries a server's PowerDNS has seen (UDP and TCP).
upstream_queries() {
    local total=0 value
    for counter in udp-queries tcp-queries; do
        value="$(pdns_control --config-dir="$work/pdns-$1" show "$counter" 2>/dev/null || echo 0)"
        total=$((total + ${value:-0}))
    done
    echo "$total"
}

make_certificate "$work"

# dnsdist: its packet cache in front of its PowerDNS.
cat > "$work/dnsdist.conf" <<EOF
setSecurityPollSuffix("")
setACL({"127.0.0.0/8"})
newServer({address="127.0.0.1:${pdns_port_of[dnsdist]}", checkName="ns.work.test.", checkInterval=60})
getPool(""):setCache(newPacketCache(100000, {maxTTL=86400, minTTL=0}))
addLocal("127.0.0.1:${udp_port_of[dnsdist]}", {reusePort=true})
addLocal("127.0.0.1:${udp_port_of[dnsdist]}", {reusePort=true})
addTLSLocal("127.0.0.1:${dot_port_of[dnsdist]}", "$work/doh.pem", "$work/doh.key", {reusePort=true})
addTLSLocal("127.0.0.1:${dot_port_of[dnsdist]}", "$work/doh.pem", "$work/doh.key", {reusePort=true})
addDOHLocal("127.0.0.1:${doh_port_of[dnsdist]}", "$work/doh.pem", "$work/doh.key", "/dns-query", {reusePort=true})
addDOHLocal("127.0.0.1:${doh_port_of[dnsdist]}", "$work/doh.pem", "$work/doh.key", "/dns-query", {reusePort=true})
EOF
dnsdist --supervised --disable-syslog -C "$work/dnsdist.conf" >"$work/dnsdist.log" 2>&1 &
pids+=($!)
pid_of[dnsdist]=$!

# unbound: a caching forwarder (every name, the root included, to its PowerDNS: nothing leaves loopback). test. is
# one of unbound's default local zones (RFC 6761), so it is turned off here.
cat > "$work/unbound.conf" <<EOF
server:
    interface: 127.0.0.1@${udp_port_of[unbound]}
    interface: 127.0.0.1@${dot_port_of[unbound]}
    interface: 127.0.0.1@${doh_port_of[unbound]}
    tls-port: ${dot_port_of[unbound]}
    https-port: ${doh_port_of[unbound]}
    tls-service-key: "$work/doh.key"
    tls-service-pem: "$work/doh.pem"
    http-notls-downstream: no
    num-threads: 2
    so-reuseport: yes
    username: ""
    chroot: ""
    directory: "$work"
    pidfile: "$work/unbound.pid"
    use-syslog: no
    logfile: "$work/unbound.log"
    verbosity: 0
    access-control: 127.0.0.0/8 allow
    do-not-query-localhost: no
    local-zone: "test." nodefault
    module-config: "subnetcache iterator"
    send-client-subnet: 127.0.0.1
    max-client-subnet-ipv4: 24
    qname-minimisation: no
    harden-referral-path: no
remote-control:
    control-enable: yes
    control-interface: "$work/unbound.ctl"
    control-use-cert: no
forward-zone:
    name: "."
    forward-addr: 127.0.0.1@${pdns_port_of[unbound]}
EOF
unbound -d -c "$work/unbound.conf" >"$work/unbound.out" 2>&1 &
pids+=($!)
pid_of[unbound]=$!

# hostsctl serve: its defaults; its cache, then c-ares to its PowerDNS (serve_settings, lab/common.sh).
# Each has an admin listener of its own, asked only at the end: its count of queries refused by the per-network bound
# on upstream lookups (serve.maxUpstreamLookupsPerNetwork) says how many of its SERVFAIL answers that bound gave.
declare -A admin_port_of
for name in serve ${baseline:+baseline}; do
    binary="$hostsctl"
    [ "$name" = serve ] || binary="$baseline"
    admin_port_of[$name]="$(free_port)"
    serve_settings "$name" "127.0.0.1:${pdns_port_of[$name]}" "${doh_port_of[$name]}" "${udp_port_of[$name]}" \
        "${dot_port_of[$name]}" "$binary" > "$work/$name.json"
    HOSTSCTL_SERVE_ADMIN_LISTEN="127.0.0.1:${admin_port_of[$name]}" HOSTSCTL_LOG_LEVEL=warning \
        "$binary" serve --config "$work/$name.json" >"$work/$name.log" 2>&1 &
    pids+=($!)
    pid_of[$name]=$!
done

# Every server (and every PowerDNS) answers before anything is measured.
for name in $servers; do
    for port in "${pdns_port_of[$name]}" "${udp_port_of[$name]}"; do
        for _ in $(seq 100); do
            kdig @127.0.0.1 -p "$port" +short +time=1 +retry=0 w1.work.test A 2>/dev/null | grep -q . && break
            sleep 0.2
        done
    done
    kdig @127.0.0.1 -p "${udp_port_of[$name]}" +short +time=2 +retry=0 w1.work.test A | grep -q . || {
        echo "$name does not answer on ${udp_port_of[$name]}" >&2
        cat "$work/$name.log" "$work/unbound.log" "$work/dnsdist.log" 2>/dev/null | tail -20 >&2 || true
        exit 1
    }
done

# The query files: one to warm each server, one per round and transport (shared by the servers). At most 60,000
# queries a second are needed; dnsperf starts a file again from its beginning when it runs out.
count=$((60000 * seconds))
queries() { python3 "$here/lab/workload.py" queries --names "$names" --count "$1" --tag "$2" --out "$work/$2.bin"; }
for name in $servers; do queries "$count" "warm$name"; done
for round in $(seq "$rounds"); do
    for transport in $transports; do
        queries "$count" "r$round$transport"
        if [ "$transport" = doh ]; then
            python3 "$here/lab/workload.py" paths --from "$work/r${round}doh.bin" > "$work/r${round}doh.paths"
            for name in $servers; do
                sed "s|^|https://127.0.0.1:${doh_port_of[$name]}|" "$work/r${round}doh.paths" > "$work/r${round}doh.$name.uris"
            done
        fi
    done
done

cpu_ms() { awk -v hz="$(getconf CLK_TCK)" '{ print ($14 + $15) * 1000 / hz }' "/proc/$1/stat"; }
rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }
declare -A rss_start
for name in $servers; do rss_start[$name]="$(rss_kib "${pid_of[$name]}")"; done
# dnsperf's options for TRANSPORT against server NAME.
target() {
    local transport="$1" name="$2"
    case "$transport" in
        udp | tcp) echo "-m $transport -p ${udp_port_of[$name]}" ;;
        dot) echo "-m dot -p ${dot_port_of[$name]}" ;;
    esac
}
# One closed-loop run: prints "QPS COMPLETED LOST_PERCENT SERVFAIL_PERCENT" (for DoH: not answered 200).
run() {
    local transport="$1" name="$2" file="$3" out
    if [ "$transport" = doh ]; then
        out="$(h2load -c 4 -t 1 -m 25 -D "$seconds" --input-file "${file%.bin}.$name.uris" 2>&1)"
        echo "$out" | awk '
            /^finished in/ { gsub(/,/, "", $4); qps = $4 }
            /^requests:/ { total = $2; done = $6 }
            /^status codes:/ { ok = $3 }
            END {
                lost = 0; failed = 0
                if (total > 0) lost = 100 * (total - done) / total
                if (done > ok) failed = 100 * (done - ok) / done
                printf "%s %s %.2f %.2f\n", qps + 0, ok + 0, lost, failed
            }'
        return
    fi
    # shellcheck disable=SC2046
    out="$(dnsperf -B -d "$file" -s 127.0.0.1 $(target "$transport" "$name") -c 4 -q 100 -l "$seconds" -t 5 2>&1)"
    echo "$out" | awk '
        /Queries per second:/ { qps = $4 }
        /Queries completed:/ { completed = $3 }
        /Queries lost:/ { gsub(/[()%]/, "", $4); lost = $4 }
        /Response codes:/ { for (i = 3; i < NF; i += 3) if ($i == "SERVFAIL") { servfail = $(i + 2); gsub(/[(),%]/, "", servfail) } }
        END { printf "%s %s %s %s\n", qps + 0, completed + 0, lost + 0, servfail + 0 }'
}
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
rotated() {
    local k="$1"; shift
    local words=("$@") n=$#
    for i in $(seq 0 $((n - 1))); do echo "${words[$(((k + i) % n))]}"; done
}
declare -A answered
for name in $servers; do
    read -r qps completed lost servfail < <(run udp "$name" "$work/warm$name.bin")
    answered[$name]="$completed"
    printf 'warm-up       %-8s %8.0f q/s  lost %s %%  SERVFAIL %s %%\n' "$name" "$qps" "$lost" "$servfail"
done
for round in $(seq "$rounds"); do
    for transport in $transports; do
        # shellcheck disable=SC2046
        for name in $(rotated "$round" $servers); do
            before="$(cpu_ms "${pid_of[$name]}")"
            read -r qps completed lost servfail < <(run "$transport" "$name" "$work/r$round$transport.bin")
            after="$(cpu_ms "${pid_of[$name]}")"
            answered[$name]=$((${answered[$name]} + completed))
            cpu="$(echo "($after - $before) / (($completed + 1) / 1000)" | bc -l)"
            echo "$qps" >> "$work/$name.$transport.qps"
            echo "$cpu" >> "$work/$name.$transport.cpu"
            echo "$lost" >> "$work/$name.$transport.lost"
            echo "$servfail" >> "$work/$name.$transport.servfail"
            printf 'round %d %-4s %-8s %8.0f q/s  %6.2f ms CPU per 1,000  lost %s %%  SERVFAIL %s %%\n' \
                "$round" "$transport" "$name" "$qps" "$cpu" "$lost" "$servfail"
        done
    done
done

percentiles='{ v[NR] = $1 } END { a = int(NR * 0.5); b = int(NR * 0.99); if (a < 1) a = 1; if (b < 1) b = 1; printf "%.3f %.3f\n", v[a], v[b] }'
# Latency at a fixed rate: prints "P50 P99" in milliseconds for TRANSPORT against server NAME, from FILE (a query file;
# for DoH its .NAME.uris beside it) at RATE queries a second for S seconds. dnsperf -v prints one line per answer, its
# time last; h2load's log one line per request, its duration (microseconds) third.
latency() {
    local transport="$1" name="$2" file="$3" rate="$4"
    if [ "$transport" = doh ]; then
        h2load -c 4 -t 1 -m 25 --rps "$((rate / 4))" -D "$seconds" --input-file "${file%.bin}.$name.uris" \
            --log-file "$work/h2load.log" >/dev/null 2>&1
        awk '{ print $3 / 1000 }' "$work/h2load.log" | sort -n | awk "$percentiles"
    else
        # shellcheck disable=SC2046
        dnsperf -B -d "$file" -s 127.0.0.1 $(target "$transport" "$name") -c 4 -q 100 \
            -Q "$rate" -l "$seconds" -t 5 -v 2>/dev/null | awk '/^> / { print $NF * 1000 }' | sort -n \
            | awk "$percentiles"
    fi
    answered[$name]=$((${answered[$name]} + rate * seconds))
}
for transport in $transports; do
    for name in $servers; do
        latency "$transport" "$name" "$work/r1$transport.bin" "$rate" > "$work/$name.$transport.latency"
    done
done
# Misses alone: every query at --miss-rate asks a name never asked before (a file per transport, the same for every
# server), so p50 and p99 are those of a miss: the server's path to its PowerDNS and back; and the server's CPU time
# per miss (microseconds).
for transport in $transports; do
    python3 "$here/lab/workload.py" queries --names "$names" --count $((miss_rate * seconds * 2)) --new 1 \
        --tag "m$transport" --out "$work/m$transport.bin"
    if [ "$transport" = doh ]; then
        python3 "$here/lab/workload.py" paths --from "$work/mdoh.bin" > "$work/mdoh.paths"
    fi
    for name in $servers; do
        if [ "$transport" = doh ]; then
            sed "s|^|https://127.0.0.1:${doh_port_of[$name]}|" "$work/mdoh.paths" > "$work/mdoh.$name.uris"
        fi
        before="$(cpu_ms "${pid_of[$name]}")"
        latency "$transport" "$name" "$work/m$transport.bin" "$miss_rate" > "$work/$name.$transport.misslatency"
        after="$(cpu_ms "${pid_of[$name]}")"
        echo "($after - $before) * 1000 / ($miss_rate * $seconds)" | bc -l > "$work/$name.$transport.misscpu"
    done
done

if [ -n "$profile" ]; then
    mkdir -p "$here/.perf"
    data="$here/.perf/workload-$profile.data"
    # shellcheck disable=SC2086
    perf record -F 999 ${HTTPDNS_PERF_CALLGRAPH:--g} -p "${pid_of[serve]}" -o "$data" -- sleep "$seconds" >/dev/null 2>&1 &
    recorder=$!
    run "$profile" serve "$work/r1$profile.bin" >/dev/null
    wait "$recorder" || true
    { perf report -i "$data" --no-children --sort symbol --stdio 2>/dev/null | grep -v '^#' | grep '%' | head -40; } || true
fi

distinct="$(cat "$work"/*.bin | python3 -c "
import sys, struct
data = sys.stdin.buffer.read(); names = set(); offset = 0
while offset < len(data):
    (length,) = struct.unpack_from('>H', data, offset); message = data[offset + 2:offset + 2 + length]; offset += 2 + length
    position = 12; labels = []
    while message[position]:
        labels.append(message[position + 1:position + 1 + message[position]]); position += 1 + message[position]
    names.add(b'.'.join(labels))
print(len(names))")"
echo
echo "Medians of $rounds rounds, $seconds s each; $names names (Zipf s = 1), 5 % never-seen names, half with ECS (300 /24s)."
echo "q/s at 100 outstanding on 4 sockets or connections; lost: no answer within 5 s (DoH: none by the end);"
echo "SERVFAIL (DoH: not 200); CPU per 1,000 queries;"
echo "p50/p99 at $rate q/s; misses alone (every name never asked before) at $miss_rate q/s, and CPU per miss. Memory: resident at the end, growth since the start per distinct name asked ($distinct)."
echo "Hit ratio: 1 - (queries its PowerDNS saw) / (queries it answered)."
echo
printf '| transport | server | q/s | vs dnsdist | lost | SERVFAIL | CPU per 1,000 | p50 | p99 | miss p50 | miss p99 | CPU per miss |\n'
printf '| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n'
for transport in $transports; do
    reference="$(median < "$work/dnsdist.$transport.qps")"
    for name in $servers; do
        qps="$(median < "$work/$name.$transport.qps")"
        read -r p50 p99 < "$work/$name.$transport.latency"
        read -r miss50 miss99 < "$work/$name.$transport.misslatency"
        printf '| %s | %s | %.0f | %.2fx | %s %% | %s %% | %.2f ms | %s ms | %s ms | %s ms | %s ms | %.0f µs |\n' \
            "$transport" "$name" "$qps" "$(echo "$qps / $reference" | bc -l)" \
            "$(median < "$work/$name.$transport.lost")" "$(median < "$work/$name.$transport.servfail")" \
            "$(median < "$work/$name.$transport.cpu")" "$p50" "$p99" "$miss50" "$miss99" \
            "$(cat "$work/$name.$transport.misscpu")"
    done
done
echo
printf '| server | memory at the end | growth | per distinct name | upstream queries | answered | hit ratio |\n'
printf '| --- | --- | --- | --- | --- | --- | --- |\n'
for name in $servers; do
    end="$(rss_kib "${pid_of[$name]}")"
    upstream="$(upstream_queries "$name")"
    printf '| %s | %d MiB | %d MiB | %.0f bytes | %d | %d | %.3f |\n' "$name" $((end / 1024)) \
        $(((end - ${rss_start[$name]}) / 1024)) "$(echo "($end - ${rss_start[$name]}) * 1024 / $distinct" | bc -l)" \
        "$upstream" "${answered[$name]}" "$(echo "1 - $upstream / ${answered[$name]}" | bc -l)"
done
echo
for name in serve ${baseline:+baseline}; do
    refused="$(curl -s --max-time 5 "http://127.0.0.1:${admin_port_of[$name]}/metrics" \
        | awk '/^httpdns_serve_upstream_refused_total/ { print $2 }')"
    printf '%s: %s queries answered SERVFAIL by the per-network bound on upstream lookups (%.2f %% of those answered)\n' \
        "$name" "${refused:-?}" "$(echo "${refused:-0} * 100 / ${answered[$name]}" | bc -l)"
done
