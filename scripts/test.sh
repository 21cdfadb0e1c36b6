#!/usr/bin/env bash
# The project's test command: installs what the tests need (libc-ares-dev, libnghttp2-dev, dnsmasq-base, ...) if
# missing, then builds and runs every test. The tests start their own DNS servers on 127.0.0.1 high ports and stop
# them afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh test
swift build --build-tests
# At most 8 tests at once: started all together, the ~280 tests oversubscribe two cores so badly that for the first
# minute of a CI run nothing got CPU time, and a test's own deadline could pass before it ran at all. Eight keeps
# the run as short as unlimited here (30 s) with no start-up storm.
export SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH="${SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH:-8}"
swift test --skip-build --disable-xctest "$@"
