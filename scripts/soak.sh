#!/usr/bin/env bash
# Soak test of the URL protocol: a million requests (by default) while one of the two addresses of the host keeps
# failing and recovering; reports descriptors, pinned clients, background tasks and memory at the start and the
# end, and fails when they grew. Arguments go to httpdns-soak (--requests N, --concurrency C, --flap-seconds S).
#   scripts/soak.sh [--build release|debug] [httpdns-soak arguments...]
# --build debug runs the binary of the debug build that scripts/test.sh made (CI does: the soak measures growth, not
# speed, and a release build of its own costs CI ten minutes); release, the default, builds it optimized.
set -euo pipefail
cd "$(dirname "$0")/.."
configuration=release
if [ "${1:-}" = --build ]; then
    configuration="${2:?--build takes release or debug}"
    shift 2
fi
case "$configuration" in release|debug) ;; *) echo "usage: $0 [--build release|debug] [arguments...]" >&2; exit 64 ;; esac
scripts/install-deps.sh test
swift build -c "$configuration" --product httpdns-soak
exec ".build/$configuration/httpdns-soak" "$@"
