#!/usr/bin/env python3
"""Checks that no function in src/ is longer than 100 lines (kernels/ aside).

Usage: check_function_length.py [REPO_DIR]   (default: the checkout this script is in)
       check_function_length.py --self-test  (the check fails on a 101-line function, passes on 100)

A function that reads as the steps of its work fits on a screen or two; past 100 lines it is
several functions waiting to be named. Where a function starts and ends comes from
universal-ctags (`ctags --fields=+ne`: the `line:` and `end:` of every tag of kind f), so a
function's length counts its signature, its body and the blank lines and comments inside it.
Prints one line per function over the limit, `FILE:LINE: NAME is N lines (limit 100)`, and exits
1 when there is any; 2 when ctags is missing (scripts/setup.sh installs universal-ctags).
"""
import os
import shutil
import subprocess
import sys
import tempfile

LIMIT = 100
SOURCE_EXTENSIONS = (".cpp", ".h", ".hpp", ".cc")


def source_files(repo):
    files = []
    for folder, _, names in os.walk(os.path.join(repo, "src")):
        files += [os.path.join(folder, n) for n in names if n.endswith(SOURCE_EXTENSIONS)]
    return sorted(files)


def functions(files):
    """(file, line, name, lines) of every function definition ctags finds in `files`."""
    out = subprocess.run(["ctags", "--fields=+ne", "--excmd=number", "--language-force=C++", "-o", "-"] + files,
                         check=True, capture_output=True, text=True).stdout
    found = []
    for tag in out.splitlines():
        name, path, rest = tag.split("\t", 2)
        fields = rest.split(';"\t', 1)[1].split("\t") if ';"\t' in rest else []
        if not fields or fields[0] != "f" or name.startswith("__anon"):  # lambdas lie inside their function
            continue
        values = dict(f.split(":", 1) for f in fields[1:] if ":" in f)
        if "line" not in values or "end" not in values:
            continue
        scope = next((values[k] for k in ("class", "struct") if k in values), "")
        qualified = scope.split("::")[-1] + "::" + name if scope else name
        line = int(values["line"])
        found.append((path, line, qualified, int(values["end"]) - line + 1))
    return found


def too_long(repo):
    """Lines `FILE:LINE: NAME is N lines (limit 100)`, FILE relative to `repo`."""
    files = source_files(repo)
    if not files:
        return []
    return [f"{os.path.relpath(path, repo)}:{line}: {name} is {n} lines (limit {LIMIT})"
            for path, line, name, n in sorted(functions(files)) if n > LIMIT]


def function_of(name, lines):
    body = "\n".join(f"  total += {i};" for i in range(lines - 4))
    return f"int {name}() {{\n  int total = 0;\n{body}\n  return total;\n}}\n"


def self_test():
    """The check names a 101-line function and passes a 100-line one beside it."""
    with tempfile.TemporaryDirectory() as repo:
        os.makedirs(os.path.join(repo, "src", "eval"))
        with open(os.path.join(repo, "src", "eval", "long.cpp"), "w") as f:
            f.write(function_of("at_the_limit", LIMIT) + "\n" + function_of("over_the_limit", LIMIT + 1))
        problems = too_long(repo)
    expected = [f"src/eval/long.cpp:{LIMIT + 2}: over_the_limit is {LIMIT + 1} lines (limit {LIMIT})"]
    if problems != expected:
        print(f"self-test failed: expected {expected}, got {problems}")
        return 1
    print("self-test passed: a 101-line function fails the check, a 100-line one does not")
    return 0


def main():
    if not shutil.which("ctags"):
        print("check_function_length.py: ctags not found (scripts/setup.sh installs universal-ctags)", file=sys.stderr)
        return 2
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    if len(sys.argv) > 2 or sys.argv[1:2] and sys.argv[1].startswith("-"):
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    repo = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    problems = too_long(repo)
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
