#!/usr/bin/env bash
# Builds the DocC documentation of every module that has a catalog (Sources/MODULE/MODULE.docc) from its public
# symbols, with warnings as errors: a broken symbol link or a bad catalog fails. Output in .build-docs/docs/MODULE.
#   scripts/docs.sh [MODULE...]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh run
modules=("$@")
if [ ${#modules[@]} -eq 0 ]; then
    for catalog in Sources/*/*.docc; do modules+=("$(basename "$catalog" .docc)"); done
fi
# Symbol graphs of the public declarations, extracted from the debug build that scripts/test.sh makes (.build): when
# that build is current this adds only the extraction. The plugin may also try the test modules, which it cannot
# load, and then exit 1: what counts is that every module's graph was written by this run.
stamp=.build-docs/symbolgraph.stamp
mkdir -p .build-docs && touch "$stamp"
swift package --scratch-path .build dump-symbol-graph --minimum-access-level public >.build-docs/symbolgraph.log 2>&1 || true
graphs=$(find .build -maxdepth 2 -type d -name symbolgraph | head -1)
for module in "${modules[@]}"; do
    if [ -z "$graphs" ] || [ ! "$graphs/$module.symbols.json" -nt "$stamp" ]; then
        grep -E "error" .build-docs/symbolgraph.log >&2 || tail -20 .build-docs/symbolgraph.log >&2
        echo "no fresh symbol graph for $module" >&2
        exit 1
    fi
done
status=0
mkdir -p .build-docs/docs
for module in "${modules[@]}"; do
    # docc documents one module at a time: its own graph and the extensions it declares on other modules' types.
    dir=".build-docs/graphs/$module"
    rm -rf "$dir" && mkdir -p "$dir"
    cp "$graphs/$module.symbols.json" "$dir/"
    cp "$graphs/$module"@*.symbols.json "$dir/" 2>/dev/null || true
    if docc convert "Sources/$module/$module.docc" --additional-symbol-graph-dir "$dir" \
        --output-path ".build-docs/docs/$module" --fallback-display-name "$module" \
        --fallback-bundle-identifier "org.swift-httpdns.$module" --warnings-as-errors --ide-console-output \
        >".build-docs/$module.log" 2>&1; then
        echo "$module: documentation built"
    else
        grep -E "warning|error" ".build-docs/$module.log" >&2 || cat ".build-docs/$module.log" >&2
        echo "$module: documentation failed" >&2
        status=1
    fi
done
exit $status
