#!/usr/bin/env python3
"""Self-test of the repository checks: scripts/check_paths.py, check_readme.py and check_layers.py.

Usage: test_repo_checks.py   (exits 1 naming every case that went wrong)

Each case writes a small repository into a temporary folder (a git repository where git is
installed, so that check_paths reads the file list as it does in a checkout) and runs the check
on it as ctest does, then compares its exit status and output with what the case expects.
"""
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
FAILS = []


def make_repo(files):
    repo = tempfile.mkdtemp(prefix="hg-repo-check-")
    for rel, text in files.items():
        path = os.path.join(repo, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    if shutil.which("git"):
        subprocess.run(["git", "init", "-q", repo], check=True)
    return repo


def run(script, files, want_rc, want_in_output=(), name=""):
    repo = make_repo(files)
    try:
        r = subprocess.run([sys.executable, os.path.join(HERE, script), repo], capture_output=True, text=True)
    finally:
        shutil.rmtree(repo, ignore_errors=True)
    out = r.stdout + r.stderr
    if r.returncode != want_rc:
        FAILS.append(f"{script}, {name}: exit status {r.returncode}, expected {want_rc}; output:\n{out}")
    for text in want_in_output:
        if text not in out:
            FAILS.append(f"{script}, {name}: output lacks {text!r}; output:\n{out}")


# A repository whose every named path and bare name exists.
GOOD = {
    "README.md": "See [the architecture](docs/architecture.md), `src/policy/knobs.h` and `knobs.h`.\n",
    "docs/architecture.md": "The knobs are in knobs.h (src/policy/knobs.h); the README.md at the root.\n",
    "src/policy/knobs.h": "// The registry (knobs.cpp); a user's file is FILE.yaml, a test test_X.cpp.\n"
                          "// CUDA's cuda_runtime.h and llama.cpp's ggml-cuda.cu are other projects' files.\n",
    "src/policy/knobs.cpp": "// Declared in knobs.h.\nint x = 0;\n",
}


def check_paths_cases():
    run("check_paths.py", GOOD, 0, ["every path named"], "a clean repository")
    bad = dict(GOOD)
    bad["src/policy/knobs.h"] = GOOD["src/policy/knobs.h"] + "// Why: DESIGN.md, \"Policies\".\n"
    run("check_paths.py", bad, 1, ["src/policy/knobs.h:3: no file of that name in the repository: DESIGN.md"],
        "a comment names DESIGN.md, which does not exist")
    bad = dict(GOOD)
    bad["docs/architecture.md"] = "Style: STYLE.md. Options: options.h.\n"
    run("check_paths.py", bad, 1, ["docs/architecture.md:1: no file of that name in the repository: STYLE.md",
                                   "docs/architecture.md:1: no file of that name in the repository: options.h"],
        "a document names bare files that do not exist")
    bad = dict(GOOD)
    bad["src/policy/knobs.cpp"] = "// See src/policy/gone.h.\n"
    run("check_paths.py", bad, 1, ["no such path: src/policy/gone.h"], "a path under a top-level folder")
    bad = dict(GOOD)
    bad["docs/architecture.md"] = "The data is in ../shared/data.\n"
    run("check_paths.py", bad, 1, ["points outside the repository"], "a path into ../shared")
    # Code is not prose: a string in code that looks like a file name is not checked.
    ok = dict(GOOD)
    ok["src/policy/knobs.cpp"] = 'const char* f = "DESIGN.md";  // a name in code, not in the comment\n'
    run("check_paths.py", ok, 0, [], "a file name in code, outside a comment")


def check_readme_cases():
    run("check_readme.py", {"README.md": "line\n" * 300}, 0, [], "300 lines")
    run("check_readme.py", {"README.md": "line\n" * 301}, 1, ["README.md: 301 lines, the limit is 300"], "301 lines")
    run("check_readme.py", {"README.md": "Models\nData: `../shared/data/`\n"}, 1,
        ["README.md:2: points outside the repository"], "a path into ../shared")
    run("check_readme.py", {"docs/cli.md": "x\n"}, 1, ["README.md: cannot be read"], "no README.md")


HEADING = chr(35) * 2 + " "  # a Markdown section heading
# Layers, top to bottom, as docs/architecture.md's table lists them.
LAYERED = {
    "docs/architecture.md": "\n".join([
        HEADING + "Layers and boundaries", "", "| folder | what |", "|---|---|", "| `include/hybridgen/` | public |",
        "| `src/engine/` | top |", "| `src/policy/` | middle |", "| `kernels/cpu/` | kernels |",
        "| `src/util/` | bottom |", "", HEADING + "Next", "", "| `src/engine/x.h` | another table |", ""]),
    "src/engine/engine.cpp": '#include "policy/knobs.h"\n#include "util/pool.h"\n#include "hybridgen/engine.h"\n',
    "src/policy/knobs.h": '#include "kernels/cpu/dot.h"\n#include <vector>\n#include "policy/other.h"\n',
    "kernels/cpu/dot.h": '#include "util/pool.h"\n',
    "src/util/pool.h": "// the bottom\n",
}


def check_layers_cases():
    run("check_layers.py", LAYERED, 0, [], "every include points down")
    bad = dict(LAYERED)
    bad["src/policy/knobs.cpp"] = '#include "policy/knobs.h"\n#include "engine/engine.h"\n'
    run("check_layers.py", bad, 1, ["src/policy/knobs.cpp:2: 'policy' includes \"engine/engine.h\" of the layer above it"],
        "a folder includes the layer above it")
    bad = dict(LAYERED)
    bad["kernels/cpu/dot.h"] = '#include "policy/knobs.h"\n'
    run("check_layers.py", bad, 1, ["kernels/cpu/dot.h:1: 'kernels' includes"], "kernels include a layer above")
    bad = dict(LAYERED)
    bad["src/late/x.cpp"] = "int x;\n"
    run("check_layers.py", bad, 1, ["folder 'late' is not a layer"], "a folder the table does not name")


def main():
    check_paths_cases()
    check_readme_cases()
    check_layers_cases()
    for f in FAILS:
        print("FAIL:", f)
    if FAILS:
        return 1
    print("test_repo_checks: check_paths.py, check_readme.py and check_layers.py catch every case")
    return 0


if __name__ == "__main__":
    sys.exit(main())
