#!/usr/bin/env bash
# Soak test of the URL protocol: a million requests (by default) while one of the two addresses of the host keeps
# failing and recovering; reports descriptors, pinned clients, background tasks and memory at the start and the
# end, and fails when they grew. Arguments go to httpdns-soak (--requests N, --concurrency C, --flap-seconds S).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh test
swift build -c release --product httpdns-soak
exec .build/release/httpdns-soak "$@"
