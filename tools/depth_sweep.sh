#!/usr/bin/env bash
# Decode cost against context depth, with the KV cache filled by seeded random K/V
# (bench --depth-fill random: seconds instead of a quadratic prefill). One process per
# (policy, depth), so the peak RSS each row reports is that configuration's own.
#
#   tools/depth_sweep.sh OUT.jsonl [POLICIES] [DEPTHS] [N_GEN] [-- extra bench options]
#   defaults: full,hybrid,streaming,cpu-attn  1024,2048,4096,8192,16384,32768  16
# Then: python3 tools/plot_depth.py OUT.jsonl docs/figures/depth_decode.png  (table on stdout)
set -euo pipefail
out=${1:?usage: tools/depth_sweep.sh OUT.jsonl [POLICIES] [DEPTHS] [N_GEN] [-- bench options]}
policies=${2:-full,hybrid,streaming,cpu-attn}
depths=${3:-1024,2048,4096,8192,16384,32768}
n_gen=${4:-16}
shift $(( $# < 4 ? $# : 4 ))
[[ ${1:-} == -- ]] && shift
bin=${HYBRIDGEN:-build/bin/hybridgen}
model=${MODEL:-smollm2}
: > "$out"
for policy in ${policies//,/ }; do
  for depth in ${depths//,/ }; do
    echo "depth_sweep: $policy at depth $depth" >&2
    # --ctx leaves room past the default 1024-token window + sinks at the smallest depth
    "$bin" bench -m "$model" -p 0 -n "$n_gen" -d "$depth" -r 1 --ctx $((depth + n_gen + 64)) --depth-fill random \
      --policy "$policy" -o jsonl "$@" \
      >> "$out"
  done
done
