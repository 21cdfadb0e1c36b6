#!/usr/bin/env bash
# The project's main command: installs what hostsctl needs if missing, builds it (release), and runs it.
#   scripts/hostsctl.sh              the demo: resolves names through Config/hosts (overrides) and a local dnsmasq
#                                    serving Config/demo-zone.conf
#   scripts/hostsctl.sh ARGS...      runs `hostsctl ARGS...` (e.g. resolve --server 127.0.0.1:5353 --json api.test)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
if [ "$#" -gt 0 ]; then
    scripts/install-deps.sh run
else
    scripts/install-deps.sh demo
fi
swift build -c release --product hostsctl >&2
hostsctl="$(swift build -c release --show-bin-path)/hostsctl"
if [ "$#" -gt 0 ]; then
    exec "$hostsctl" "$@"
fi

# The demo: a dnsmasq on a free loopback port serving Config/demo-zone.conf, and nothing else.
work="$(mktemp -d)"
port="$(python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
{
    echo "port=$port"; echo "listen-address=127.0.0.1"; echo "bind-interfaces"; echo "no-resolv"; echo "no-hosts"
    echo "no-poll"; echo "pid-file="; echo "conf-file=$root/Config/demo-zone.conf"
} > "$work/dnsmasq.conf"
dnsmasq --keep-in-foreground --conf-file="$work/dnsmasq.conf" --log-facility=- 2>/dev/null &
dnsmasq_pid=$!
trap 'kill $dnsmasq_pid 2>/dev/null; rm -rf "$work"' EXIT
sleep 0.3
names=(api.example.test x.cdn.example.test api.demo.test www.demo.test v4.demo.test gone.demo.test localhost 192.0.2.80)
echo "\$ hostsctl config check Config/hosts"
"$hostsctl" config check Config/hosts
echo
echo "\$ hostsctl resolve --hosts Config/hosts --server 127.0.0.1:$port ${names[*]}"
status=0
"$hostsctl" resolve --hosts Config/hosts --server "127.0.0.1:$port" "${names[@]}" || status=$?
echo "(exit status $status: gone.demo.test does not exist, so 1 is expected)"
