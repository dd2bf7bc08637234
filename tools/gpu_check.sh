#!/usr/bin/env bash
# One prepared check of the CUDA backend on a lent GPU machine (one H100 or H200), whose verdict
# comes back from one call: one deadline for the whole run (GPU_CHECK_SECONDS, 450 s: under the
# 8 minutes a call may take, with room for the machine's start), each step given what remains,
# and summary.json rewritten after every step, so a hang or a kill loses only the step it hit.
#
#   here:   tools/gpu_check.sh --prepare-carry
#           builds build-gpu/ (sm_90), packs its binaries and the shared libraries the GPU image
#           may lack into build-gpu/carry/bundle.tar.xz, checks that the bundle and the working
#           tree fit the 64 MiB a call carries, and prints the call to make.
#   there:  OUT=$OUT tools/gpu_check.sh        (carry ["build-gpu/carry"])
#   here:   tools/gpu_check.sh --emulate
#           the rehearsal: every step against the emulated device (--device cuda-emu,
#           HG_TEST_CUDA=emu; compute-sanitizer's steps run their test filters plainly, the
#           benches at small sizes), so that on a GPU only the GPU itself is new.
#
# Steps (logs under $OUT/logs, packed into $OUT/logs.tar.gz at the end; $OUT/summary.json and
# $OUT/gpu_check.log beside it):
#   env        nvidia-smi, nvcc, compute-sanitizer, the interpreter with numpy (HG_PYTHON)
#   build      the carried binaries, or a build there if none came
#   tests      test_cuda_ops, test_device_attention (decode at 32K), test_cuda_hybrid,
#              test_device_copies (two streams), test_cuda_engine (every tiny model, every
#              policy the device runs: full, offload, cpu-attn, hybrid, hgca, infinigen, quest,
#              streaming, against the CPU device), ReferenceCuda (tiny models against numpy)
#   sanitizer  compute-sanitizer memcheck and racecheck on the decode, prefill and hybrid kernels
#   bench      synthetic Qwen2.5-0.5B and Llama-3.1-8B shapes (bf16), full / offload / hybrid,
#              decode at depth 8K and 32K, with the weights' GB/s against the card's HBM peak and
#              the launches / graphs / syncs per token; then full without CUDA graphs
#              (HG_CUDA_GRAPHS=0), hybrid without host callbacks (HG_CUDA_HOST_CALLBACKS=0: a
#              wait a layer) and the 8B shape in Q4_0, which the device keeps in its blocks
set -u
cd "$(dirname "$0")/.." || exit 1
ROOT=$PWD
BUILD=build-gpu
CARRY=$BUILD/carry
BUNDLE=$CARRY/bundle.tar.xz
TARGETS="test_cuda_ops test_device_attention test_cuda_hybrid test_device_copies test_cuda_engine test_e2e_reference hybridgen"
CARRY_LIMIT=$((64 << 20))

configure_and_build() {  # $1: log dir, $2: extra cmake flags
  # shellcheck disable=SC2086
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release ${2:-} >"$1/configure.log" 2>&1 || return 1
  # shellcheck disable=SC2086
  cmake --build "$BUILD" -j "$(nproc)" --target $TARGETS >"$1/build.log" 2>&1 || return 2
}

# Bytes the call would carry: the working tree (tracked and untracked files git does not ignore).
tree_bytes() {
  git ls-files -z --cached --others --exclude-standard | xargs -0 stat -c %s 2>/dev/null | awk '{s += $1} END {print s + 0}'
}

if [ "${1:-}" = "--prepare-carry" ]; then
  mkdir -p "$BUILD"
  configure_and_build "$BUILD" "-DHG_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90" ||
    { echo "build failed: see $BUILD/configure.log / build.log"; exit 1; }
  STAGE=$BUILD/carry-stage
  rm -rf "$STAGE" "$CARRY" && mkdir -p "$STAGE/bin" "$STAGE/lib" "$CARRY"
  for t in $TARGETS; do cp "$BUILD/bin/$t" "$STAGE/bin/"; done
  cp "$BUILD/build.log" "$STAGE/build.log"
  echo "$ROOT" >"$STAGE/source_dir.txt"  # the test binaries find tools/ and configs/ there
  # Shared libraries outside glibc / the GCC runtime / the CUDA toolkit and driver (the GPU image has those).
  for t in $TARGETS; do ldd "$BUILD/bin/$t"; done | awk '/=> \//{print $3}' | sort -u | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*|libstdc++.so*|libgcc_s.so*) ;;
      libcuda.so*|libcudart.so*|libcublas*.so*) ;;
      *) cp -L "$lib" "$STAGE/lib/" ;;
    esac
  done
  strip "$STAGE"/bin/* 2>/dev/null
  tar -C "$STAGE" -cf - . | xz -9 -T0 >"$BUNDLE" || { echo "packing $BUNDLE failed"; exit 1; }
  rm -rf "$STAGE"
  bundle=$(stat -c %s "$BUNDLE")
  tree=$(tree_bytes)
  total=$((bundle + tree))
  echo "bundle $((bundle >> 20)) MiB + working tree $((tree >> 20)) MiB = $((total >> 20)) MiB of $((CARRY_LIMIT >> 20)) MiB"
  if [ "$total" -gt "$CARRY_LIMIT" ]; then
    echo "too large to carry: the call would be refused"
    exit 1
  fi
  echo 'run with carry ["build-gpu/carry"], timeout_s 540:'
  echo '  OUT=$OUT timeout 500 bash tools/gpu_check.sh > $OUT/run.log 2>&1; cat $OUT/summary.json'
  exit 0
fi

EMULATE=0
[ "${1:-}" = "--emulate" ] && EMULATE=1
DEADLINE=${GPU_CHECK_SECONDS:-450}
START=$(date +%s)
elapsed() { echo $(($(date +%s) - START)); }

OUT=${OUT:-$ROOT/gpu_check_out}
FINAL=$OUT
OUT=$FINAL/logs  # packed into $FINAL/logs.tar.gz at the end
rm -rf "$OUT" && mkdir -p "$OUT"
exec > >(tee -a "$FINAL/gpu_check.log") 2>&1
echo "gpu_check: $(date -u +%FT%TZ) in $ROOT$([ $EMULATE = 1 ] && echo ' (emulated device)')"

# The interpreter the tests' references need (numpy): the environment's, else the first that has it.
PY=${HG_PYTHON:-}
if [ -z "$PY" ]; then
  for p in python3 /usr/bin/python3 /usr/local/bin/python3 python; do
    if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import numpy' 2>/dev/null; then PY=$(command -v "$p"); break; fi
  done
fi
export HG_PYTHON=${PY:-python3}

# The summary, rewritten after every step from the logs so far.
summarize() {
  python3 - "$OUT" "$FINAL/summary.json" "$(elapsed)" "$EMULATE" <<'PY'
import glob, json, os, sys
import xml.etree.ElementTree as ET
out, dest, seconds, emulated = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1"
def read(p, default=""):
    try:
        with open(p, errors="replace") as f: return f.read()
    except OSError: return default
steps = [json.loads(l) for l in read(os.path.join(out, "steps.jsonl")).splitlines() if l.strip()]
s = {"emulated_device": emulated, "seconds": seconds, "steps": steps, "tests": {}, "sanitizer": {}, "bench": {}}
env = read(os.path.join(out, "env.txt"))
s["gpu"] = next((l.strip() for l in env.splitlines() if "H100" in l or "H200" in l or "NVIDIA" in l), "")
s["spills"] = [l.strip() for l in read(os.path.join(out, "spills.txt")).splitlines() if l.strip()]
for x in sorted(glob.glob(os.path.join(out, "test_*.xml"))):
    name = os.path.basename(x)[:-4]
    try:
        root = ET.parse(x).getroot()
        failed = [f"{c.get('classname')}.{c.get('name')}: {(c.find('failure').get('message') or '')[:400]}"
                  for c in root.iter("testcase") if c.find("failure") is not None]
        skipped = sum(1 for c in root.iter("testcase") if c.find("skipped") is not None)
        s["tests"][name] = {"tests": int(root.get("tests", 0)), "failures": len(failed), "skipped": skipped,
                            "failed": failed}
    except Exception as e:  # a crash or a kill leaves no (or a partial) XML
        s["tests"][name] = {"error": str(e), "log_tail": read(os.path.join(out, name + ".log"))[-1500:]}
for log in sorted(glob.glob(os.path.join(out, "test_*.log"))):
    name = os.path.basename(log)[:-4]
    if name not in s["tests"]:
        s["tests"][name] = {"log_tail": read(log)[-1500:]}
for log in sorted(glob.glob(os.path.join(out, "sanitizer_*.log"))):
    text = read(log)
    s["sanitizer"][os.path.basename(log)[:-4]] = {
        "summary": [l for l in text.splitlines() if "ERROR SUMMARY" in l or "RACECHECK SUMMARY" in l][-3:],
        "first_errors": [l for l in text.splitlines()
                         if l.startswith("=========") and ("Invalid" in l or "hazard" in l.lower())][:5],
        "gtest": [l for l in text.splitlines() if "PASSED" in l or "FAILED" in l][-3:]}
keys = ("backend", "policy", "batch", "test", "avg_ts", "stddev_ts", "weight_gbps", "peak_fraction",
        "launches_per_token", "graph_launches_per_token", "syncs_per_token", "h2d_bytes_per_token", "d2h_bytes_per_token", "t_dev_ms", "t_host_ms")
for j in sorted(glob.glob(os.path.join(out, "bench_*.json"))):
    name = os.path.basename(j)[:-5]
    try:
        rows = json.loads(read(j) or "[]")
        s["bench"][name] = [{k: r.get(k) for k in keys if k in r} for r in rows]
    except Exception as e:
        s["bench"][name] = {"error": str(e), "stderr_tail": read(os.path.join(out, name + ".err"))[-1500:]}
with open(dest + ".tmp", "w") as f:
    json.dump(s, f, indent=2)
os.replace(dest + ".tmp", dest)
PY
}

# run_step NAME CAP_SECONDS COMMAND...: runs under min(CAP, what the deadline leaves), records
# its exit status and time in steps.jsonl and rewrites the summary. 124 is a timeout.
RESERVE=15  # kept for the last summary and the packing
run_step() {
  local name=$1 cap=$2
  shift 2
  local left=$((DEADLINE - $(elapsed) - RESERVE))
  local limit=$((cap < left ? cap : left))
  local t0 rc
  t0=$(elapsed)
  if [ "$limit" -lt 5 ]; then
    rc=skipped
  else
    # bash -c: the command may be one of this script's functions (exported below).
    timeout -k 5 "$limit" bash -c '"$@"' _ "$@" >"$OUT/$name.log" 2>&1
    rc=$?
  fi
  printf '{"step": "%s", "rc": "%s", "limit_s": %d, "seconds": %d}\n' "$name" "$rc" "$limit" $(($(elapsed) - t0)) \
    >>"$OUT/steps.jsonl"
  echo "[$(elapsed)s] $name: rc=$rc (limit ${limit}s)"
  summarize
}

{
  if [ $EMULATE = 0 ]; then
    nvidia-smi 2>&1
    nvcc --version 2>&1
    compute-sanitizer --version 2>&1 | head -3
  else
    echo "emulated device (--emulate): no GPU"
  fi
  echo "HG_PYTHON=$HG_PYTHON: $("$HG_PYTHON" -c 'import numpy; print("numpy", numpy.__version__)' 2>&1)"
  nproc
} >"$OUT/env.txt"

# ---- build (or carried binaries) ----
BIN=$BUILD/bin
UNPACKED=/tmp/hg-carry
build_or_unpack() {
  if [ $EMULATE = 1 ]; then
    BIN=${GPU_CHECK_BIN:-build/bin}  # the emulated device is in every build: the checkout's own
    [ -x "$BIN/test_cuda_ops" ] || { echo "no $BIN/test_cuda_ops: build first (make build)"; return 1; }
    return 0
  fi
  if [ -f "$BUNDLE" ]; then
    rm -rf "$UNPACKED" && mkdir -p "$UNPACKED"
    # python3's tarfile reads xz where the image has no xz binary.
    tar -C "$UNPACKED" -xJf "$BUNDLE" 2>/dev/null || python3 -m tarfile -e "$BUNDLE" "$UNPACKED" || return 1
  fi
  if [ -x "$UNPACKED/bin/test_cuda_ops" ]; then
    BIN=$UNPACKED/bin
    export LD_LIBRARY_PATH="$UNPACKED/lib:${LD_LIBRARY_PATH:-}"
    cp "$UNPACKED/build.log" "$OUT/build.log" 2>/dev/null
    local baked
    baked=$(cat "$UNPACKED/source_dir.txt" 2>/dev/null)
    if [ -n "$baked" ] && [ ! -e "$baked" ]; then
      mkdir -p "$(dirname "$baked")" && ln -s "$ROOT" "$baked" ||
        echo "warning: cannot link $baked -> $ROOT; tests that read tools/ or configs/ will fail"
    fi
    echo "carried binaries"
    return 0
  fi
  configure_and_build "$OUT" "-DHG_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90"
}
export ROOT BUILD BUNDLE TARGETS OUT EMULATE UNPACKED BIN
export -f configure_and_build build_or_unpack
run_step build 240 build_or_unpack
[ $EMULATE = 0 ] && [ -d "$UNPACKED/bin" ] && BIN=$UNPACKED/bin && export LD_LIBRARY_PATH="$UNPACKED/lib:${LD_LIBRARY_PATH:-}"
[ $EMULATE = 1 ] && BIN=${GPU_CHECK_BIN:-build/bin}
grep -E "spill (stores|loads)" "$OUT/build.log" 2>/dev/null | grep -v " 0 bytes spill stores, 0 bytes spill loads" \
  >"$OUT/spills.txt"

if [ $EMULATE = 1 ]; then
  export HG_TEST_CUDA=emu
  DEVICE=cuda-emu
  SAN_MEMCHECK=""
  SAN_RACECHECK=""
else
  export HG_TEST_CUDA=gpu  # a GPU that is not found fails the tests instead of falling back
  DEVICE=cuda
  SAN_MEMCHECK="compute-sanitizer --tool memcheck --error-exitcode 3"
  SAN_RACECHECK="compute-sanitizer --tool racecheck --error-exitcode 3"
fi

# ---- tests ----
export HG_BIN_DIR=$BIN  # where the tests find hybridgen (tests/test_util.cpp)
gtest() {  # binary [args]
  local name=$1
  shift
  "$BIN/$name" --gtest_output="xml:$OUT/$name.xml" "$@"
}
export BIN
export -f gtest
run_step test_cuda_ops 60 gtest test_cuda_ops
run_step test_device_attention 90 gtest test_device_attention --gtest_filter='CudaAttention.*'
run_step test_device_copies 30 gtest test_device_copies
run_step test_cuda_hybrid 120 gtest test_cuda_hybrid
run_step test_cuda_engine 150 gtest test_cuda_engine
# The CLI's tiny models against the numpy reference (needs hybridgen and HG_PYTHON's numpy).
run_step test_e2e_reference 60 gtest test_e2e_reference --gtest_filter='ReferenceCuda.*'

# ---- compute-sanitizer (kernels run 10-100x slower under it: small filters) ----
# shellcheck disable=SC2086
{
  run_step sanitizer_memcheck_ops 45 $SAN_MEMCHECK "$BIN/test_cuda_ops" \
    --gtest_filter='CudaOps.Elementwise:CudaOps.KvStore*:CudaOps.Rope*'
  run_step sanitizer_memcheck_attention 45 $SAN_MEMCHECK "$BIN/test_device_attention" \
    --gtest_filter='CudaAttention.DecodeHeadShapes'
  run_step sanitizer_racecheck_attention 45 $SAN_RACECHECK "$BIN/test_device_attention" \
    --gtest_filter='CudaAttention.DecodeHeadShapes'
  run_step sanitizer_memcheck_hybrid 45 $SAN_MEMCHECK "$BIN/test_cuda_hybrid" \
    --gtest_filter='CudaHybridAttention.DecodeF16AndLongHostSelection:CudaHybridAttention.RejectsTablesOutsideTheCache'
  run_step sanitizer_racecheck_hybrid 45 $SAN_RACECHECK "$BIN/test_cuda_hybrid" \
    --gtest_filter='CudaHybridAttention.DecodeF16AndLongHostSelection'
}

# ---- bench (synthetic weights: no model file travels) ----
PEAK=3350  # H100 SXM HBM3, GB/s
grep -q "H200" "$OUT/env.txt" && PEAK=4800
bench() {  # name cap shape args...: rows to bench_NAME.json, stderr to bench_NAME.err
  # DTYPE: the synthetic weights' type (bf16; q4_0 is held in its blocks: the quantized GEMV);
  # GRAPHS=0: the step launched kernel by kernel (HG_CUDA_GRAPHS=0), against the same rows with graphs;
  # CALLBACKS=0: the hybrid policies' synchronous path (HG_CUDA_HOST_CALLBACKS=0).
  local name=$1 cap=$2 shape=$3
  shift 3
  run_step "bench_$name" "$cap" env HG_CUDA_GRAPHS="${GRAPHS:-1}" HG_CUDA_HOST_CALLBACKS="${CALLBACKS:-1}" bash -c 'out=$1; shift; "$@" >"$out.json" 2>"$out.err"' \
    _ "$OUT/bench_$name" "$BIN/hybridgen" bench --synthetic "configs/models/$shape.yaml" \
    --synthetic-dtype "${DTYPE:-bf16}" --device "$DEVICE" --depth-fill random --peak-gbps "$PEAK" -o json "$@"
}
if [ $EMULATE = 1 ]; then  # the same commands, small enough for the CPU (a window that splits 256 tokens)
  bench qwen25_05b 120 qwen2.5-0.5b -p 16 -n 2 -d 256 -r 1 --policy full,offload,hybrid,infinigen --window 128 --ctx 300
  bench llama31_8b 60 smollm2-135m -p 0 -n 2 -d 256 -r 1 --policy full,offload,hybrid --window 128 --ctx 300
  GRAPHS=0 bench qwen25_05b_eager 60 qwen2.5-0.5b -p 0 -n 2 -d 256 -r 1 --policy full --ctx 300
  CALLBACKS=0 bench qwen25_05b_sync 60 qwen2.5-0.5b -p 0 -n 2 -d 256 -r 1 --policy hybrid --window 128 --ctx 300
  DTYPE=q4_0 bench smollm2_q4_0 60 smollm2-135m -p 0 -n 2 -d 256 -r 1 --policy full --ctx 300
else
  bench qwen25_05b 90 qwen2.5-0.5b -p 512 -n 32 -d 8192,32768 -r 2 --policy full,offload,hybrid,infinigen
  bench llama31_8b 150 llama-3.1-8b -p 0 -n 16 -d 8192,32768 -r 1 --policy full,offload,hybrid
  # Last, cut first when time runs out: graphs against none, hybrid's callbacks against its waits,
  # and weights in their Q4_0 blocks.
  GRAPHS=0 bench qwen25_05b_eager 45 qwen2.5-0.5b -p 0 -n 32 -d 8192 -r 2 --policy full
  CALLBACKS=0 bench qwen25_05b_sync 45 qwen2.5-0.5b -p 0 -n 32 -d 8192 -r 2 --policy hybrid
  DTYPE=q4_0 bench llama31_8b_q4_0 90 llama-3.1-8b -p 0 -n 16 -d 8192 -r 1 --policy full
fi

summarize
tar -C "$FINAL" -czf "$FINAL/logs.tar.gz" logs && rm -rf "$OUT"
echo "[$(elapsed)s] gpu_check done: $FINAL/summary.json"
