// What the host workers compute over one sequence's host K/V stores for one layer: attention
// logits (all host tokens, or a chosen subset), K/V-row gathers for the device, and partial
// attention with log-sum-exp (LSE merge). Token selection is the selectors' (selectors/).
// Ranges are explicit so that a pool can split the work; no allocation happens here.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "device/cpu_attention.h"
#include "kernels/cpu/prefill_attention.h"
#include "kv/host_store.h"
#include "util/thread_pool.h"

namespace hg {

// logits[h * ld + t] = scale · q[h]·K[g(h), t] for host tokens t in [t_begin, t_end) and kv-heads
// [g_begin, g_end). All query heads of a group read the group's key rows while they are in cache,
// so each key crosses the memory bus once.  q: [n_heads][head_dim].
void host_logits(const KvLayout& k, const float* q, int n_heads, float scale, int g_begin, int g_end,
                 int64_t t_begin, int64_t t_end, float* logits, int64_t ld);

// Logits of selected tokens: out[h * K + j] = scale · q[h]·K[g(h), idx[g(h) * K + j]].
void host_logits_selected(const KvLayout& k, const float* q, int n_heads, float scale, const int32_t* idx, int K,
                          int g_begin, int g_end, float* out);

// rows_out[(g * K + j) * head_dim ...] = rows[g, idx[g * K + j]] as fp32: the selected V rows for
// the device, and the K rows too when they are fetched (InfiniGen).
void gather_rows(const KvLayout& rows, const int32_t* idx, int K, int g_begin, int g_end, float* rows_out);

// Partial attention over K selected tokens: out[h] = softmax(logits[h]) · v_sel[g(h)] and
// lse[h] = log Σ exp(logits[h]) (logits already scaled). K == 0 gives out 0, lse -inf.
void partial_attention(const float* logits, const float* v_sel, int n_heads, int n_kv_heads, int K, int head_dim,
                       int h_begin, int h_end, float* out, float* lse, std::vector<float>& scratch);

// Exact causal partial attention over the first n_tokens host tokens for one query row (prefill
// and the exact all-tokens policies): out[h], lse[h] for heads [h_begin, h_end).
void prefix_attention(const KvLayout& k, const KvLayout& v, const float* q, int n_heads, float scale,
                      int64_t n_tokens, int h_begin, int h_end, float* out, float* lse, std::vector<float>& scratch);

// Exact causal partial attention of a prefill chunk over the host tokens: row i (query
// q + i * n_heads * head_dim) sees host tokens [0, visible[i]); out [n_rows][n_heads][head_dim],
// lse [n_rows][n_heads]. Flash-attention style tiles (kernels/cpu/prefill_attention.h), split
// over the pool by (query tile, kv-head).
class HostPrefillAttention {
 public:
  // bf16: products over a bf16 store may run in bf16 (Device::bf16_compute).
  void run(ThreadPool& pool, const KvLayout& k, const KvLayout& v, const float* q, int64_t n_rows, int n_heads,
           float scale, const int64_t* visible, float* out, float* lse, bool bf16);

 private:
  CpuTiledAttention tiled_;  // the CPU device's tiled prefill attention driver (device/cpu_attention.h)
};

}  // namespace hg
