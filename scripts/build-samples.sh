#!/usr/bin/env bash
# Builds the README's samples (Examples/, a package that depends on swift-httpdns as an adopter's does) and every
# benchmark product (Benchmarks/), in debug, so that neither can rot. Both use the main build directory (.build) as
# their scratch path: the packages they share with the main build (SwiftNIO, swift-nio-ssl, swift-crypto,
# AsyncHTTPClient, swift-httpdns itself) are built once, and after scripts/test.sh only the samples, the benchmarks
# and ordo-one/benchmark are compiled. The benchmark figures come from Benchmarks/run.sh (release) on a quiet machine.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh run
echo "The README's samples as an adopter's package (Examples/)"
swift build --package-path Examples --scratch-path .build
echo "The benchmarks (Benchmarks/), built and not run"
swift build --package-path Benchmarks --scratch-path .build
