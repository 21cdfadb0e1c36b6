#!/usr/bin/env bash
# Runs the benchmarks against local DNS servers that this script starts on loopback high ports and stops again.
#   Benchmarks/run.sh                 all benchmarks
#   Benchmarks/run.sh --filter NAME   extra arguments go to `swift package benchmark`
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
"$here/../scripts/install-deps.sh" benchmarks

# shellcheck source=lab/common.sh
. "$here/lab/common.sh"
start_lab

# The zone: n0.test ... n199.test, one A record each.
dnsmasq_port="$(free_port DGRAM)"
{
    echo "port=$dnsmasq_port"; echo "listen-address=127.0.0.1"; echo "bind-interfaces"; echo "no-resolv"
    echo "no-hosts"; echo "no-poll"; echo "local=/test/"; echo "cache-size=0"; echo "pid-file="
    for i in $(seq 0 199); do echo "host-record=n$i.test,10.1.$((i / 256)).$((i % 256)),600"; done
} > "$work/dnsmasq.conf"
dnsmasq --keep-in-foreground --conf-file="$work/dnsmasq.conf" --log-facility=- 2>/dev/null &
pids+=($!)

unbound_port="$(free_port DGRAM)"
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

# dnsdist with a DoH listener over TLS, forwarding to dnsmasq; a throw-away CA signs its certificate.
doh_port="$(free_port)"
dnsdist_port="$(free_port DGRAM)"
make_certificate "$work"
cat > "$work/dnsdist.conf" <<EOF
setSecurityPollSuffix("")
setACL({"127.0.0.0/8", "::1/128"})
setLocal("127.0.0.1:$dnsdist_port")
newServer({address="127.0.0.1:$dnsmasq_port", checkName="n0.test.", checkInterval=60})
addDOHLocal("127.0.0.1:$doh_port", "$work/doh.pem", "$work/doh.key", "/dns-query")
EOF
dnsdist --supervised --disable-syslog -C "$work/dnsdist.conf" >"$work/dnsdist.log" 2>&1 &
pids+=($!)
doh_servers="$!:${pids[0]}"  # dnsdist and dnsmasq: the DoH benchmark reads their CPU time
# The same RFC 8484 GET requests the Swift side sends (A queries, ID 0, RD), for h2load.
python3 - "$doh_port" > "$work/uris.txt" <<'PY'
import base64, struct, sys
for i in range(200):
    labels = b"".join(bytes([len(l)]) + l.encode() for l in f"n{i}.test".split("."))
    query = struct.pack(">HHHHHH", 0, 0x0100, 1, 0, 0, 0) + labels + b"\0" + struct.pack(">HH", 1, 1)
    print(f"https://127.0.0.1:{sys.argv[1]}/dns-query?dns=" + base64.urlsafe_b64encode(query).decode().rstrip("="))
PY
sleep 1

# nginx with one worker serving a 1 KiB body over keep-alive HTTP/1.1, for the URL protocol benchmark.
http_port="$(free_port)"
mkdir -p "$work/nginx-temp"
body_1k="$(head -c 1024 /dev/zero | tr '\0' 'x')"
cat > "$work/nginx.conf" <<EOF
worker_processes 1;
daemon off;
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
        listen 127.0.0.1:$http_port;
        default_type application/octet-stream;
        location = /1k { return 200 "$body_1k"; }
    }
}
EOF
nginx -c "$work/nginx.conf" -p "$work" &
pids+=($!)
sleep 0.5

export HTTPDNS_BENCH_HTTP="127.0.0.1:$http_port"
export HTTPDNS_BENCH_DOH="url=https://doh.bench:$doh_port/dns-query,ca=$work/ca.pem,uris=$work/uris.txt,servers=$doh_servers"
export HTTPDNS_BENCH_SERVERS="dnsmasq=127.0.0.1:$dnsmasq_port,unbound=127.0.0.1:$unbound_port"
cd "$here"
swift package benchmark --no-progress "$@"
