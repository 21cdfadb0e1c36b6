#!/usr/bin/env python3
"""Counts the public declarations of each module in Sources: lines that declare something `public` (imports aside),
with those behind `@_spi` (the benchmarks' access to internals) counted apart.
  scripts/public_surface.py [MODULE...]
"""
import os
import re
import sys

PUBLIC = re.compile(r"^\s*(?:@[\w.]+(?:\([^)]*\))?\s+)*public\s")
RESOLVER_SIDE = ["HTTPDNSCore", "HTTPDNSCAres", "HTTPDNSClients", "HTTPDNS"]


def count(module):
    public, spi = 0, 0
    for directory, _, names in os.walk(os.path.join("Sources", module)):
        for name in names:
            if not name.endswith(".swift"):
                continue
            with open(os.path.join(directory, name), encoding="utf-8") as handle:
                for line in handle:
                    if PUBLIC.match(line) and not re.match(r"^\s*(@\w+\s+)*public\s+import\s", line):
                        if "@_spi" in line:
                            spi += 1
                        else:
                            public += 1
    return public, spi


def main():
    modules = sys.argv[1:] or sorted(
        name for name in os.listdir("Sources") if any(f.endswith(".swift") for _, _, fs in os.walk(os.path.join("Sources", name)) for f in fs))
    total = 0
    for module in modules:
        public, spi = count(module)
        print(f"{module:22} {public:4} public  {spi:3} SPI")
        if module in RESOLVER_SIDE:
            total += public
    if not sys.argv[1:]:
        print(f"{'resolver side':22} {total:4} public  ({', '.join(RESOLVER_SIDE)})")


if __name__ == "__main__":
    main()
