#!/usr/bin/env bash
# Decode throughput side by side in interleaved rounds: hybridgen and llama.cpp one after the other,
# ROUNDS times, so that a shared VM's drift (2x within minutes on some hosts) hits both alike; prints
# each round's tokens/s and ratios, then the range of the ratios.
#
#   tools/decode_rounds.sh [-m GGUF|ALIAS] [-n TOKENS] [-d DEPTH] [--policy P,...] [-t THREADS]
#                          [-r ROUNDS] [--hg BIN] --peer BINDIR
# Empty context (the default): llama-bench -p 0 -n TOKENS -r 3 against hybridgen bench, the same.
# -d DEPTH: decode after a DEPTH-token prompt, llama-batched-bench -npp DEPTH -ntg TOKENS (as
# compare-llamacpp.sh) against hybridgen bench -d DEPTH for each --policy (default full); each
# policy's ratio to llama.cpp and, past the first policy, to the first.
# --peer: the folder with llama-bench (build it outside the project with peer-llamacpp.sh).
# HG_CPU_ISA in the environment reaches hybridgen only (e.g. HG_CPU_ISA=avx2 against the peer
# built with PEER_ISA=avx2: the AVX2 class of CPUs on an AVX-512 machine).
set -euo pipefail
model=smollm2 n=64 depth=0 policies=full threads=2 rounds=4 hg=build/bin/hybridgen peer=
while [ $# -gt 0 ]; do
  case $1 in
    -m) model=$2; shift 2;; -n) n=$2; shift 2;; -t) threads=$2; shift 2;; -r) rounds=$2; shift 2;;
    -d) depth=$2; shift 2;; --policy) policies=$2; shift 2;;
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
"$hg" bench -m "$file" -p 0 -n 1 -r 1 -t "$threads" -o md 2>/dev/null | head -1  # cpu: ... (the machine)
tps() { python3 -c 'import json, sys; print(json.load(sys.stdin)[0]["avg_ts"])'; }
if [ "$depth" -eq 0 ]; then
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
  exit 0
fi
echo "model $(basename "$file"), tg$n at depth $depth, policies $policies, $threads threads, HG_CPU_ISA=${HG_CPU_ISA:-native}, peer $peer"
[ -x "$peer/llama-batched-bench" ] || { echo "decode_rounds: -d needs llama-batched-bench in $peer" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for ((i = 1; i <= rounds; i++)); do
  env -u HG_CPU_ISA "$peer/llama-batched-bench" -m "$file" -c $((depth + n + 64)) -b 2048 -ub 512 -npp "$depth" \
    -ntg "$n" -npl 1 -t "$threads" --output-format jsonl 2>&1 | grep '^{' | head -1 >"$tmp/peer$i.json" || true
  "$hg" bench -m "$file" -p 0 -n "$n" -d "$depth" -t "$threads" -r 1 --policy "$policies" -o json \
    >"$tmp/hg$i.json" 2>/dev/null
  python3 - "$tmp" "$i" <<'PY'
import json, sys
tmp, i = sys.argv[1], sys.argv[2]
peer = json.load(open(f"{tmp}/peer{i}.json"))["speed_tg"]
rows = json.load(open(f"{tmp}/hg{i}.json"))
first = rows[0]
parts = []
for k, r in enumerate(rows):
    s = f"{r['policy']} {r['avg_ts']:.1f} ({r['avg_ts'] / peer:.2f}x"
    parts.append(s + (f", {r['avg_ts'] / first['avg_ts']:.2f} of {first['policy']})" if k else ")"))
print(f"round {i}  llama.cpp {peer:.1f} tok/s  " + "  ".join(parts), flush=True)
PY
done
python3 - "$tmp" "$rounds" <<'PY'
import json, sys, collections
tmp, rounds = sys.argv[1], int(sys.argv[2])
to_peer, to_first, names = collections.defaultdict(list), collections.defaultdict(list), []
for i in range(1, rounds + 1):
    peer = json.load(open(f"{tmp}/peer{i}.json"))["speed_tg"]
    rows = json.load(open(f"{tmp}/hg{i}.json"))
    for r in rows:
        if r["policy"] not in names:
            names.append(r["policy"])
        to_peer[r["policy"]].append(r["avg_ts"] / peer)
        to_first[r["policy"]].append(r["avg_ts"] / rows[0]["avg_ts"])
for k, p in enumerate(names):
    s = f"{p}: {min(to_peer[p]):.2f}-{max(to_peer[p]):.2f}x llama.cpp"
    if k:
        s += f", {min(to_first[p]):.2f}-{max(to_first[p]):.2f}x {names[0]}"
    print(s)
PY
