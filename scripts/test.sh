#!/usr/bin/env bash
# The project's test command: installs what the tests need (libc-ares-dev, dnsmasq-base) if missing, then builds
# and runs every test. The tests start their own DNS servers on 127.0.0.1 high ports and stop them afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh test
swift build --build-tests
swift test --skip-build --disable-xctest "$@"
