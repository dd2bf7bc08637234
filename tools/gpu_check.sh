#!/usr/bin/env bash
# One prepared check of the CUDA backend on a lent GPU machine (written for one H200).
# Run from the repository root; writes everything under $OUT/logs (default ./gpu_check_out/logs),
# packed into $OUT/logs.tar.gz at the end:
#   env.txt        nvidia-smi, nvcc, compute-sanitizer versions
#   configure.log, build.log (with -Xptxas -v: registers / shared memory / spills per kernel)
#   test_*.log, test_*.xml       the CUDA GoogleTest binaries
#   sanitizer_*.log              compute-sanitizer memcheck / racecheck on a subset
#   bench_*.json                 hybridgen bench rows (llama-3.1-8b shape, bf16, synthetic weights)
#   summary.json                 one object with all of the above condensed
# Budget: under 8 minutes on 16 cores (build ~2-3 min, tests ~1-2 min, sanitizer <=3.5 min, bench ~2 min);
# every step has its own timeout, a failing step is recorded and the script goes on.
#
# The machine's image may lack the Debian dev packages the project links (oneDNN, spdlog,
# yaml-cpp, CLI11, GoogleTest, ...). Then configure fails there, and the fallback is to build here
# and carry the binaries with their shared libraries:
#   here:   tools/gpu_check.sh --prepare-carry     (builds build-gpu/, packs build-gpu/carry/bundle.tar.xz)
#   there:  run with carry ["build-gpu/carry"]: the script unpacks the bundle and uses its binaries.
# The carry travels with the working tree, 64 MiB in all (the tree is ~33 MiB): oneDNN alone is
# 40 MB, so binaries and libraries travel xz-compressed (~11 MB) and are unpacked under /tmp there.
# Only 8 files come back from $OUT: the logs are packed into $OUT/logs.tar.gz at the end, beside
# summary.json and gpu_check.log.
set -u
cd "$(dirname "$0")/.." || exit 1
ROOT=$PWD
BUILD=build-gpu
CARRY=$BUILD/carry
BUNDLE=$CARRY/bundle.tar.xz
TARGETS="test_cuda_ops test_device_attention test_cuda_hybrid test_cuda_engine hybridgen"
START=$(date +%s)
elapsed() { echo $(($(date +%s) - START)); }

configure_and_build() {  # $1: log dir
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DHG_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
    >"$1/configure.log" 2>&1 || return 1
  # shellcheck disable=SC2086
  cmake --build "$BUILD" -j "$(nproc)" --target $TARGETS >"$1/build.log" 2>&1 || return 2
  return 0
}

if [ "${1:-}" = "--prepare-carry" ]; then
  mkdir -p "$BUILD"
  configure_and_build "$BUILD" || { echo "build failed: see $BUILD/configure.log / build.log"; exit 1; }
  STAGE=$BUILD/carry-stage
  rm -rf "$STAGE" "$CARRY" && mkdir -p "$STAGE/bin" "$STAGE/lib" "$CARRY"
  for t in $TARGETS; do cp "$BUILD/bin/$t" "$STAGE/bin/"; done
  cp "$BUILD/build.log" "$STAGE/build.log"
  echo "$ROOT" >"$STAGE/source_dir.txt"  # the test binaries find tools/ and configs/ there
  # Shared libraries outside glibc / the CUDA toolkit / the driver (those are on the GPU image).
  for t in $TARGETS; do ldd "$BUILD/bin/$t"; done | awk '/=> \//{print $3}' | sort -u | while read -r lib; do
    case "$(basename "$lib")" in
      # glibc, the GCC runtime (the image has a newer one) and CUDA stay the image's own.
      libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*|libstdc++.so*|libgcc_s.so*) ;;
      libcuda.so*|libcudart.so*|libcublas*.so*) ;;
      *) cp -L "$lib" "$STAGE/lib/" ;;
    esac
  done
  strip "$STAGE"/bin/* 2>/dev/null
  tar -C "$STAGE" -cf - . | xz -9 -T0 >"$BUNDLE" || { echo "packing $BUNDLE failed"; exit 1; }
  rm -rf "$STAGE"
  du -sh "$BUNDLE"
  exit 0
fi

OUT=${OUT:-$ROOT/gpu_check_out}
FINAL=$OUT
OUT=$FINAL/logs  # packed into $FINAL/logs.tar.gz at the end
mkdir -p "$OUT"
exec > >(tee -a "$FINAL/gpu_check.log") 2>&1
echo "gpu_check: $(date -u +%FT%TZ) in $ROOT"

{
  nvidia-smi 2>&1
  nvcc --version 2>&1
  compute-sanitizer --version 2>&1 | head -3
  python3 -c 'import numpy; print("numpy", numpy.__version__)' 2>&1
} >"$OUT/env.txt"

# ---- build (or carried binaries) ----
BIN=$BUILD/bin
BUILD_STATUS=none
# A carried bundle comes first: it was packed for this run, and building there costs device minutes.
UNPACKED=/tmp/hg-carry
if [ -f "$BUNDLE" ]; then
  rm -rf "$UNPACKED" && mkdir -p "$UNPACKED"
  # python3's tarfile reads xz where the image has no xz binary.
  tar -C "$UNPACKED" -xJf "$BUNDLE" 2>/dev/null || python3 -m tarfile -e "$BUNDLE" "$UNPACKED" ||
    echo "cannot unpack $BUNDLE"
fi
if [ -x "$UNPACKED/bin/test_cuda_ops" ]; then
  CARRY=$UNPACKED
  BUILD_STATUS=carried
  BIN=$CARRY/bin
  export LD_LIBRARY_PATH="$CARRY/lib:${LD_LIBRARY_PATH:-}"
  cp "$CARRY/build.log" "$OUT/build.log" 2>/dev/null
  BAKED=$(cat "$CARRY/source_dir.txt" 2>/dev/null)
  if [ -n "$BAKED" ] && [ ! -e "$BAKED" ]; then
    mkdir -p "$(dirname "$BAKED")" 2>/dev/null && ln -s "$ROOT" "$BAKED" 2>/dev/null ||
      echo "warning: cannot link $BAKED -> $ROOT; tests that read tools/ or configs/ will fail"
  fi
elif configure_and_build "$OUT"; then
  BUILD_STATUS=ok
else
  BUILD_STATUS=failed
fi
echo "[$(elapsed)s] build: $BUILD_STATUS (binaries in $BIN)"
grep -E "spill (stores|loads)" "$OUT/build.log" 2>/dev/null | grep -v " 0 bytes spill stores, 0 bytes spill loads" \
  >"$OUT/spills.txt"

# ---- tests ----
run_test() {  # name, timeout, extra args
  local name=$1 limit=$2
  shift 2
  if [ ! -x "$BIN/$name" ]; then echo "missing" >"$OUT/$name.log"; return; fi
  timeout "$limit" "$BIN/$name" --gtest_output="xml:$OUT/$name.xml" "$@" >"$OUT/$name.log" 2>&1
  echo "$?" >"$OUT/$name.rc"
  echo "[$(elapsed)s] $name rc=$(cat "$OUT/$name.rc")"
}
if [ "$BUILD_STATUS" != failed ]; then
  run_test test_cuda_ops 150
  run_test test_device_attention 150
  run_test test_cuda_hybrid 150
  run_test test_cuda_engine 240

  # ---- compute-sanitizer on a subset (it slows kernels 10-100x) ----
  if command -v compute-sanitizer >/dev/null 2>&1; then
    timeout 100 compute-sanitizer --tool memcheck --leak-check full --error-exitcode 3 "$BIN/test_cuda_ops" \
      --gtest_filter='CudaOps.Elementwise:CudaOps.KvStore*:CudaOps.Rope*:CudaOps.Matmul*' >"$OUT/sanitizer_memcheck_ops.log" 2>&1
    echo "$?" >"$OUT/sanitizer_memcheck_ops.rc"
    timeout 100 compute-sanitizer --tool memcheck --error-exitcode 3 "$BIN/test_device_attention" \
      --gtest_filter='CudaAttention.DecodeHeadShapes:CudaAttention.LongPrefillThenDecode' >"$OUT/sanitizer_memcheck_attention.log" 2>&1
    echo "$?" >"$OUT/sanitizer_memcheck_attention.rc"
    timeout 100 compute-sanitizer --tool racecheck --error-exitcode 3 "$BIN/test_device_attention" \
      --gtest_filter='CudaAttention.DecodeHeadShapes' >"$OUT/sanitizer_racecheck_attention.log" 2>&1
    echo "$?" >"$OUT/sanitizer_racecheck_attention.rc"
    echo "[$(elapsed)s] compute-sanitizer done"
  else
    echo "compute-sanitizer not found" >"$OUT/sanitizer_memcheck_ops.log"
  fi

  # ---- benchmark (synthetic weights: no model files needed) ----
  # The bench's decode test (tgN) starts from an empty cache; decode at long context is covered by
  # the attention tests only until the bench grows a --depth option.
  if [ -x "$BIN/hybridgen" ]; then
    timeout 240 "$BIN/hybridgen" bench --synthetic configs/models/llama-3.1-8b.yaml --synthetic-dtype bf16 \
      --device cuda -p 2048 -n 32 -b 1 -r 2 -o json >"$OUT/bench_llama31_8b.json" 2>"$OUT/bench_llama31_8b.err"
    echo "$?" >"$OUT/bench_llama31_8b.rc"
    echo "[$(elapsed)s] bench 8b rc=$(cat "$OUT/bench_llama31_8b.rc")"
    timeout 90 "$BIN/hybridgen" bench --synthetic configs/models/llama-3.1-8b.yaml --synthetic-dtype bf16 \
      --device cuda -p 0 -n 32 -b 4 -r 2 -o json >"$OUT/bench_llama31_8b_b4.json" 2>"$OUT/bench_llama31_8b_b4.err"
    echo "$?" >"$OUT/bench_llama31_8b_b4.rc"
    echo "[$(elapsed)s] bench 8b batch 4 rc=$(cat "$OUT/bench_llama31_8b_b4.rc")"
  fi
fi

# ---- summary ----
python3 - "$OUT" "$BUILD_STATUS" "$(elapsed)" <<'PY'
import glob, json, os, sys
import xml.etree.ElementTree as ET
out, build_status, seconds = sys.argv[1], sys.argv[2], int(sys.argv[3])
def read(p, default=""):
    try:
        with open(p) as f: return f.read()
    except OSError: return default
s = {"build": build_status, "seconds": seconds, "tests": {}, "sanitizer": {}, "bench": {}}
s["gpu"] = next((l.strip() for l in read(os.path.join(out, "env.txt")).splitlines() if "H200" in l or "NVIDIA" in l), "")
s["spills"] = [l.strip() for l in read(os.path.join(out, "spills.txt")).splitlines() if l.strip()]
if build_status == "failed":
    s["configure_tail"] = read(os.path.join(out, "configure.log"))[-3000:]
    s["build_tail"] = read(os.path.join(out, "build.log"))[-3000:]
for x in sorted(glob.glob(os.path.join(out, "test_*.xml"))):
    name = os.path.basename(x)[:-4]
    try:
        root = ET.parse(x).getroot()
        failed = [f"{c.get('classname')}.{c.get('name')}: {(c.find('failure').get('message') or '')[:400]}"
                  for c in root.iter("testcase") if c.find("failure") is not None]
        skipped = sum(1 for c in root.iter("testcase") if c.find("skipped") is not None)
        s["tests"][name] = {"tests": int(root.get("tests", 0)), "failures": len(failed), "skipped": skipped,
                            "failed": failed, "rc": read(os.path.join(out, name + ".rc")).strip()}
    except Exception as e:  # a crash leaves no (or a partial) XML
        s["tests"][name] = {"error": str(e), "rc": read(os.path.join(out, name + ".rc")).strip()}
for log in sorted(glob.glob(os.path.join(out, "test_*.log"))):
    name = os.path.basename(log)[:-4]
    if name not in s["tests"]:
        s["tests"][name] = {"rc": read(os.path.join(out, name + ".rc")).strip(), "log_tail": read(log)[-2000:]}
for log in sorted(glob.glob(os.path.join(out, "sanitizer_*.log"))):
    name = os.path.basename(log)[:-4]
    text = read(log)
    s["sanitizer"][name] = {"rc": read(os.path.join(out, name + ".rc")).strip(),
                            "summary": [l for l in text.splitlines() if "ERROR SUMMARY" in l or "RACECHECK SUMMARY" in l][-3:],
                            "first_errors": [l for l in text.splitlines() if l.startswith("=========") and ("Invalid" in l or "hazard" in l.lower())][:5]}
for j in sorted(glob.glob(os.path.join(out, "bench_*.json"))):
    name = os.path.basename(j)[:-5]
    try:
        rows = json.loads(read(j) or "[]")
        s["bench"][name] = [{k: r.get(k) for k in ("model", "backend", "batch", "test", "avg_ts", "stddev_ts", "weight_gbps")} for r in rows]
    except Exception as e:
        s["bench"][name] = {"error": str(e), "rc": read(os.path.join(out, name + ".rc")).strip(),
                            "stderr_tail": read(os.path.join(out, name + ".err"))[-1500:]}
with open(os.path.join(os.path.dirname(out), "summary.json"), "w") as f:
    json.dump(s, f, indent=2)
print(json.dumps(s, indent=2)[:6000])
PY
tar -C "$FINAL" -czf "$FINAL/logs.tar.gz" logs && rm -rf "$OUT"
echo "[$(elapsed)s] gpu_check done"
