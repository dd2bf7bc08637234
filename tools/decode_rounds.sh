#!/usr/bin/env bash
# Decode throughput side by side in interleaved rounds: hybridgen and llama.cpp's llama-bench one
# after the other, ROUNDS times, so that a shared VM's drift (2x within minutes on some hosts)
# hits both alike; prints each round's tokens/s and ratio, then the range of the ratios.
#
#   tools/decode_rounds.sh [-m GGUF|ALIAS] [-n TOKENS] [-t THREADS] [-r ROUNDS] [--hg BIN] --peer BINDIR
# --peer: the folder with llama-bench (build it outside the project with peer-llamacpp.sh).
# HG_CPU_ISA in the environment reaches hybridgen only (e.g. HG_CPU_ISA=avx2 against the peer
# built with PEER_ISA=avx2: the AVX2 class of CPUs on an AVX-512 machine).
set -euo pipefail
model=smollm2 n=64 threads=2 rounds=4 hg=build/bin/hybridgen peer=
while [ $# -gt 0 ]; do
  case $1 in
    -m) model=$2; shift 2;; -n) n=$2; shift 2;; -t) threads=$2; shift 2;; -r) rounds=$2; shift 2;;
    --hg) hg=$2; shift 2;; --peer) peer=$2; shift 2;;
    *) echo "decode_rounds: unknown argument $1" >&2; exit 2;;
  esac
done
[ -n "$peer" ] && [ -x "$peer/llama-bench" ] || { echo "decode_rounds: --peer BINDIR with llama-bench is required" >&2; exit 2; }
[ -x "$hg" ] || { echo "decode_rounds: $hg not found (make build)" >&2; exit 2; }
cache=${HG_CACHE:-$HOME/.cache/hybridgen}/models
case $model in
  smollm2) file=$cache/SmolLM2-135M-Instruct.Q4_1.gguf;;
  qwen2.5-0.5b) file=$cache/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf;;
  *) file=$model;;
esac
[ -f "$file" ] || { echo "decode_rounds: model $file not found (make models)" >&2; exit 2; }
tps() { python3 -c 'import json, sys; print(json.load(sys.stdin)[0]["avg_ts"])'; }
"$hg" bench -m "$file" -p 0 -n 1 -r 1 -t "$threads" -o md 2>/dev/null | head -1  # cpu: ... (the machine)
echo "model $(basename "$file"), tg$n, $threads threads, HG_CPU_ISA=${HG_CPU_ISA:-native}, peer $peer"
ratios=()
for ((i = 1; i <= rounds; i++)); do
  l=$(env -u HG_CPU_ISA "$peer/llama-bench" -m "$file" -p 0 -n "$n" -t "$threads" -r 3 -o json 2>/dev/null | tps)
  h=$("$hg" bench -m "$file" -p 0 -n "$n" -t "$threads" -r 3 -o json 2>/dev/null | tps)
  r=$(python3 -c "print(f'{$h / $l:.3f}')")
  ratios+=("$r")
  printf 'round %d %s  hybridgen %.1f  llama.cpp %.1f tok/s  ratio %s\n' "$i" "$(date -u +%H:%M:%S)" "$h" "$l" "$r"
done
python3 -c "import sys; r = sorted(map(float, sys.argv[1:])); m = len(r) // 2; print(f'ratio {r[0]:.2f}-{r[-1]:.2f}, median {(r[m] + r[~m]) / 2:.2f}')" "${ratios[@]}"
