#!/usr/bin/env bash
# Coverage-guided fuzzing of every parser of untrusted input (Tests/Fuzz/FuzzTargets.swift, and the
# server's request handling in Tests/Fuzz/ServerFuzzTargets.swift) with
# libFuzzer and AddressSanitizer, starting from the committed seed corpus (Tests/Fuzz/Corpus/TARGET).
#   scripts/fuzz.sh [--runs N | --seconds S] [--from-build DIR] [TARGET...]
# lld links it: gold fails on the sanitized objects (an internal error in its DWARF reader).
# --from-build DIR: no build of its own; runs DIR/debug/httpdns-fuzz, the fuzzer that
# `scripts/sanitize.sh thread --fuzz` built beside the sanitized suite (ThreadSanitizer and libFuzzer's coverage,
# debug; DIR is .build-tsan, or .build with --in-build, as CI does). Without it, a release build with
# AddressSanitizer in .build-fuzz, the one for long runs.
# Defaults: every target, 10,000,000 inputs each. New corpus entries go to $TMPDIR/httpdns-fuzz/TARGET (the
# committed corpus is not touched); a crashing input is saved there as crash-* and the script exits 1.
# Prints one line per target: inputs run, seconds, inputs per second, crashes.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=10000000
seconds=""
targets=()
from_build=""
while [ $# -gt 0 ]; do
    case "$1" in
        --runs) runs="$2"; shift 2 ;;
        --seconds) seconds="$2"; runs="-1"; shift 2 ;;
        --from-build) from_build="$2"; shift 2 ;;
        -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
        *) targets+=("$1"); shift ;;
    esac
done
[ ${#targets[@]} -gt 0 ] || targets=(doh-wire answer-walk doh-json alibaba tencent tencent-aes settings hosts cache record-text svcb serve-request serve-dns-message forwarded-answer dns-stream http2-server relay)
scripts/install-deps.sh run
if [ -n "$from_build" ]; then
    binary="$from_build/debug/httpdns-fuzz"
    [ -x "$binary" ] || { echo "no $binary: run scripts/sanitize.sh thread --fuzz first" >&2; exit 1; }
    export TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=1 suppressions=$PWD/scripts/tsan-suppressions.txt}"
    export SWIFT_BACKTRACE="${SWIFT_BACKTRACE:-enable=no}"
else
    # The linker's "Cannot export local symbol" notes about the sanitizer runtime are noise; a failed build still
    # fails.
    build_status=0
    swift build -c release --product httpdns-fuzz --scratch-path .build-fuzz \
        -Xswiftc -sanitize=fuzzer,address -Xswiftc -DFUZZING -Xswiftc -use-ld=lld 2>&1 \
        | { grep -v "Cannot export local symbol" || true; } || build_status=$?
    binary=.build-fuzz/release/httpdns-fuzz
    [ "$build_status" -eq 0 ] && [ -x "$binary" ] || { echo "the fuzz build failed" >&2; exit 1; }
fi
work="${TMPDIR:-/tmp}/httpdns-fuzz"
failed=0
printf '%-12s %12s %8s %12s %8s\n' target inputs seconds inputs/s crashes
for target in "${targets[@]}"; do
    mkdir -p "$work/$target"
    # Artifacts of earlier runs stay in the directory (the corpus grows there too): only this run's count.
    started="$work/$target.started"
    touch "$started"
    limit=(-runs="$runs")
    [ -z "$seconds" ] || limit=(-max_total_time="$seconds")
    log="$work/$target.log"
    status=0
    HTTPDNS_FUZZ_TARGET="$target" "$binary" "${limit[@]}" -max_len=8192 -timeout=10 -rss_limit_mb=4096 \
        -artifact_prefix="$work/$target/" -print_final_stats=1 "$work/$target" "Tests/Fuzz/Corpus/$target" >"$log" 2>&1 || status=$?
    done_line=$(grep -E '^Done [0-9]+ runs in [0-9]+ second' "$log" | tail -1 || true)
    inputs=$(echo "$done_line" | awk '{print $2}')
    took=$(echo "$done_line" | awk '{print $5}')
    crashes=$(find "$work/$target" -maxdepth 1 \( -name 'crash-*' -o -name 'timeout-*' -o -name 'leak-*' \) \
        -newer "$started" | wc -l)
    if [ "$status" -ne 0 ] || [ -z "$done_line" ]; then
        crashes=$((crashes > 0 ? crashes : 1))
        echo "$target failed (exit $status); see $log" >&2
        tail -30 "$log" >&2
        failed=1
    fi
    rate=$([ -n "$took" ] && [ "$took" -gt 0 ] && echo $((inputs / took)) || echo "-")
    printf '%-12s %12s %8s %12s %8s\n' "$target" "${inputs:--}" "${took:--}" "$rate" "$crashes"
done
exit $failed
