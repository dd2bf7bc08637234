#!/usr/bin/env bash
# The benchmark suite behind `make bench`: machine bandwidth, kernels, tokenizers, NUMA arenas,
# then end-to-end decode and prefill. Results land in results/ (one file per benchmark).
# QUICK=1 runs a shorter set.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BUILD:-build}/bin
OUT=results
mkdir -p "$OUT"
T=${THREADS:-$(nproc)}
R=${REPS:-3}

echo "== read bandwidth"
"$BIN/membw" -t "$T" --json | tee "$OUT/membw.json"
PEAK=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["read_gbps"])' "$OUT/membw.json" 2>/dev/null || echo 0)

echo "== kernels"
"$BIN/bench_matmul" --benchmark_min_time=0.2 | tee "$OUT/bench_matmul.txt"
echo "== tokenizers"
"$BIN/bench_tokenizer" | tee "$OUT/bench_tokenizer.txt"
echo "== NUMA arenas"
"$BIN/bench_mem" | tee "$OUT/bench_mem.txt"

echo "== SmolLM2-135M Q4_1: prefill 512, decode 64"
"$BIN/hybridgen" bench -m smollm2 -p 512 -n 64 -t "$T" -r "$R" --peak-gbps "$PEAK" | tee "$OUT/bench_smollm2.md"

if [ "${QUICK:-0}" != 1 ]; then
  echo "== synthetic Llama-3.2-1B bf16: prefill 512, decode 16"
  "$BIN/hybridgen" bench --synthetic configs/models/llama-3.2-1b.yaml --synthetic-dtype bf16 -p 512 -n 16 -t "$T" \
    -r 2 --peak-gbps "$PEAK" | tee "$OUT/bench_llama1b.md"
  echo "== SmolLM2 decode at depth: full, cpu-attn, hybrid"
  "$BIN/hybridgen" bench -m smollm2 -p 0 -n 32 -d 2048,4096,8192 -t "$T" -r 2 --policy full,cpu-attn | tee "$OUT/bench_depth.md"
  for K in 64 256; do
    "$BIN/hybridgen" bench -m smollm2 -p 0 -n 32 -d 2048,4096,8192 -t "$T" -r 2 --policy hybrid --window 512 --k "$K" \
      | tee "$OUT/bench_depth_hybrid_k$K.md"
  done
fi
