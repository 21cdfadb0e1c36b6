#!/usr/bin/env python3
"""Counts the public declarations of each library module in Sources: lines that declare something `public` or `open`
(imports aside; `override public` and `public override` included), with those behind `@_spi` (the benchmarks' access
to internals) counted apart, and the totals the consolidation issue set a bound on.
  scripts/public_surface.py [--check] [MODULE...]
--check exits 1 when the resolver side and the two fronts together declare more than BOUND.
"""
import os
import re
import sys

# Attributes, then modifiers in any order, one of them public or open, then a word (so that a statement such as
# `open += 1`, a variable named open, is not taken for a declaration).
PUBLIC = re.compile(r"^\s*(?:@[\w.]+(?:\([^)]*\))?\s+)*(?:(?:override|final|static|class|nonisolated|convenience|"
                    r"required|mutating|indirect|lazy|weak|unowned)\s+)*(?:public|open)\s+(?=[A-Za-z_@])")
IMPORT = re.compile(r"^\s*(?:@[\w.]+\s+)*(?:public|open)\s+import\s")
RESOLVER_SIDE = ["HTTPDNSCore", "HTTPDNSCAres", "HTTPDNSHTTP2", "HTTPDNSPinnedClients", "HTTPDNSClients", "HTTPDNS"]
FRONTS = ["HTTPDNSURLProtocol"]
# The gRPC front came after the bound was set for the first two; it is counted on its own line.
LATER_FRONTS = ["HTTPDNSGRPC"]
# AsyncHTTPClient declares 322: the resolver side and the fronts together stay under a comparable library's surface.
BOUND = 300


def count(module):
    public, spi = 0, 0
    for directory, _, names in os.walk(os.path.join("Sources", module)):
        for name in names:
            if not name.endswith(".swift"):
                continue
            with open(os.path.join(directory, name), encoding="utf-8") as handle:
                for line in handle:
                    if PUBLIC.match(line) and not IMPORT.match(line):
                        if "@_spi" in line:
                            spi += 1
                        else:
                            public += 1
    return public, spi


def library_modules():
    """Every module with Swift sources but the executables (a directory whose sources hold `@main`)."""
    modules = []
    for name in sorted(os.listdir("Sources")):
        files = [os.path.join(d, f) for d, _, fs in os.walk(os.path.join("Sources", name)) for f in fs
                 if f.endswith(".swift")]
        if not files:
            continue
        if any("@main" in open(f, encoding="utf-8").read() for f in files):
            continue
        modules.append(name)
    return modules


def main():
    arguments = [a for a in sys.argv[1:] if a != "--check"]
    check = "--check" in sys.argv[1:]
    modules = arguments or library_modules()
    counts = {}
    for module in modules:
        counts[module] = count(module)
        public, spi = counts[module]
        print(f"{module:22} {public:4} public  {spi:3} SPI")
    if arguments:
        return 0
    print(f"{'every library module':22} {sum(p for p, _ in counts.values()):4} public")
    side = sum(counts[m][0] for m in RESOLVER_SIDE if m in counts)
    fronts = sum(counts[m][0] for m in FRONTS if m in counts)
    print(f"{'resolver side':22} {side:4} public  ({', '.join(RESOLVER_SIDE)})")
    print(f"{'resolver side + fronts':22} {side + fronts:4} public  (bound {BOUND}; {', '.join(FRONTS)})")
    later = sum(counts[m][0] for m in LATER_FRONTS if m in counts)
    print(f"{'  + the gRPC front':22} {side + fronts + later:4} public  ({', '.join(LATER_FRONTS)})")
    if check and side + fronts > BOUND:
        print(f"the resolver side and the fronts declare {side + fronts} public declarations, over {BOUND}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
