#!/usr/bin/env bash
# The whole test suite under a sanitizer, in a build directory of its own (.build-tsan, .build-asan).
#   scripts/sanitize.sh thread|address [--in-build] [--fuzz] [--stress-reruns N] [swift test arguments...]
# --in-build: in the test build's directory (.build) instead: the Swift code is built again instrumented, and the C
#   targets (BoringSSL, twice) are reused as scripts/test.sh built them, uninstrumented, as the system's nghttp2 and
#   c-ares always are (about six minutes less on two cores; CI does this, after every step that uses the plain
#   build). .build then holds the sanitized build until the next scripts/test.sh.
# --fuzz: the package's own modules also carry libFuzzer's coverage instrumentation and httpdns-fuzz links its
#   driver (HTTPDNS_FUZZING=1, read by Package.swift), so that httpdns-fuzz is a fuzzer that
#   scripts/fuzz.sh --from-build runs: CI makes one instrumented build for the suite and the fuzz targets instead
#   of two. The tests run the same either way.
# --stress-reruns N: after the whole suite, the concurrency stress suite and the URLSession API forms matrix N more
#   times under the sanitizer (a race there can hide from one run).
# The sanitized build leaves out the package's default trait OTLPExport (hostsctl's OpenTelemetry export): it would
#   compile swift-otel and swift-protobuf once more, instrumented, for a few dozen lines of the project's own glue,
#   which the plain build's TelemetryExportTests cover; the span the server makes per request (ServiceSpanTests) is
#   built and tested here either way.
# Installs what the tests need first, like scripts/test.sh. Exits with the first failing run's status.
set -euo pipefail
cd "$(dirname "$0")/.."
sanitizer="${1:-thread}"
shift || true
case "$sanitizer" in thread|address) ;; *) echo "usage: $0 thread|address [--in-build] [--fuzz] [--stress-reruns N] [arguments...]" >&2; exit 64 ;; esac
flags=(--disable-default-traits)
reruns=0
in_build=false
while [ $# -gt 0 ]; do
    case "$1" in
        # lld links it: gold fails on objects with the fuzzer's instrumentation (an internal error in its DWARF reader).
        --fuzz) export HTTPDNS_FUZZING=1; flags+=(-Xswiftc -use-ld=lld); shift ;;
        --in-build) in_build=true; shift ;;
        --stress-reruns) reruns="$2"; shift 2 ;;
        *) break ;;
    esac
done
if $in_build; then
    scratch=.build
    # Through swiftc only: clang's flags, and so the C targets' objects, stay as they are.
    sanitize=(-Xswiftc "-sanitize=$sanitizer")
else
    scratch=".build-${sanitizer:0:1}san"
    sanitize=(--sanitize="$sanitizer")
fi
scripts/install-deps.sh test
# The linker's "Cannot export local symbol" notes about the sanitizer runtime are noise; a failed build still fails.
build_status=0
swift build --build-tests "${sanitize[@]}" --scratch-path "$scratch" "${flags[@]}" 2>&1 \
    | { grep -v "Cannot export local symbol" || true; } || build_status=$?
[ "$build_status" -eq 0 ] || { echo "the sanitized build failed" >&2; exit "$build_status"; }
# halt_on_error: a report fails the run instead of scrolling by.
# Suppressions: only the Swift runtime's continuation hand-off (see the file).
export TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=1 second_deadlock_stack=1 suppressions=$PWD/scripts/tsan-suppressions.txt}"
export ASAN_OPTIONS="${ASAN_OPTIONS:-halt_on_error=1 detect_leaks=0}"
# A crash prints the runtime's fatal error and ends the run. The Swift backtracer is off: under ThreadSanitizer it is
# forked from the crashing process, trips a sanitizer check and then hangs, holding the run for as long as CI lets it.
export SWIFT_BACKTRACE="${SWIFT_BACKTRACE:-enable=no}"
# Tests that cannot run under a sanitizer ask for it (libfaketime's preloaded clock functions hang a sanitized
# program as it starts).
export HTTPDNS_SANITIZER="$sanitizer"
# Sanitized code runs several times slower: time-bound test steps get longer (see TestTiming).
export HTTPDNS_TEST_TIME_SCALE="${HTTPDNS_TEST_TIME_SCALE:-5}"
# As in scripts/test.sh: at most 8 tests at once, so two cores are not oversubscribed.
# Four tests at a time rather than eight: a sanitizer slows every event loop several times over, and the tests share
# the NIO singleton's loops (servers, clients, the URL protocol's loads), so a flooding test beside a TLS handshake
# could hold the handshake past its (already scaled) time limit.
export SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH="${SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH:-4}"
swift test --skip-build --disable-xctest "${sanitize[@]}" --scratch-path "$scratch" "${flags[@]}" "$@"
for run in $(seq 1 "$reruns"); do
    echo "Concurrency stress suite and the URLSession API forms matrix under the sanitizer, rerun $run of $reruns"
    swift test --skip-build --disable-xctest "${sanitize[@]}" --scratch-path "$scratch" "${flags[@]}" \
        --filter "ConcurrencyStressTests|URLSessionFormsTests"
done
