#!/usr/bin/env bash
# What hostsctl serve's memory does when clients take every place they may, with the default limits (docs/security.md):
#   Benchmarks/serve-memory.sh [--build release|debug] [--hostsctl PATH] [--networks N] [--no-bodies]
#
# One hostsctl serve with TLS (HTTP/2 and DoT) and the defaults, on loopback. An attacker's client (Python, h2)
# opens, from each of N client networks (127.10.K.1, one /24 each; 16 by default, which is what it takes to fill the
# default 1,024 connections at 64 a network), as many TLS HTTP/2 connections as the server keeps, and on each
# connection 100 POST /dns-query streams whose bodies never end, each sent as much as HTTP/2 flow control lets it
# (the second wave's attack: 6.6 MiB a connection before the window was bound). Resident memory (VmRSS of the
# server) is read before, after the first network (one network's share) and with every network in; the connections
# the server kept open are counted. The Kubernetes example's limit is 256 MiB (Config/deploy/kubernetes).
# --no-bodies opens the same connections and streams without sending any body byte: the cost of TLS, HTTP/2 and
# the streams alone. The request body deadline (10 s) closes a network's connections while later ones connect, so
# the last count can be below the places.
# Traffic stays on 127.0.0.0/8.
set -euo pipefail
cd "$(dirname "$0")/.."

configuration=release
hostsctl=""
networks=16
bodies=1
while [ $# -gt 0 ]; do
    case "$1" in
        --build) configuration="$2"; shift 2 ;;
        --hostsctl) hostsctl="$2"; shift 2 ;;
        --networks) networks="$2"; shift 2 ;;
        --no-bodies) bodies=0; shift ;;
        *) echo "unknown argument: $1" >&2; exit 64 ;;
    esac
done
if [ -z "$hostsctl" ]; then
    swift build -c "$configuration" --product hostsctl >/dev/null
    hostsctl=".build/$configuration/hostsctl"
fi
python3 -c 'import h2' 2>/dev/null || python3 -m pip install -q h2

work=$(mktemp -d)
trap 'kill "$serve_pid" 2>/dev/null || true; rm -rf "$work"' EXIT
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=doh.test \
    -addext subjectAltName=DNS:doh.test -keyout "$work/doh.key" -out "$work/doh.pem" 2>/dev/null
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat >"$work/serve.json" <<SETTINGS
{
  "sources": { "order": ["overrides"], "systemFallback": false },
  "reload": { "intervalMs": 0 }, "probe": { "enabled": false },
  "serve": { "listen": "127.0.0.1:$port", "certificate": "$work/doh.pem", "privateKey": "$work/doh.key",
             "admin": { "listen": "none" } }
}
SETTINGS
HOSTSCTL_LOG_LEVEL=error "$hostsctl" serve --config "$work/serve.json" >"$work/serve.log" 2>&1 &
serve_pid=$!
for _ in $(seq 100); do
    grep -q "hostsctl serve:" "$work/serve.log" 2>/dev/null && break
    sleep 0.1
done

python3 - "$port" "$serve_pid" "$networks" "$work/doh.pem" "$bodies" <<'PYTHON'
import select, socket, ssl, sys, time
import h2.config, h2.connection, h2.events

port, pid, networks, certificate = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
bodies = sys.argv[5] == "1"

def rss():
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0

context = ssl.create_default_context(cafile=certificate)  # the lab's own certificate, checked for doh.test
context.set_alpn_protocols(["h2"])
headers = [(":method", "POST"), (":path", "/dns-query"), (":scheme", "https"), (":authority", "doh.test"),
           ("content-type", "application/dns-message")]

def hold(source, wanted=64):
    """Opens up to `wanted` connections from `source`, each with 100 streams holding body bytes; returns them."""
    held = []
    for _ in range(wanted):
        raw = socket.socket()
        raw.bind((source, 0))
        raw.settimeout(5)
        try:
            raw.connect(("127.0.0.1", port))
            sock = context.wrap_socket(raw, server_hostname="doh.test")
        except OSError:
            raw.close()
            continue
        conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
        conn.initiate_connection()
        sock.sendall(conn.data_to_send())
        held.append((sock, conn))
    for sock, conn in held:
        try:
            sock.settimeout(2)
            conn.receive_data(sock.recv(65536))  # the server's SETTINGS
            for stream in range(1, 201, 2):
                conn.send_headers(stream, headers, end_stream=False)
                room = min(conn.local_flow_control_window(stream), 4000) if bodies else 0
                if room > 0:
                    conn.send_data(stream, b"\0" * room)
            sock.sendall(conn.data_to_send())
        except Exception:
            pass
    return held

def alive(held):
    count = 0
    for sock, conn in held:
        try:
            sock.setblocking(False)
            data = sock.recv(65536)
            count += 1 if data != b"" else 0
        except (BlockingIOError, ssl.SSLWantReadError):
            count += 1
        except OSError:
            pass
    return count

time.sleep(0.5)
before = rss()
print(f"serve at rest: {before / 2**20:.1f} MiB")
first = hold("127.10.0.1")
time.sleep(1)
one = rss()
print(f"one network (127.10.0.0/24): {alive(first)} connections kept, +{(one - before) / 2**20:.1f} MiB "
      f"(target: at most 64 MiB)")
everyone = list(first)
for network in range(1, networks):
    everyone += hold(f"127.10.{network}.1")
time.sleep(1)
full = rss()
print(f"{networks} networks: {alive(everyone)} connections kept, {full / 2**20:.1f} MiB resident "
      f"(+{(full - before) / 2**20:.1f} MiB; Kubernetes example limit 256 MiB)")
PYTHON
