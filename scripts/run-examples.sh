#!/usr/bin/env bash
# Runs the two guide samples that configure the library in code, as an adopter's programs, against real servers on
# loopback high ports: a dnsmasq with its own config file (the classic DNS server) and `hostsctl serve` in front of
# it (the HTTP DNS provider of Examples/ResolverInCode). Each sample's output is checked: the override, the HTTP DNS
# answer and the address the embedded server (Examples/EmbeddedServer) answered over DoH. Expects the samples built
# (scripts/build-samples.sh builds them first, into .build).
set -euo pipefail
cd "$(dirname "$0")/.."

work="$(mktemp -d)"
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
fail() { echo "run-examples: $*" >&2; exit 1; }

dns_port="$(free_port)"
cat > "$work/dnsmasq.conf" <<CONF
port=$dns_port
listen-address=127.0.0.1
bind-interfaces
no-resolv
no-hosts
no-poll
local=/test/
pid-file=
host-record=www.example.test,198.51.100.80
CONF
dnsmasq=$(command -v dnsmasq || echo /usr/sbin/dnsmasq)
"$dnsmasq" --keep-in-foreground --conf-file="$work/dnsmasq.conf" --log-facility=- 2>"$work/dnsmasq.log" &
pids+=($!)

# The HTTP DNS provider: hostsctl serve (plain HTTP on loopback) answering from the same dnsmasq.
serve_port="$(free_port)"
cat > "$work/serve.json" <<JSON
{ "sources": { "order": ["cache", "cares"] }, "cares": { "servers": ["127.0.0.1:$dns_port"] },
  "cache": { "path": "$work/cache.json" }, "probe": { "enabled": false },
  "serve": { "listen": "127.0.0.1:$serve_port", "admin": { "listen": "none" }, "ecs": { "mode": "off" } } }
JSON
[ -x .build/debug/hostsctl ] || swift build --product hostsctl
.build/debug/hostsctl serve --config "$work/serve.json" >"$work/serve.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do
    curl -fs "http://127.0.0.1:$serve_port/healthz" >/dev/null 2>&1 && break
    sleep 0.1
done
curl -fs "http://127.0.0.1:$serve_port/healthz" >/dev/null || { cat "$work/serve.log"; fail "hostsctl serve did not start"; }

examples() { ".build/debug/$1"; }

echo "Examples/ResolverInCode"
out="$(DNS_SERVER="127.0.0.1:$dns_port" DOH_URL="http://127.0.0.1:$serve_port/dns-query" examples ResolverInCode)"
echo "$out"
grep -qx 'api.internal.test override \[192.0.2.10\]' <<<"$out" || fail "ResolverInCode: no override answer"
grep -qx 'www.example.test company-doh \[198.51.100.80\]' <<<"$out" || fail "ResolverInCode: no HTTP DNS answer"

echo "Examples/EmbeddedServer"
out="$(DNS_SERVER="127.0.0.1:$dns_port" examples EmbeddedServer)"
echo "$out"
grep -q '^DoH on http://127.0.0.1:[0-9]*/dns-query$' <<<"$out" || fail "EmbeddedServer: no listener"
grep -qx 'www.example.test \[198.51.100.80\]' <<<"$out" || fail "EmbeddedServer: no DoH answer"
echo "run-examples: both samples ran"
