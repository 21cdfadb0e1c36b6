#!/usr/bin/env bash
# The IPv6-only lab: a host with IPv6 only behind a NAT64 gateway, as in IPv6-only clusters and mobile networks.
#
#   scripts/nat64-lab.sh up ID       builds the lab and prints the client namespace's name (nat64c-ID)
#   scripts/nat64-lab.sh down ID     removes it (namespaces, processes, files)
#
# Two network namespaces this script makes, joined by a veth pair (nothing leaves them):
#   nat64c-ID  the client: 2001:db8:64::2/64 and a default IPv6 route, no IPv4 at all (only 127.0.0.1 on lo).
#              Its resolver (/etc/netns/nat64c-ID/resolv.conf, which `ip netns exec` puts in place of
#              /etc/resolv.conf) is unbound on [::1]:53 with the dns64 module (prefix 2001:db8:46::/96), forwarding to a
#              dnsmasq on [::1]:5300 that holds the zone: web.lab.test A 203.0.113.7 (no AAAA), and ipv4only.arpa A
#              192.0.0.170 and 192.0.0.171 (RFC 7050). dnsdist on 127.0.0.1:8053 is an HTTP DNS provider (plain-HTTP
#              DoH) in front of the same dnsmasq: it answers A only.
#   nat64g-ID  the gateway: 2001:db8:64::1/64, tayga (the NAT64: 2001:db8:46::/96 <-> IPv4 pool 192.168.255.0/24),
#              and the IPv4-only web server on 203.0.113.7:8080 (python3 http.server; /hello.txt: "hello over NAT64").
# The prefix is a network-specific one (RFC 6052): tayga refuses documentation IPv4 addresses under the well-known
# 64:ff9b::/96, and a network-specific prefix is what discovery (RFC 7050) exists to find.
# Needs root, veth and TUN devices, and the Debian packages tayga, unbound, dnsmasq-base, dnsdist, python3.
set -euo pipefail
action="${1:-}"; id="${2:-}"
[ -n "$action" ] && [ -n "$id" ] || { echo "usage: $0 up|down ID" >&2; exit 64; }
client="nat64c-$id"; gateway="nat64g-$id"
work="/tmp/nat64-lab-$id"
veth_client="n64c${id}"; veth_gateway="n64g${id}"
veth_client="${veth_client:0:15}"; veth_gateway="${veth_gateway:0:15}"

down() {
    if [ -d "$work" ]; then
        for pidfile in "$work"/*.pid; do
            [ -f "$pidfile" ] && kill "$(cat "$pidfile")" 2>/dev/null || true
        done
    fi
    ip netns pids "$client" 2>/dev/null | xargs -r kill 2>/dev/null || true
    ip netns pids "$gateway" 2>/dev/null | xargs -r kill 2>/dev/null || true
    ip netns del "$client" 2>/dev/null || true
    ip netns del "$gateway" 2>/dev/null || true
    rm -rf "/etc/netns/$client"; [ -n "${KEEP_LAB_LOGS:-}" ] || rm -rf "$work"
}

wait_for() {  # wait_for DESCRIPTION COMMAND...: up to 10 s
    local what="$1"; shift
    for _ in $(seq 200); do "$@" >/dev/null 2>&1 && return 0; sleep 0.05; done
    echo "nat64-lab: $what did not come up; logs in $work" >&2
    return 1
}

if [ "$action" = down ]; then down; exit 0; fi
[ "$action" = up ] || { echo "usage: $0 up|down ID" >&2; exit 64; }
[ "$(id -u)" -eq 0 ] || { echo "nat64-lab: needs root (network namespaces, TUN)" >&2; exit 1; }
for tool in tayga unbound dnsmasq dnsdist python3 ip; do
    command -v "$tool" >/dev/null || { echo "nat64-lab: $tool is missing" >&2; exit 1; }
done
down
ready=0
trap '[ "$ready" = 1 ] || down' EXIT
mkdir -p "$work/www" "/etc/netns/$client"
chmod 755 "$work"
printf 'hello over NAT64\n' > "$work/www/hello.txt"

ip netns add "$client"
ip netns add "$gateway"
ip link add "$veth_client" type veth peer name "$veth_gateway"
ip link set "$veth_client" netns "$client"
ip link set "$veth_gateway" netns "$gateway"
in_client() { ip netns exec "$client" "$@"; }
in_gateway() { ip netns exec "$gateway" "$@"; }

# The client: IPv6 only.
in_client ip link set lo up
in_client ip link set "$veth_client" up
in_client ip addr add 2001:db8:64::2/64 dev "$veth_client" nodad
in_client ip -6 route add default via 2001:db8:64::1

# The gateway: tayga between 64:ff9b::/96 and IPv4, and the IPv4-only server.
in_gateway ip link set lo up
in_gateway ip link set "$veth_gateway" up
in_gateway ip addr add 2001:db8:64::1/64 dev "$veth_gateway" nodad
in_gateway ip addr add 203.0.113.7/32 dev lo
in_gateway sysctl -qw net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1
cat > "$work/tayga.conf" <<CONF
tun-device nat64
ipv4-addr 192.168.255.1
ipv6-addr 2001:db8:6464::1
prefix 2001:db8:46::/96
dynamic-pool 192.168.255.0/24
data-dir $work/tayga
CONF
mkdir -p "$work/tayga"
in_gateway tayga -c "$work/tayga.conf" --mktun >/dev/null
in_gateway ip link set nat64 up
in_gateway ip route add 192.168.255.0/24 dev nat64
in_gateway ip -6 route add 2001:db8:46::/96 dev nat64
in_gateway tayga -c "$work/tayga.conf" --nodetach >"$work/tayga.log" 2>&1 &
echo $! > "$work/tayga.pid"
in_gateway python3 -m http.server 8080 --bind 203.0.113.7 --directory "$work/www" >"$work/http.log" 2>&1 &
echo $! > "$work/http.pid"

# The client's resolvers: dnsmasq with the zone, unbound with dns64 in front of it, dnsdist as the DoH provider.
in_client dnsmasq --keep-in-foreground --no-resolv --no-hosts --bind-interfaces --listen-address=::1 --port=5300 \
    --user=root --pid-file="$work/dnsmasq.pid" --log-facility="$work/dnsmasq.log" \
    --host-record=web.lab.test,203.0.113.7,60 \
    --host-record=ipv4only.arpa,192.0.0.170 --host-record=ipv4only.arpa,192.0.0.171 &
cat > "$work/unbound.conf" <<CONF
server:
    interface: ::1
    interface: 127.0.0.1
    port: 53
    do-daemonize: no
    username: ""
    chroot: ""
    directory: "$work"
    pidfile: "$work/unbound.pid"
    use-syslog: no
    logfile: "$work/unbound.log"
    log-queries: yes
    verbosity: 1
    access-control: ::1/128 allow
    access-control: 127.0.0.0/8 allow
    do-not-query-localhost: no
    qname-minimisation: no
    module-config: "dns64 iterator"
    dns64-prefix: 2001:db8:46::/96
    local-zone: "test." nodefault
    local-zone: "arpa." nodefault
    domain-insecure: "."
forward-zone:
    name: "."
    forward-addr: ::1@5300
CONF
in_client unbound -c "$work/unbound.conf" &
cat > "$work/dnsdist.conf" <<CONF
setSecurityPollSuffix("")
setLocal("127.0.0.1:5301")
newServer({address="[::1]:5300"})
addDOHLocal("127.0.0.1:8053", nil, nil, "/dns-query")
CONF
in_client dnsdist --supervised --disable-syslog -C "$work/dnsdist.conf" >"$work/dnsdist.log" 2>&1 &
echo $! > "$work/dnsdist.pid"
printf 'nameserver ::1\n' > "/etc/netns/$client/resolv.conf"

wait_for "unbound" test -s "$work/unbound.pid"
wait_for "the DNS64 resolver" sh -c "ip netns exec $client getent ahostsv6 ipv4only.arpa | grep -q 2001:db8:46::c000:aa"
wait_for "the web server through NAT64" sh -c \
    "ip netns exec $client python3 -c \"import socket; socket.create_connection(('2001:db8:46::cb00:7107', 8080), 1).close()\""
wait_for "the DoH provider" sh -c \
    "ip netns exec $client python3 -c \"import socket; socket.create_connection(('127.0.0.1', 8053), 1).close()\""
ready=1
echo "$client"
