#!/usr/bin/env python3
"""Holds the source tree to its shape: no Swift file in Sources over 450 lines, no function over 80.

A function is a `func`, `init`, `deinit`, `subscript` or computed property body, counted from its declaration line to
its closing brace. String literals and comments are blanked before braces are counted.
  scripts/check_shape.py [--max-file N] [--max-function N] [ROOT]
"""
import argparse
import os
import re
import sys

DECLARATION = re.compile(
    r"^\s*(?:@[\w.]+(?:\([^)]*\))?\s+)*"
    r"(?:(?:public|package|internal|private|fileprivate|open|static|class|override|final|mutating|nonmutating|"
    r"convenience|required|lazy|dynamic|indirect|borrowing|consuming|nonisolated(?:\(nonsending\))?|"
    r"(?:private|fileprivate|internal|package|public)\(set\))\s+)*"
    r"(func\s+[^\s(<]+|init[?!]?\s*[(<]|deinit\b|subscript\s*[(<]|var\s+\w+\s*:[^=]*\{\s*$)"
)


def blank_literals(text):
    """The text with string literals and comments replaced by spaces (newlines kept, so line numbers hold)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith('"""', i):
            j = text.find('"""', i + 3)
            j = n if j < 0 else j + 3
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text[i] == '"':
            j = i + 1
            depth = 0  # interpolations may hold strings of their own
            while j < n and text[j] != "\n":
                if text[j] == "\\" and j + 1 < n and text[j + 1] == "(":
                    depth += 1
                    j += 2
                    continue
                if text[j] == "\\":
                    j += 2
                    continue
                if text[j] == ")" and depth:
                    depth -= 1
                elif text[j] == '"' and not depth:
                    break
                j += 1
            out.append(" " * (j + 1 - i))
            i = j + 1
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def functions(lines):
    """(first line, length, declaration) of every function body in the blanked lines."""
    for start, line in enumerate(lines):
        match = DECLARATION.match(line)
        if not match:
            continue
        depth, opened = 0, False
        for end in range(start, min(len(lines), start + 5000)):
            for char in lines[end]:
                if char == "{":
                    depth += 1
                    opened = True
                elif char == "}":
                    depth -= 1
            if opened and depth <= 0:
                yield start + 1, end - start + 1, match.group(1).strip()
                break
            if not opened and end > start + 20:  # a requirement or stored property: no body
                break


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--max-file", type=int, default=450)
    parser.add_argument("--max-function", type=int, default=80)
    parser.add_argument("root", nargs="?", default="Sources")
    arguments = parser.parse_args()
    problems = []
    for directory, _, names in sorted(os.walk(arguments.root)):
        for name in sorted(names):
            if not name.endswith(".swift"):
                continue
            path = os.path.join(directory, name)
            with open(path, encoding="utf-8") as handle:
                text = handle.read()
            count = text.count("\n") + (0 if text.endswith("\n") else 1)
            if count > arguments.max_file:
                problems.append(f"{path}: {count} lines (at most {arguments.max_file})")
            for line, length, declaration in functions(blank_literals(text).split("\n")):
                if length > arguments.max_function:
                    problems.append(
                        f"{path}:{line}: {declaration} is {length} lines (at most {arguments.max_function})")
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
