#!/usr/bin/env python3
"""Checks that every folder of the code calls only the layers below it.

Usage: check_layers.py [REPO_DIR]   (default: the checkout this script is in)

The layers are the rows of the table under "## Layers and boundaries" in docs/architecture.md,
top to bottom: a row names a folder (`src/engine/`, `kernels/cpu/`, ...); `src/X/...` is layer X,
everything under `kernels/` is one layer, and `include/hybridgen/` (the public types) may be
included from anywhere. A file of layer A may include a file of layer A or of a layer below it;
an #include "B/..." of a layer above A is a problem. So is a folder of src/ the table does not
name. Prints one line per problem, `FILE:LINE: ...`, and exits 1 when there is any.
"""
import os
import re
import subprocess
import sys

INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
ROW_RE = re.compile(r"^\|\s*`([^`]+)`")


def layer_of(path):
    """The layer a repository path or an include path belongs to, or None (public or external)."""
    parts = path.split("/")
    if parts[0] == "src" and len(parts) > 2:
        return parts[1]
    if parts[0] == "kernels":
        return "kernels"
    return None


def read_layers(repo):
    """The layers in the architecture's table order, top first."""
    text = open(os.path.join(repo, "docs", "architecture.md"), encoding="utf-8").read()
    section = text.split("## Layers and boundaries", 1)
    if len(section) < 2:
        raise SystemExit("docs/architecture.md: no '## Layers and boundaries' section")
    order = []
    for line in section[1].split("\n## ", 1)[0].splitlines():
        m = ROW_RE.match(line)
        if not m:
            continue
        layer = layer_of(m.group(1).rstrip("/") + "/x")
        if layer and layer not in order:
            order.append(layer)
    return order


def code_files(repo):
    try:
        out = subprocess.run(["git", "-C", repo, "ls-files", "--cached", "--others", "--exclude-standard",
                              "src", "kernels"], check=True, capture_output=True, text=True).stdout
        files = out.splitlines()
    except (OSError, subprocess.CalledProcessError):
        files = [os.path.relpath(os.path.join(d, f), repo) for top in ("src", "kernels")
                 for d, _, names in os.walk(os.path.join(repo, top)) for f in names]
    return [f for f in files if f.endswith((".h", ".hpp", ".cpp", ".cu", ".cuh"))
            and os.path.isfile(os.path.join(repo, f))]


def check(repo):
    order = read_layers(repo)
    rank = {layer: i for i, layer in enumerate(order)}
    problems = []
    for f in sorted(code_files(repo)):
        own = layer_of(f)
        if own not in rank:
            problems.append(f"{f}:1: folder '{own}' is not a layer of docs/architecture.md's table")
            continue
        with open(os.path.join(repo, f), encoding="utf-8", errors="replace") as fh:
            for n, line in enumerate(fh, 1):
                m = INCLUDE_RE.match(line)
                if not m:
                    continue
                target = layer_of("src/" + m.group(1)) if not m.group(1).startswith("kernels/") else "kernels"
                if target is None or target not in rank or target == own:
                    continue
                if rank[target] < rank[own]:
                    problems.append(f"{f}:{n}: '{own}' includes \"{m.group(1)}\" of the layer above it, '{target}' "
                                    f"(docs/architecture.md: a folder calls only the layers below it)")
    return problems


def main():
    repo = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    problems = check(repo)
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
