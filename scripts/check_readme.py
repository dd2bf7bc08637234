#!/usr/bin/env python3
"""Checks that README.md stays a manual: at most 300 lines, and no path outside the repository.

Usage: check_readme.py [REPO_DIR]   (default: the checkout this script is in)

The README says what hybridgen is and how to use it; measurements, with their commands, machines
and dates, live in docs/performance.md, and every option's details in docs/cli.md. A README that
passes 300 lines has started to collect them again. Prints one line per problem and exits 1 when
there is any: `README.md: N lines, the limit is 300`, or `README.md:LINE: points outside the
repository: ...` for a line that names a path into `../shared`.
"""
import os
import re
import sys

LIMIT = 300
OUTSIDE_RE = re.compile(r"\.\./shared\b")


def check(repo):
    path = os.path.join(repo, "README.md")
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        return [f"README.md: cannot be read ({e.strerror})"]
    problems = []
    if len(lines) > LIMIT:
        problems.append(f"README.md: {len(lines)} lines, the limit is {LIMIT}")
    for n, line in enumerate(lines, 1):
        if OUTSIDE_RE.search(line):
            problems.append(f"README.md:{n}: points outside the repository: {line.strip()[:100]}")
    return problems


def main():
    repo = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    problems = check(repo)
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
