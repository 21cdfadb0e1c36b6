#!/usr/bin/env bash
# Installs the Debian/Ubuntu packages the project needs, only those that are missing.
#   scripts/install-deps.sh [run|demo|test|benchmarks]
set -euo pipefail
need=(libc-ares-dev libnghttp2-dev pkg-config ca-certificates)
case "${1:-run}" in
    run) ;;
    demo) need+=(dnsmasq-base dnsdist python3) ;;
    # libxml2: FoundationXML checks the HTML report; python3, knot-dnsutils (kdig), curl: DoH clients that are not ours;
    # pdns-server with pdns-backend-bind: an authoritative that answers by client subnet (ECS); faketime: clock steps;
    # tayga and unbound (dns64): the IPv6-only NAT64 lab (scripts/nat64-lab.sh); chromium: the dashboard in a browser;
    # prometheus: promtool checks the alert rules and the Grafana queries
    test) need+=(dnsmasq-base dnsdist openssl libxml2 python3 knot-dnsutils curl stubby pdns-server pdns-backend-bind faketime tayga unbound chromium prometheus) ;;
    benchmarks) need+=(dnsmasq-base unbound dnsdist nghttp2-client nginx-light openssl python3 dnsperf pdns-server pdns-backend-bind knot-dnsutils) ;;
    *) echo "usage: $0 [run|demo|test|benchmarks]" >&2; exit 64 ;;
esac
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
missing=()
for package in "${need[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed' || missing+=("$package")
done
if [ "${#missing[@]}" -gt 0 ]; then
    echo "Installing: ${missing[*]}" >&2
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if [ "${1:-run}" = test ] \
    && ! python3 -c "import dns.query, httpx2, opentelemetry.proto.collector.trace.v1.trace_service_pb2" 2>/dev/null
then
    # From PyPI: dnspython's DoH client (HTTP/2 through httpx2; Debian's python3-dnspython is too old for it), and the
    # official OTLP schema (opentelemetry-proto) the telemetry tests' receiver decodes exports with.
    python_packages=("dnspython[doh]==2.9.2" "opentelemetry-proto==1.45.2")
    echo "Installing: ${python_packages[*]} (PyPI)" >&2
    python3 -m pip --version >/dev/null 2>&1 || {
        $sudo apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends python3-pip >/dev/null
    }
    python3 -m pip install --quiet "${python_packages[@]}" 2>/dev/null \
        || python3 -m pip install --quiet --break-system-packages "${python_packages[@]}"
fi
if ! command -v swift >/dev/null; then
    echo "Swift 6.1 or later is required (https://www.swift.org/install/)." >&2
    exit 1
fi
