#!/usr/bin/env bash
# hybridgen serve against llama-server, side by side in one run: the same model, the same load
# (tools/serve_bench.py: streamed greedy completions at each concurrency), the two servers measured
# in turn for ROUNDS rounds so that machine drift hits both. Each server runs alone on loopback.
#
#   tools/serve_compare.sh [-m GGUF] [--peer BINDIR] [--hg BIN] [--parallel N] [--ctx N] [-t THREADS]
#                          [--concurrency 1,4,8] [-n TOKENS] [-r REQUESTS] [--rounds N] [--policy P]
# Defaults: SmolLM2-135M-Instruct Q4_1, ${PEERS:-$HOME/peers}/llama.cpp/build/bin (the llama.cpp
# peer's build), build/bin/hybridgen, 8 sequences of 2048 tokens, 2 threads, 64 tokens, 2 per
# client, 2 rounds, policy full. Prints one JSON line per server, round and concurrency.
set -euo pipefail
model=${HG_CACHE:-$HOME/.cache/hybridgen}/models/SmolLM2-135M-Instruct.Q4_1.gguf
peer=${PEERS:-$HOME/peers}/llama.cpp/build/bin hg=build/bin/hybridgen
parallel=8 ctx=2048 threads=2 conc=1,4,8 n=64 r=2 rounds=2 policy=full
while [ $# -gt 0 ]; do
  case $1 in
    -m) model=$2; shift 2;; --peer) peer=$2; shift 2;; --hg) hg=$2; shift 2;;
    --parallel) parallel=$2; shift 2;; --ctx) ctx=$2; shift 2;; -t) threads=$2; shift 2;;
    --concurrency) conc=$2; shift 2;; -n) n=$2; shift 2;; -r) r=$2; shift 2;;
    --rounds) rounds=$2; shift 2;; --policy) policy=$2; shift 2;;
    *) echo "serve_compare: unknown argument $1" >&2; exit 2;;
  esac
done
[ -x "$peer/llama-server" ] || { echo "serve_compare: $peer/llama-server not found (build the peer)" >&2; exit 2; }
[ -x "$hg" ] || { echo "serve_compare: $hg not found (make)" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
port=18473
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; true' EXIT

wait_ready() {  # until /health answers 200
  for _ in $(seq 1 600); do
    curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && return 0
    kill -0 "$pid" 2>/dev/null || { echo "serve_compare: the server exited" >&2; exit 1; }
    sleep 0.2
  done
  echo "serve_compare: the server did not start" >&2; exit 1
}

measure() {  # NAME ROUND: the load against the server on $port, each line tagged
  python3 "$here/serve_bench.py" --url "http://127.0.0.1:$port" --model "$(basename "$model" .gguf)" \
      --concurrency "$conc" -n "$n" -r "$r" | sed "s/^{/{\"server\": \"$1\", \"round\": $2, /"
}

for round in $(seq 1 "$rounds"); do
  "$hg" serve -m "$model" --port "$port" --parallel "$parallel" --ctx "$ctx" -t "$threads" --policy "$policy" \
      --no-progress 2>/dev/null & pid=$!
  wait_ready; measure hybridgen "$round"; kill -TERM "$pid"; wait "$pid" || true; pid=
  "$peer/llama-server" -m "$model" --port "$port" -np "$parallel" -c $((ctx * parallel)) -t "$threads" \
      --alias "$(basename "$model" .gguf)" >/dev/null 2>&1 & pid=$!
  wait_ready; measure llama-server "$round"; kill -TERM "$pid"; wait "$pid" || true; pid=
done
