#!/usr/bin/env bash
# The project's main command: installs what hostsctl needs if missing, builds it (release), and runs it.
#   scripts/hostsctl.sh              the demo on the default config (Config/hostsctl.json, Config/hosts): checks it,
#                                    resolves names through the overrides and a local dnsmasq serving
#                                    Config/demo-zone.conf, then the same over DNS-over-HTTPS through a local dnsdist,
#                                    fetches a page, benchmarks, probes and shows the cache
#   scripts/hostsctl.sh ARGS...      runs `hostsctl ARGS...` with $HOSTSCTL_CONFIG defaulting to Config/hostsctl.json
#                                    (e.g. bench api.example.test, resolve --server 127.0.0.1:5353 --json api.test)
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
    # The default config of the repository, unless the caller names another one.
    export HOSTSCTL_CONFIG="${HOSTSCTL_CONFIG:-$root/Config/hostsctl.json}"
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
pids=($!)
trap 'kill "${pids[@]}" 2>/dev/null; rm -rf "$work"' EXIT
# dnsdist serves DNS-over-HTTPS (plain HTTP on loopback) in front of the same dnsmasq.
doh_port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
udp_port="$(python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
cat > "$work/dnsdist.conf" <<EOF
setSecurityPollSuffix("")
setACL({"127.0.0.0/8"})
setLocal("127.0.0.1:$udp_port")
newServer({address="127.0.0.1:$port", checkName="api.demo.test.", checkInterval=60})
addDOHLocal("127.0.0.1:$doh_port", nil, nil, "/dns-query")
EOF
dnsdist --supervised --disable-syslog -C "$work/dnsdist.conf" >"$work/dnsdist.log" 2>&1 &
pids+=($!)
sleep 1
names=(api.example.test x.cdn.example.test api.demo.test www.demo.test v4.demo.test gone.demo.test localhost 192.0.2.80)
echo "\$ hostsctl config check            # Config/hostsctl.json and Config/hosts"
"$hostsctl" config check
echo
# The demo keeps its IP cache in the work directory, with TTLs capped at 2 s so it can show a stale answer.
cache="$work/cache.json"
export HOSTSCTL_CACHE_MIN_TTL_SECONDS=0 HOSTSCTL_CACHE_MAX_TTL_SECONDS=2
echo "\$ hostsctl resolve --config Config/hostsctl.json --server 127.0.0.1:$port --cache-file CACHE ${names[*]}"
status=0
"$hostsctl" resolve --config Config/hostsctl.json --server "127.0.0.1:$port" --cache-file "$cache" "${names[@]}" || status=$?
echo "(exit status $status: gone.demo.test does not exist, so 1 is expected)"
echo
echo "\$ hostsctl resolve ... api.demo.test        # again: answered from the persisted cache"
"$hostsctl" resolve --config Config/hostsctl.json --server "127.0.0.1:$port" --cache-file "$cache" api.demo.test
echo "\$ hostsctl resolve --no-cache --doh http://127.0.0.1:$doh_port/dns-query --family ipv4 api.demo.test v4.demo.test"
"$hostsctl" resolve --no-cache --doh "http://127.0.0.1:$doh_port/dns-query" --family ipv4 api.demo.test v4.demo.test
echo
# A small web server on loopback; web.demo.test resolves to it through dnsmasq (HOSTSCTL_CARES_SERVERS points c-ares
# at the demo's dnsmasq), and hostsctl fetch goes through URLSession with the rewriting URL protocol.
http_port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
mkdir -p "$work/www" && echo "hello from web.demo.test" > "$work/www/hello.txt"
python3 -m http.server "$http_port" --bind 127.0.0.1 --directory "$work/www" >/dev/null 2>&1 &
pids+=($!)
for _ in $(seq 50); do python3 -c "import socket; socket.create_connection(('127.0.0.1', $http_port), 0.1)" 2>/dev/null && break; sleep 0.1; done
echo "\$ HOSTSCTL_CARES_SERVERS=127.0.0.1:$port hostsctl fetch --config Config/hostsctl.json --cache-file CACHE -o - http://web.demo.test:$http_port/hello.txt"
HOSTSCTL_CARES_SERVERS="127.0.0.1:$port" "$hostsctl" fetch --config Config/hostsctl.json --cache-file "$cache" -o - "http://web.demo.test:$http_port/hello.txt"
echo
echo
# bench: c-ares against the demo dnsmasq, then the whole pipeline cold (every query through it to dnsmasq) and warm
# (the cache filled first); an HTML report with a latency chart per source.
report="${TMPDIR:-/tmp}/hostsctl-bench.html"
echo "\$ hostsctl bench --config Config/hostsctl.json --server 127.0.0.1:$port --queries 20000 --concurrency 100 --html $report api.demo.test www.demo.test v4.demo.test"
"$hostsctl" bench --config Config/hostsctl.json --server "127.0.0.1:$port" --queries 20000 --concurrency 100 --html "$report" \
    api.demo.test www.demo.test v4.demo.test || true
echo
# probe: TCP connects to each address; web.demo.test comes from dnsmasq (so the cache ranks it), loopback.example.test
# from Config/hosts (127.0.0.1, where the web server listens, and ::1, where nothing does).
echo "\$ HOSTSCTL_CARES_SERVERS=127.0.0.1:$port hostsctl probe --config Config/hostsctl.json --cache-file CACHE --port $http_port web.demo.test loopback.example.test"
HOSTSCTL_CARES_SERVERS="127.0.0.1:$port" "$hostsctl" probe --config Config/hostsctl.json --cache-file "$cache" --port "$http_port" \
    web.demo.test loopback.example.test || true
echo
echo "\$ hostsctl cache show --cache-file CACHE"
"$hostsctl" cache show --cache-file "$cache"
echo
echo "\$ # stop dnsmasq, wait for the TTL to pass, resolve again: the cache serves the answer, marked stale"
kill "${pids[0]}" 2>/dev/null || true
sleep 2.2
"$hostsctl" resolve --config Config/hostsctl.json --server "127.0.0.1:$port" --timeout 0.3 --tries 1 --cache-file "$cache" api.demo.test
unset HOSTSCTL_CACHE_MIN_TTL_SECONDS HOSTSCTL_CACHE_MAX_TTL_SECONDS
echo
