#!/usr/bin/env bash
# The latency lab: one name, four addresses with different latencies, one of them dead, inside a network namespace
# this script makes (and removes). Runs hostsctl fetch twice, with the addresses from an overrides file and from DNS
# (a dnsmasq on loopback), beside a direct client (curl, keep-alive) to the fastest address, and reports:
# the share of requests on the fastest address after warm-up, failed requests, the first request's latency, and
# the median latency against the direct client.
#
#   sudo Benchmarks/latency-lab.sh [--requests N] [--rounds N] [--warmup N] [--hostsctl PATH] [--race-runs N]
#                                  [--baseline PATH] [--grpc | --grpc-only]
#
# --grpc: after the HTTP sides, the gRPC front in the same lab. A grpc-swift server answers on every lab address
# (port 9090; Benchmarks/Sources/GRPCLab, release build), and a client calls lab.test (the four addresses, dead one
# first, fastest last, from an override) through the HTTPDNS name resolver, --requests calls one at a time, --rounds
# times, each a process of its own: the share of calls after --warmup that reached the fastest address, the first
# call's time and the median. --grpc-only: the gRPC side alone (no hostsctl build, no HTTP sides, no race runs).
#
# The four sides (overrides, DNS, URLSession alone and curl to the fastest address) run --rounds times (default 5),
# each round in another order, --requests requests each time; the ratios are per round, so the spread says how far
# one round can be trusted.
# Then the raced first request alone: `race.test` names the dead address and the 80 ms one (in that order); each of
# --race-runs runs (default 5) starts with an empty cache, so the request races, and counts the TCP dials per
# address (SYNs with distinct source ports, seen by the bridge) beside the request's time. --baseline PATH runs
# another hostsctl build the same way, interleaved, for a before/after in the same run.
#
# Addresses (10.77.0.0/24 exists only inside the namespace; a blackhole route keeps it from ever leaving the host):
#   10.77.0.1  drops every packet      10.77.0.2  20 ms one way      10.77.0.3  80 ms      10.77.0.4  1 ms (fastest)
# They are listed in that order (the dead one first, the fastest last). Delays come from a small TUN bridge in user
# space (Benchmarks/lab/tunbridge.py), because this kernel has no netem; it delays the TCP handshake too.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
requests=120
warmup=20
rounds=5
hostsctl=""
race_runs=5
baseline=""
grpc=""
grpc_only=""
while [ $# -gt 0 ]; do
    case "$1" in
        --requests) requests="$2"; shift 2 ;;
        --rounds) rounds="$2"; shift 2 ;;
        --warmup) warmup="$2"; shift 2 ;;
        --hostsctl) hostsctl="$2"; shift 2 ;;
        --race-runs) race_runs="$2"; shift 2 ;;
        --baseline) baseline="$2"; shift 2 ;;
        --grpc) grpc=1; shift ;;
        --grpc-only) grpc=1; grpc_only=1; shift ;;
        *) echo "usage: $0 [--requests N] [--rounds N] [--warmup N] [--hostsctl PATH] [--race-runs N] [--baseline PATH] [--grpc | --grpc-only]" >&2; exit 64 ;;
    esac
done
[ "$(id -u)" -eq 0 ] || { echo "the lab makes a network namespace and TUN devices: run it as root" >&2; exit 1; }
"$root/scripts/install-deps.sh" benchmarks
command -v curl >/dev/null || { apt-get install -y -qq curl >/dev/null; }
command -v ip >/dev/null || { apt-get install -y -qq iproute2 >/dev/null; }
if [ -z "$hostsctl" ] && [ -z "$grpc_only" ]; then
    swift build -c release --package-path "$root" --product hostsctl >&2
    hostsctl="$(swift build -c release --package-path "$root" --show-bin-path)/hostsctl"
fi

work="$(mktemp -d)"
chmod 755 "$work"  # dnsmasq reads its hosts file after dropping privileges
ns="httpdns-lab-$$"
outer="hdlo$$"; inner="hdli$$"
outer="${outer:0:15}"; inner="${inner:0:15}"
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    [ -f "$work/nginx.pid" ] && kill "$(cat "$work/nginx.pid")" 2>/dev/null || true
    ip netns del "$ns" 2>/dev/null || true
    ip route del unreachable 10.77.0.0/16 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

# Nothing for 10.77.0.0/16 may ever take the default route, whatever fails below.
ip route add unreachable 10.77.0.0/16
python3 "$here/lab/tunbridge.py" --outer "$outer" --inner "$inner" --drop 10.77.0.1 \
    --delay 10.77.0.2=20 --delay 10.77.0.3=80 --delay 10.77.0.4=1 --ready "$work/ready" --syn-log "$work/syn.log" &
pids+=($!)
for _ in $(seq 100); do [ -f "$work/ready" ] && break; sleep 0.05; done
ip netns add "$ns"
ip link set "$inner" netns "$ns"
ip addr add 10.77.1.1/24 dev "$outer"
ip link set "$outer" up
ip route add 10.77.0.0/24 dev "$outer"
ip netns exec "$ns" ip link set lo up
ip netns exec "$ns" ip addr add 10.77.0.1/24 dev "$inner"
for i in 2 3 4; do ip netns exec "$ns" ip addr add "10.77.0.$i/32" dev "$inner"; done
ip netns exec "$ns" ip link set "$inner" up
ip netns exec "$ns" ip route add 10.77.1.0/24 dev "$inner"
ip netns exec "$ns" sysctl -qw net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0

# nginx inside the namespace, on every lab address, answering with the address it was reached on.
mkdir -p "$work/nginx-temp"
cat > "$work/nginx.conf" <<CONF
worker_processes 1;
pid $work/nginx.pid;
error_log $work/nginx.log;
events { worker_connections 1024; }
http {
    access_log off;
    keepalive_requests 1000000;
    keepalive_timeout 120s;
    client_body_temp_path $work/nginx-temp/body;
    proxy_temp_path $work/nginx-temp/proxy;
    fastcgi_temp_path $work/nginx-temp/fastcgi;
    uwsgi_temp_path $work/nginx-temp/uwsgi;
    scgi_temp_path $work/nginx-temp/scgi;
    server {
        listen 10.77.0.1:8080; listen 10.77.0.2:8080; listen 10.77.0.3:8080; listen 10.77.0.4:8080;
        default_type text/plain;
        location / { return 200 "\$server_addr\n"; }
    }
}
CONF
ip netns exec "$ns" nginx -c "$work/nginx.conf" -p "$work"
sleep 0.3
for i in 2 3 4; do
    reached="$(curl -s --max-time 3 "http://10.77.0.$i:8080/")"
    [ "$reached" = "10.77.0.$i" ] || { echo "lab address 10.77.0.$i does not answer ($reached)" >&2; exit 1; }
done

# dnsmasq on loopback answers fast.test with the four addresses.
if [ -z "$grpc_only" ]; then
dns_port="$(python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
printf '10.77.0.1 fast.test\n10.77.0.2 fast.test\n10.77.0.3 fast.test\n10.77.0.4 fast.test\n' > "$work/hosts"
dnsmasq --keep-in-foreground --port="$dns_port" --listen-address=127.0.0.1 --bind-interfaces --no-resolv --no-hosts \
    --addn-hosts="$work/hosts" --local=/test/ --local-ttl=300 --pid-file= --log-facility=- 2>/dev/null &
pids+=($!)
sleep 0.3
answer="$("$hostsctl" resolve --no-cache --server "127.0.0.1:$dns_port" --family ipv4 fast.test 2>&1 || true)"
case "$answer" in *10.77.0.4*) ;; *) echo "dnsmasq does not answer fast.test: $answer" >&2; exit 1 ;; esac

url="http://fast.test:8080/"
# Every side runs once per round, in an order that rotates from round to round, so a machine (or the bridge) that
# speeds up or slows down during the run weighs on all sides alike; each run is a process of its own whose first
# --warmup requests are left out.
sides=(overrides dns plain curl)
for round in $(seq "$rounds"); do
    for k in 0 1 2 3; do
        side="${sides[$(((k + round) % 4))]}"
        case "$side" in
            overrides)
                HOSTSCTL_SOURCES_ORDER="overrides,cache" "$hostsctl" fetch --hosts "$work/hosts" \
                    --cache-file "$work/cache-overrides-$round.json" --json --repeat "$requests" "$url" \
                    > "$work/overrides-$round.jsonl" || true ;;
            dns)
                HOSTSCTL_SOURCES_ORDER="cache,cares" HOSTSCTL_CARES_SERVERS="127.0.0.1:$dns_port" "$hostsctl" fetch \
                    --cache-file "$work/cache-dns-$round.json" --json --repeat "$requests" "$url" \
                    > "$work/dns-$round.jsonl" || true ;;
            plain)  # URLSession alone to the fastest address (an IP literal, which the protocol leaves alone)
                "$hostsctl" fetch --no-cache --json --repeat "$requests" "http://10.77.0.4:8080/" \
                    > "$work/plain-$round.jsonl" || true ;;
            curl)  # one keep-alive connection
                urls=(); for _ in $(seq "$requests"); do urls+=(-o /dev/null "http://10.77.0.4:8080/"); done
                curl -s -w '%{time_total}\n' "${urls[@]}" > "$work/curl-$round.txt" ;;
        esac
    done
    echo "round $round of $rounds done" >&2
done

# The raced first request, probes off so that only the request's own dials reach the bridge.
printf '10.77.0.1 race.test\n10.77.0.3 race.test\n' > "$work/race-hosts"
race() {  # LABEL BINARY RUN
    : > "$work/syn.log"
    HOSTSCTL_SOURCES_ORDER="overrides,cache" HOSTSCTL_PROBE_ENABLED=false "$2" fetch --hosts "$work/race-hosts" \
        --cache-file "$work/race-$1-$3.json" --json --repeat 1 "http://race.test:8080/" > "$work/race-$1-$3.jsonl" || true
    cp "$work/syn.log" "$work/race-$1-$3.syn"
}
labels="new"
[ -n "$baseline" ] && labels="new baseline"
echo "Race runs: $race_runs raced first requests (dead address first, 80 ms next) per build" >&2
for run in $(seq "$race_runs"); do
    race new "$hostsctl" "$run"
    [ -n "$baseline" ] && race baseline "$baseline" "$run"
done

python3 - "$work" "$warmup" "$race_runs" "$rounds" $labels <<'PY'
import json, statistics, sys
work, warmup, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[4])


def reports(name):
    lines = [json.loads(l) for l in open(f"{work}/{name}.jsonl") if l.startswith("{")]
    return [r for r in lines if "summary" not in r]


def median_ms(rows):
    good = [r["elapsedMs"] for r in rows[warmup:] if "elapsedMs" in r and "error" not in r]
    return statistics.median(good) if good else float("nan")


print(f"{rounds} rounds, each side a process of its own per round in rotating order; medians after {warmup} warm-up requests")
print(f"{'round':<6} {'curl ms':>8} {'URLSession ms':>14} {'overrides ms':>13} {'dns ms':>8} {'overrides/URLSession':>21} {'dns/URLSession':>15} {'overrides/curl':>15}")
ratios = {"overrides": [], "dns": []}
for round in range(1, rounds + 1):
    curl = [float(x) * 1000 for x in open(f"{work}/curl-{round}.txt") if x.strip()]
    curl_median = statistics.median(curl[warmup:] or curl[1:])
    plain = median_ms(reports(f"plain-{round}"))
    medians = {run: median_ms(reports(f"{run}-{round}")) for run in ("overrides", "dns")}
    for run in ratios:
        ratios[run].append(medians[run] / plain)
    print(f"{round:<6} {curl_median:>8.2f} {plain:>14.2f} {medians['overrides']:>13.2f} {medians['dns']:>8.2f} "
          f"{medians['overrides'] / plain:>21.2f} {medians['dns'] / plain:>15.2f} {medians['overrides'] / curl_median:>15.2f}")
for run, values in ratios.items():
    print(f"{run} / URLSession alone: median {statistics.median(values):.2f}, rounds {min(values):.2f}-{max(values):.2f}")

print(f"{'run':<10} {'requests':>8} {'failed':>6} {'first ms':>9} {'fastest after warm-up':>22}")
for run in ("overrides", "dns"):
    rows = [r for round in range(1, rounds + 1) for r in reports(f"{run}-{round}")]
    first_rows = [reports(f"{run}-{round}") for round in range(1, rounds + 1)]
    failed = sum(1 for r in rows if "error" in r)
    after = [r for rs in first_rows for r in rs[warmup:]]
    on_fastest = sum(1 for r in after if r.get("ip") == "10.77.0.4")
    share = 100 * on_fastest / len(after) if after else 0
    first = [rs[0].get("elapsedMs", float("nan")) for rs in first_rows if rs]
    errors = [r["error"] for r in rows if "error" in r]
    if errors:
        print(f"{run}: first error: {errors[0]}")
    shown = ", ".join(f"{t:.0f}" for t in first)
    print(f"{run:<10} {len(rows):>8} {failed:>6} {statistics.median(first):>9.1f} {share:>21.1f}%   first requests: {shown} ms")

runs, labels = int(sys.argv[3]), sys.argv[5:]
print(f"raced first request, race.test = 10.77.0.1 (dead), 10.77.0.3 (80 ms); {runs} runs per build, fresh cache each")
print(f"{'build':<10} {'median ms':>10} {'runs ms':<36} {'dials to .3 per run':>20} {'dials to .1':>12} {'raced':>6}")
for label in labels:
    times, dials_live, dials_dead, raced = [], [], [], 0
    for run in range(1, runs + 1):
        lines = [json.loads(l) for l in open(f"{work}/race-{label}-{run}.jsonl") if l.startswith("{")]
        lines = [r for r in lines if "summary" not in r]
        if lines and "elapsedMs" in lines[0] and "error" not in lines[0]:
            times.append(lines[0]["elapsedMs"])
            raced += 1 if lines[0].get("hops", [{}])[0].get("raced") else 0
        syns = {tuple(l.split()) for l in open(f"{work}/race-{label}-{run}.syn") if l.strip()}
        dials_live.append(sum(1 for ip, port, _ in syns if ip == "10.77.0.3" and port == "8080"))
        dials_dead.append(sum(1 for ip, port, _ in syns if ip == "10.77.0.1" and port == "8080"))
    median = statistics.median(times) if times else float("nan")
    shown = ", ".join(f"{t:.0f}" for t in times)
    print(f"{label:<10} {median:>10.1f} {shown:<36} {'/'.join(map(str, dials_live)):>20} "
          f"{'/'.join(map(str, dials_dead)):>12} {raced:>3}/{runs}")
PY

fi  # the HTTP sides and the race runs, left out by --grpc-only

if [ -n "$grpc" ]; then
    swift build -c release --package-path "$here" --product GRPCLab >&2
    lab="$(swift build -c release --package-path "$here" --show-bin-path)/GRPCLab"
    ip netns exec "$ns" "$lab" serve 9090 10.77.0.1 10.77.0.2 10.77.0.3 10.77.0.4 >"$work/grpc-serve.log" 2>&1 &
    pids+=($!)
    sleep 1
    echo "gRPC through the HTTPDNS resolver: $rounds runs of $requests calls, one at a time, shares after $warmup" >&2
    for run in $(seq "$rounds"); do
        "$lab" call 9090 "$requests" "$warmup" 10.77.0.1 10.77.0.2 10.77.0.3 10.77.0.4 > "$work/grpc-$run.json"
    done
    python3 - "$work" "$rounds" <<'PY'
import json, sys
work, rounds = sys.argv[1], int(sys.argv[2])
print(f"{'gRPC run':<9} {'calls':>6} {'failed':>6} {'first ms':>9} {'median ms':>10} {'on the fastest (10.77.0.4)':>27}")
for run in range(1, rounds + 1):
    report = json.load(open(f"{work}/grpc-{run}.json"))
    share = report["shares"].get("10.77.0.4", 0)
    print(f"{run:<9} {report['calls']:>6} {report['failed']:>6} {report['firstMs']:>9.1f} {report['medianMs']:>10.2f} "
          f"{share * 100:>26.1f}%")
PY
fi
