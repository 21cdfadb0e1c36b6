#!/usr/bin/env bash
# Builds the README's samples (Examples/, a package that depends on swift-httpdns as an adopter's does) and every
# benchmark product (Benchmarks/), in debug, so that neither can rot. Both use the main build directory (.build) as
# their scratch path: the packages they share with the main build (SwiftNIO, swift-nio-ssl, swift-crypto,
# AsyncHTTPClient, swift-httpdns itself) are built once, and after scripts/test.sh only the samples, the benchmarks
# and ordo-one/benchmark are compiled. The benchmark figures come from Benchmarks/run.sh (release) on a quiet machine.
# The benchmark scripts are parsed, and the serve workload's generator is run on a small zone and query file.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh run
echo "The README's samples as an adopter's package (Examples/)"
swift build --package-path Examples --scratch-path .build
echo "The samples that configure the library in code, run against local servers"
scripts/run-examples.sh
echo "The benchmarks (Benchmarks/), built and not run"
swift build --package-path Benchmarks --scratch-path .build
echo "The benchmark scripts, parsed; the workload generator (Benchmarks/serve-workload.sh) run on a small case"
for script in Benchmarks/*.sh Benchmarks/lab/*.sh; do bash -n "$script"; done
workload="$(mktemp -d)"
trap 'rm -rf "$workload"' EXIT
python3 Benchmarks/lab/workload.py zone --names 300 > "$workload/zone"
grep -q '^w200 [0-9]* IN LUA A "view(' "$workload/zone"
python3 Benchmarks/lab/workload.py queries --names 300 --count 2000 --tag ci --out "$workload/queries.bin"
# The file of misses alone: every name new.
python3 Benchmarks/lab/workload.py queries --names 300 --count 500 --new 1 --tag cim --out "$workload/misses.bin" 2>&1 \
    | grep -q '^500 queries, 500 distinct names, 100.0 % new'
[ "$(python3 Benchmarks/lab/workload.py paths --from "$workload/queries.bin" | grep -c '^/dns-query?dns=')" = 2000 ]
