#!/usr/bin/env python3
"""Counts the lines of configuration code in Sources at a git revision (default HEAD).

Configuration code is (1) the files that hold nothing else: the settings modules and folders, each
`+Configuration.swift`, the settings carriers and the `config` command; (2) in any other file, the body of a type
whose only job is configuration (`struct Configuration`, `struct Policy`, `struct ConnectionPolicy`,
`struct Probing`, `struct HTTPDNSProviders`). FileWatcher (reloading files) is not counted at either revision.

    python3 scripts/config_lines.py [-v] [REV ...]   # e.g. dfb643f HEAD; `.` is the working tree
"""

import re
import subprocess
import sys

DEDICATED = re.compile(
    r"(/Settings/|^Sources/HTTPDNSSettings/|Configuration\.swift$|/HTTPDNSProviders\.swift$|/ServeSettings\.swift$"
    r"|/SettingsSupport\.swift$|/ConfigCommand\.swift$)"
)
EXCLUDED = re.compile(r"(FileWatcher\.swift$|TLSConfiguration\+Verified\.swift$)")
TYPE = re.compile(r"^\s*(public |package |)?(struct|final class) (Configuration|Policy|ConnectionPolicy|Probing|HTTPDNSProviders)\b[^{]*\{")


def files(rev):
    if rev == ".":
        out = subprocess.run(["git", "ls-files", "Sources"], capture_output=True, text=True)
        return [f for f in out.stdout.split() if f.endswith(".swift") and not EXCLUDED.search(f)]
    out = subprocess.run(["git", "ls-tree", "-r", "--name-only", rev, "Sources"], capture_output=True, text=True)
    return [f for f in out.stdout.split() if f.endswith(".swift") and not EXCLUDED.search(f)]


def text(rev, path):
    if rev == ".":
        with open(path) as f:
            return f.read()
    return subprocess.run(["git", "show", f"{rev}:{path}"], capture_output=True, text=True).stdout


def type_lines(source):
    """Lines inside configuration-only types (with their doc comments), found by brace depth."""
    lines = source.split("\n")
    count, i = 0, 0
    while i < len(lines):
        if TYPE.match(lines[i]):
            start = i
            while start > 0 and lines[start - 1].strip().startswith("///"):
                start -= 1
            depth, j = 0, i
            while j < len(lines):
                depth += lines[j].count("{") - lines[j].count("}")
                if depth == 0 and j >= i:
                    break
                j += 1
            count += j - start + 1
            i = j + 1
        else:
            i += 1
    return count


def measure(rev):
    dedicated, embedded, rows = 0, 0, []
    for path in files(rev):
        source = text(rev, path)
        if DEDICATED.search(path):
            n = source.count("\n")
            dedicated += n
            rows.append((n, path))
        else:
            n = type_lines(source)
            if n:
                embedded += n
                rows.append((n, path + " (types)"))
    return dedicated, embedded, rows


if __name__ == "__main__":
    verbose = "-v" in sys.argv
    for rev in [a for a in sys.argv[1:] if a != "-v"] or ["HEAD"]:
        dedicated, embedded, rows = measure(rev)
        print(f"{rev}: {dedicated + embedded} lines ({dedicated} in dedicated files, {embedded} in types elsewhere)")
        if verbose:
            for n, path in sorted(rows, reverse=True):
                print(f"  {n:5} {path}")
