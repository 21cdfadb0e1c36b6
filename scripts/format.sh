#!/usr/bin/env bash
# Formatting with swift-format (bundled with the Swift toolchain) and the checked-in .swift-format (120 columns).
#   scripts/format.sh          checks: exits non-zero and lists what differs (CI runs this)
#   scripts/format.sh --fix    rewrites the files in place
# The Examples/ programs are left as written: the README quotes them verbatim (ReadmeSampleTests).
set -euo pipefail
cd "$(dirname "$0")/.."
paths=(Package.swift Sources Tests Benchmarks/Package.swift Benchmarks/Benchmarks)
if [[ "${1:-}" == "--fix" ]]; then
    swift format --in-place --recursive --parallel "${paths[@]}"
else
    swift format lint --strict --recursive --parallel "${paths[@]}"
fi
