#!/usr/bin/env bash
# Writes docs/cli.md, the CLI reference, from the binary's own help: `hybridgen --help` and
# `hybridgen SUBCOMMAND --help` for every subcommand it lists, so the reference cannot drift from
# the options. With --check it writes nothing and fails (naming the first differing line) when
# docs/cli.md differs from what the binary prints; ctest runs that check. The file's last part,
# from the line HAND_MARKER to the end, is written by hand (what one help line cannot hold): it is
# copied from docs/cli.md as it is, so regenerating keeps it and --check compares the rest.
#
#   scripts/gen_cli_docs.sh [--check] [BINARY]     (default binary: build/bin/hybridgen)
set -euo pipefail
cd "$(dirname "$0")/.."

check=0
if [[ "${1:-}" == "--check" ]]; then
  check=1
  shift
fi
bin=${1:-build/bin/hybridgen}
doc=docs/cli.md
HAND_MARKER='<!-- Written by hand from here to the end; scripts/gen_cli_docs.sh keeps it as it is. -->'
hand_written=""
if [[ -f "$doc" ]]; then
  hand_written=$(awk -v m="$HAND_MARKER" '$0 == m {on = 1} on' "$doc")
fi
[[ -x "$bin" ]] || { echo "gen_cli_docs: $bin is not an executable (build it first: cmake --build build --target hybridgen)" >&2; exit 2; }

render() {
  local top
  top=$("$bin" --help)
  echo "# hybridgen command-line reference"
  echo
  echo "Generated from the binary's own \`--help\` by \`scripts/gen_cli_docs.sh\`; a test fails when"
  echo "this file and the binary differ. Regenerate it after changing an option:"
  echo "\`scripts/gen_cli_docs.sh build/bin/hybridgen\`. The [details of the options](#details-of-the-options)"
  echo "after the generated part are written by hand, and the script keeps them."
  echo
  # The subcommands, in the order the top-level help lists them (the lines after SUBCOMMANDS:).
  local subs
  subs=$(awk 'toupper($0) ~ /^SUBCOMMANDS:/ {on=1; next} on && NF {print $1}' <<<"$top")
  local links=()
  for s in $subs; do links+=("[\`$s\`](#hybridgen-$s)"); done
  echo "Subcommands: ${links[*]}"
  echo
  echo '## hybridgen'
  echo
  echo '```'
  echo "$top"
  echo '```'
  for s in $subs; do
    echo
    echo "## hybridgen $s"
    echo
    echo '```'
    "$bin" "$s" --help
    echo '```'
    if [[ "$s" == eval ]]; then
      # Each task has options of its own: the task names are the lines after "tasks:".
      local tasks
      tasks=$(awk '/^tasks:/ {on=1; next} on && NF == 0 {exit} on {print $1}' <<<"$("$bin" eval --help)")
      for t in $tasks; do
        echo
        echo "### hybridgen eval --task $t"
        echo
        echo '```'
        "$bin" eval --task "$t" --help
        echo '```'
      done
    fi
  done
  if [[ -n "$hand_written" ]]; then
    echo
    echo "$hand_written"
  fi
}

if ((check)); then
  [[ -f "$doc" ]] || { echo "gen_cli_docs: $doc is missing (run scripts/gen_cli_docs.sh)" >&2; exit 1; }
  if ! diff_out=$(diff <(render) "$doc"); then
    echo "gen_cli_docs: $doc differs from $bin --help; run scripts/gen_cli_docs.sh to regenerate it. First difference:" >&2
    head -n 6 <<<"$diff_out" >&2
    exit 1
  fi
  echo "gen_cli_docs: $doc matches $bin --help"
else
  render > "$doc"
  echo "gen_cli_docs: wrote $doc"
fi
