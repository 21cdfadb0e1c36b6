#!/usr/bin/env bash
# Whether `hostsctl bench` measures the source and not its own start: the same c-ares source against the same dnsmasq
# (loopback), short runs (20,000 queries) against long ones (200,000), 100 in flight, release build. A tool that
# counted fixed costs (its set-up, a cold start) would report the short runs slower.
#   Benchmarks/bench-window.sh [--rounds R]
# Each round runs both lengths with the old warm-up (--warmup 50) and with the default (half a second); the
# medians and the short/long ratios are printed.
set -euo pipefail
rounds=3
while [ "$#" -gt 0 ]; do
    case "$1" in
        --rounds) rounds="$2"; shift 2 ;;
        *) echo "usage: $0 [--rounds R]" >&2; exit 64 ;;
    esac
done
here="$(cd "$(dirname "$0")" && pwd)"
root="$here/.."
# shellcheck source=lab/common.sh
. "$here/lab/common.sh"
"$root/scripts/install-deps.sh" benchmarks
hostsctl="$(release_hostsctl "$root")"
start_lab
port="$(free_port DGRAM)"
{
    echo "port=$port"; echo "listen-address=127.0.0.1"; echo "bind-interfaces"; echo "no-resolv"; echo "no-hosts"
    echo "no-poll"; echo "local=/test/"; echo "pid-file="
    for i in 0 1 2 3; do echo "host-record=n$i.test,127.1.0.$i,3600"; done
} > "$work/dnsmasq.conf"
dnsmasq --keep-in-foreground --conf-file="$work/dnsmasq.conf" --log-facility=- 2>/dev/null &
pids+=($!)
sleep 0.5

run() {
    "$hostsctl" bench --source cares --server "127.0.0.1:$port" --concurrency 100 --json "$@" \
        n0.test n1.test n2.test n3.test \
        | python3 -c 'import json, sys; d = json.load(sys.stdin)["sources"][0]; print(d["qps"], d["setupMs"])'
}
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
for warmup in old default; do
    for queries in 20000 200000; do : > "$work/$warmup.$queries"; done
done
for round in $(seq "$rounds"); do
    for warmup in old default; do
        options=()
        [ "$warmup" = default ] || options=(--warmup 50)
        for queries in 20000 200000; do
            read -r qps setup < <(run --queries "$queries" "${options[@]}")
            echo "$qps" >> "$work/$warmup.$queries"
            printf 'round %d  warm-up %-7s %6d queries: %9.0f queries/s (set-up %s ms)\n' \
                "$round" "$warmup" "$queries" "$qps" "$setup"
        done
    done
done
echo
for warmup in old default; do
    short="$(median < "$work/$warmup.20000")"
    long="$(median < "$work/$warmup.200000")"
    printf 'warm-up %-7s: 20,000 queries %.0f/s, 200,000 queries %.0f/s, short/long %.2f\n' \
        "$warmup" "$short" "$long" "$(echo "$short / $long" | bc -l)"
done
