#!/usr/bin/env python3
"""Checks that every repository path named in a comment or a document exists.

Usage: check_paths.py [REPO_DIR]   (default: the checkout this script is in)

Reads the files git tracks (and untracked ones it does not ignore): Markdown documents whole, and
the comments of code, build and config files. A word that starts with one of the repository's
top-level folders (`src/attention/host_stage.h`, `tools/plot_sweep.py`, `docs/cli.md`) must name
a file or folder that exists; a path with a placeholder or a pattern (`configs/models/X.yaml`,
`src/device/cuda_*.cpp`, `chapter_{1,2,3}.txt`, `docs/figures/<name>/`) must have its fixed
part exist. A file name written bare, without a folder (`knobs.h`, `README.md`, `plot_sweep.py`),
that looks like a document or a source of this repository (.md, .h, .hpp, .c, .cc, .cpp, .cu,
.cuh, .py, .sh, .yaml, .yml) must be the name of some file in it; names of other projects' files
are listed in EXTERNAL_NAMES, and an upper-case stem other than a document's (`FILE.yaml`,
`X.h`) is a placeholder. Nothing may point outside the repository (`../shared/...`). Prints one
line per problem, `FILE:LINE: ...`, and exits 1 when there is any.
"""
import os
import re
import subprocess
import sys

TOP_LEVEL = ("src", "kernels", "include", "tests", "tools", "scripts", "configs", "docs", "data",
             "bench", "cmake", "results", ".ci")
PATH_RE = re.compile(r"(?<![\w./-])(?:\./)?((?:%s)/[\w./*?{},<>$-]*)" % "|".join(re.escape(t) for t in TOP_LEVEL))
OUTSIDE_RE = re.compile(r"\.\./shared\b|\.\./\.\./")
# A component that stands for a name: X, N, NAME, YEAR_NAME_PARTY, a glob, a brace list, <name>, $VAR.
PLACEHOLDER_RE = re.compile(r"[*?{<$]|(?:^|[_.-])[A-Z]{1,}(?:[_.-]|$)")

# A file name without a folder: not inside a path (`a/b.h`), a glob (`cmd_*.cpp`) or `<sys.h>`.
BARE_EXTS = ("md", "h", "hpp", "c", "cc", "cpp", "cu", "cuh", "py", "sh", "yaml", "yml")
BARE_RE = re.compile(r"(?<![\w./*?{}<>$~\\-])([A-Za-z_][\w+-]*(?:\.[\w+-]+)*\.(?:%s))(?![\w/*{}-])"
                     % "|".join(BARE_EXTS))
# A stem that stands for a name: FILE, X, NAME_OF_RUN, test_X (but a document's upper-case stem,
# as in README.md, is a real name).
BARE_PLACEHOLDER_RE = re.compile(r"(?:^|[_.-])[A-Z][A-Z0-9]*(?:[_.-]|$)")
# Files of other projects that comments and documents name bare, and that are not in this
# repository. Keep this list short: each entry says whose file it is.
EXTERNAL_NAMES = {
    # Headers of the toolchains and libraries the build uses, and system headers.
    "cuda_runtime.h", "cuda.h", "cuda_bf16.h", "cuda_fp16.h", "cublas_v2.h", "immintrin.h",
    "httplib.h", "numa.h", "numaif.h", "dnnl.hpp",
    # llama.cpp, the peer the benchmarks compare with, and its CUDA backend.
    "llama.cpp", "ggml-cuda.cu",
    # The llama.cpp peer's comparison and build scripts, kept outside the repository
    # (docs/performance.md, "Against llama.cpp").
    "compare-llamacpp.sh", "peer-llamacpp.sh",
    # NVIDIA/RULER's generators and task list, which src/eval/ruler.h follows.
    "niah.py", "variable_tracking.py", "common_words_extraction.py", "freq_words_extraction.py",
    "synthetic.yaml",
    # snu-comparch/InfiniGen's controller, which src/attention/selectors/infinigen_skew.h follows.
    "partial_weight_generation_controller.py",
    # An example of a user's --policy-file in an error message (src/policy/knobs.h).
    "policy.yaml",
}

HASH_COMMENT = {".py", ".sh", ".cmake", ".yaml", ".yml", ".txt", ".toml", ".cfg"}
SLASH_COMMENT = {".cpp", ".h", ".hpp", ".cu", ".cuh", ".c"}


def tracked_files(repo):
    try:
        out = subprocess.run(["git", "-C", repo, "ls-files", "--cached", "--others", "--exclude-standard"],
                             check=True, capture_output=True, text=True).stdout
        files = out.splitlines()
    except (OSError, subprocess.CalledProcessError):  # not a git checkout (a source tarball)
        files = [os.path.relpath(os.path.join(d, f), repo) for d, dirs, names in os.walk(repo)
                 for f in names if not os.path.relpath(d, repo).startswith(("build", ".git"))]
    return [f for f in files if os.path.isfile(os.path.join(repo, f))]


def comment_lines(path, text):
    """(line number, text) of what a reader reads as prose: all of a document, comments of code."""
    name = os.path.basename(path)
    ext = os.path.splitext(name)[1]
    lines = text.splitlines()
    if ext == ".md":
        return list(enumerate(lines, 1))
    if ext in SLASH_COMMENT:
        result, in_block = [], False
        for n, line in enumerate(lines, 1):
            s = line.strip()
            if in_block or s.startswith("/*"):
                result.append((n, s))
                in_block = "*/" not in s
                continue
            if "//" in line:
                result.append((n, line[line.index("//") + 2:]))
        return result
    if ext in HASH_COMMENT or name in ("Makefile", "CMakeLists.txt") or path.startswith(".ci/"):
        return [(n, line[line.index("#") + 1:]) for n, line in enumerate(lines, 1)
                if "#" in line and not line.lstrip().startswith("#!")]
    return []


def fixed_part(path):
    """The leading components without a placeholder, and whether anything was cut."""
    parts = path.split("/")
    for i, p in enumerate(parts):
        if PLACEHOLDER_RE.search(p):
            return "/".join(parts[:i]), True
    return path, False


def exists(repo, path):
    """A file or folder, or a module named without its extension (`src/eval/bench` for .h/.cpp)."""
    full = os.path.join(repo, path)
    return os.path.exists(full) or any(os.path.exists(full + ext) for ext in (".h", ".cpp", ".py", ".cu"))


def is_placeholder_name(name):
    stem, ext = os.path.splitext(name)
    if ext == ".md" and len(stem) > 1:
        return False  # README.md: an upper-case name is how a document is named
    return bool(BARE_PLACEHOLDER_RE.search(stem))


def check(repo):
    problems = []
    files = tracked_files(repo)
    basenames = {os.path.basename(f) for f in files}
    for rel in files:
        try:
            with open(os.path.join(repo, rel), encoding="utf-8") as f:
                text = f.read()
        except (UnicodeDecodeError, OSError):
            continue
        for n, line in comment_lines(rel, text):
            if OUTSIDE_RE.search(line):
                problems.append(f"{rel}:{n}: points outside the repository: {line.strip()[:100]}")
            for m in PATH_RE.finditer(line):
                path = m.group(1).rstrip(".,;:)`'\"")
                if "{" not in path:
                    path = path.rstrip("}")
                path = re.sub(r"[`'\")\]]+.*$", "", path)
                fixed, cut = fixed_part(path)
                fixed = fixed.rstrip("/")
                if fixed.count("/") == 0 and cut:
                    continue  # `docs/<x>`-like: only the top-level folder is fixed
                if not exists(repo, fixed):
                    what = f"{fixed} (the fixed part of {path})" if cut else path
                    problems.append(f"{rel}:{n}: no such path: {what}")
            for m in BARE_RE.finditer(line):
                name = m.group(1)
                if name in basenames or name in EXTERNAL_NAMES or is_placeholder_name(name):
                    continue
                problems.append(f"{rel}:{n}: no file of that name in the repository: {name}")
    return problems


def main():
    repo = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    problems = check(repo)
    for p in problems:
        print(p)
    if problems:
        print(f"check_paths: {len(problems)} path(s) named in comments or documents do not exist", file=sys.stderr)
        return 1
    print("check_paths: every path named in comments and documents exists")
    return 0


if __name__ == "__main__":
    sys.exit(main())
