#!/usr/bin/env bash
# Runs the benchmarks against local DNS servers that this script starts on loopback high ports and stops again.
#   Benchmarks/run.sh                 all benchmarks
#   Benchmarks/run.sh --filter NAME   extra arguments go to `swift package benchmark`
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
"$here/../scripts/install-deps.sh" benchmarks

work="$(mktemp -d)"
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# The zone: n0.test ... n199.test, one A record each.
dnsmasq_port="$(free_port)"
{
    echo "port=$dnsmasq_port"; echo "listen-address=127.0.0.1"; echo "bind-interfaces"; echo "no-resolv"
    echo "no-hosts"; echo "no-poll"; echo "local=/test/"; echo "cache-size=0"; echo "pid-file="
    for i in $(seq 0 199); do echo "host-record=n$i.test,10.1.$((i / 256)).$((i % 256)),600"; done
} > "$work/dnsmasq.conf"
dnsmasq --keep-in-foreground --conf-file="$work/dnsmasq.conf" --log-facility=- 2>/dev/null &
pids+=($!)

unbound_port="$(free_port)"
{
    echo "server:"
    echo "  interface: 127.0.0.1"; echo "  port: $unbound_port"; echo "  do-daemonize: no"; echo "  chroot: \"\""
    echo "  username: \"\""; echo "  directory: \"$work\""; echo "  pidfile: \"\""; echo "  use-syslog: no"
    echo "  num-threads: 1"; echo "  access-control: 127.0.0.0/8 allow"; echo "  module-config: \"iterator\""
    echo "  do-not-query-localhost: yes"; echo "  so-rcvbuf: 4m"; echo "  local-zone: \"test.\" static"
    for i in $(seq 0 199); do echo "  local-data: \"n$i.test. 600 IN A 10.1.$((i / 256)).$((i % 256))\""; done
    echo "remote-control:"; echo "  control-enable: no"
} > "$work/unbound.conf"
unbound -d -c "$work/unbound.conf" 2>"$work/unbound.log" &
pids+=($!)
sleep 1

export HTTPDNS_BENCH_SERVERS="dnsmasq=127.0.0.1:$dnsmasq_port,unbound=127.0.0.1:$unbound_port"
cd "$here"
swift package benchmark --no-progress "$@"
