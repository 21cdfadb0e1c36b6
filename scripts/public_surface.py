#!/usr/bin/env python3
"""Counts the public declarations of each library module in Sources: lines that declare something `public` or `open`
(imports aside; `override public` and `public override` included), with those behind `@_spi` (the benchmarks' access
to internals) counted apart, each against its module's bound.
  scripts/public_surface.py [--check] [MODULE...]
--check exits 1 when a module declares more than its bound (BOUNDS).
"""
import os
import re
import sys

# Attributes, then modifiers in any order, one of them public or open, then a word (so that a statement such as
# `open += 1`, a variable named open, is not taken for a declaration).
PUBLIC = re.compile(r"^\s*(?:@[\w.]+(?:\([^)]*\))?\s+)*(?:(?:override|final|static|class|nonisolated|convenience|"
                    r"required|mutating|indirect|lazy|weak|unowned)\s+)*(?:public|open)\s+(?=[A-Za-z_@])")
IMPORT = re.compile(r"^\s*(?:@[\w.]+\s+)*(?:public|open)\s+import\s")
# The most public declarations each library module may have: its bound is its count when the bound was set (issue
# "Configuration owned by each component": every configuration field public) with a little room, so that growth is a
# decision made here, in review, not an accident. Modules not named here have a bound of 0: a new module starts
# without a public surface. For scale, AsyncHTTPClient declares 322.
BOUNDS = {
    "HTTPDNSCore": 90,
    "HTTPDNSCAres": 15,
    "HTTPDNSHTTP2": 0,
    "HTTPDNSPinnedClients": 0,
    "HTTPDNSClients": 45,
    "HTTPDNS": 115,
    # The settings file: SettingsFile, Settings and SettingsSection.
    "HTTPDNSSettings": 12,
    "HTTPDNSURLProtocol": 100,
    "HTTPDNSGRPC": 25,
    "HTTPDNSServer": 115,
    # One executable's command tree: the root command, and `hostsctl bench` for the benchmarks that embed it.
    "HostsCTLCommands": 16,
}


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
    over = []
    total = 0
    for module in modules:
        public, spi = count(module)
        bound = BOUNDS.get(module, 0)
        total += public
        print(f"{module:22} {public:4} public  {spi:3} SPI  (bound {bound})")
        if public > bound:
            over.append(f"{module} declares {public} public declarations, over its bound of {bound}")
    if not arguments:
        print(f"{'every library module':22} {total:4} public  (bound {sum(BOUNDS.values())})")
    if check and over:
        for line in over:
            print(line, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
