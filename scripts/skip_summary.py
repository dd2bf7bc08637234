#!/usr/bin/env python3
"""One line that says which tests ctest skipped and why, grouped by reason.

Usage: skip_summary.py CTEST_JUNIT.xml   (written by `ctest --output-junit`)

GoogleTest prints a skipped test's reason on the line after `FILE:LINE: Skipped`; ctest marks the
test skipped through the `[  SKIPPED ]` line that gtest_discover_tests registers. A skip without
a reason is reported as such, so that every skip can say why.
"""
import collections
import sys
import xml.etree.ElementTree as ET


def skip_reason(output: str) -> str:
    lines = output.splitlines()
    for i, line in enumerate(lines):
        if line.rstrip().endswith(": Skipped") and i + 1 < len(lines):
            reason = lines[i + 1].strip()
            if reason and not reason.startswith("[  SKIPPED ]"):
                return reason
    return "no reason given"


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    try:
        root = ET.parse(sys.argv[1]).getroot()
    except (OSError, ET.ParseError) as e:
        print(f"skip summary: cannot read {sys.argv[1]}: {e}", file=sys.stderr)
        return 2
    reasons = collections.Counter()
    total = 0
    for case in root.iter("testcase"):
        total += 1
        if case.find("skipped") is None:
            continue
        out = case.find("system-out")
        reasons[skip_reason(out.text if out is not None and out.text else "")] += 1
    skipped = sum(reasons.values())
    if not skipped:
        print(f"skipped 0 of {total} tests")
        return 0
    parts = [f"{n} × {reason}" for reason, n in sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0]))]
    print(f"skipped {skipped} of {total} tests: " + "; ".join(parts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
