// Causal attention of a block of query rows over a K/V cache they all see a prefix of: the host
// part of a hybrid prefill (every prompt row attends the host tokens before its window), as a
// partial result + log-sum-exp for the LSE merge with the device's window part.
//
// The tiled kernel works flash-attention style: for one kv-head and a tile of query rows (all
// query heads of the GQA group, so the group shares each key tile), it walks the key tiles once,
// computes the score tile and the P·V tile with oneDNN sgemm, and keeps an online softmax (row
// max m, row sum l) between tiles. Key/value tiles are converted to fp32 once per query tile, so
// their conversion is amortized over rows × group query vectors. Work items are (query tile,
// kv-head) pairs that a pool splits; the scalar twin takes the same arguments and item range.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "hybridgen/dtype.h"
#include "kernels/cpu/cpu_isa.h"
#include "kernels/cpu/prefill_attention_bf16.h"
#include "kernels/kv_layout.h"

namespace hg::cpu {

using hg::KvLayout;  // the K and V caches the kernel reads (kernels/kv_layout.h); head_dim as in the args

// One softmax of the prompt scores (attention_mass, below): x = (score + noise) · inv_tau.
struct MassSoftmax {
  float inv_tau = 1.0f;
  // Optional: adds the noise of (row, head) for keys [0, n) to x[0, n), before inv_tau.
  void (*noise)(const void* ctx, int64_t row, int head, int64_t n, float* x) = nullptr;
  const void* noise_ctx = nullptr;
};

struct PrefillAttentionArgs {
  const float* q = nullptr;  // [n_rows][ld_q]: head h of row i at q + i * ld_q + h * head_dim
  int64_t ld_q = 0;
  int64_t n_rows = 0;
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  float scale = 1.0f;  // applied to q·k
  KvLayout k, v;
  const int64_t* n_visible = nullptr;  // [n_rows]: row i attends tokens [0, n_visible[i])
  float* out = nullptr;                // [n_rows][ld_out], like q; 0 where a row sees nothing
  int64_t ld_out = 0;
  float* lse = nullptr;  // [n_rows][ld_lse]: log Σ exp(scores); -inf where a row sees nothing
  int64_t ld_lse = 0;
  // Optional: the rows' prompt scores as attention_mass (below) gives them, from this call's own
  // score tiles instead of a second Q·Kᵀ: the item's sums of softmax s go to mass[s] + item *
  // ld_mass (attention_mass_keys of the item long, overwritten). Their keys are the cache's, in its
  // dtype: the scores of the attention the rows ran.
  std::span<const MassSoftmax> mass_softmax;
  float* const* mass = nullptr;
  int64_t ld_mass = 0;
  // Whether products over a bf16 cache may run in bf16 where the CPU runs the prefill GEMM in bf16
  // (prefill_attention_bf16.h); false: fp32 products (the run's precision).
  bool bf16 = true;
};

// The arguments for dense rows: q and out [n_rows][n_heads * head_dim], lse [n_rows][n_heads].
PrefillAttentionArgs dense_prefill_args(const float* q, int64_t n_rows, int n_heads, int n_kv_heads, int head_dim,
                                        float scale, const KvLayout& k, const KvLayout& v, const int64_t* n_visible,
                                        float* out, float* lse);

// Per-thread workspace: one query tile and one key tile in fp32; grows once, then is reused.
struct PrefillAttentionScratch {
  std::vector<float> q, k, v, scores, acc, row_max, row_sum;
  std::vector<float> x, row;  // with prompt scores: the item's scores over every key it sees; a spare row
  Bf16AttentionScratch bf16;  // the bf16 products' (prefill_attention_bf16.h)
};

// Query rows per tile for a GQA group size (the tile holds rows × group query vectors).
int64_t prefill_query_tile_rows(int group);
// Work items of a call: query tiles × kv-heads.
int64_t prefill_attention_items(const PrefillAttentionArgs& a);

// Items [item_begin, item_end) with the active ISA's tile kernel.
void prefill_attention(const PrefillAttentionArgs& a, int64_t item_begin, int64_t item_end,
                       PrefillAttentionScratch& scratch);
void prefill_attention_isa(CpuIsa isa, const PrefillAttentionArgs& a, int64_t item_begin, int64_t item_end,
                           PrefillAttentionScratch& scratch);
// Scalar twin: one row and head at a time, two-pass softmax (the oracle of the tests).
void prefill_attention_scalar(const PrefillAttentionArgs& a, int64_t item_begin, int64_t item_end,
                              PrefillAttentionScratch& scratch);

// The attention each key receives from a block of query rows, summed over the rows and over the
// query heads of its kv-head: the score H2O accumulates per token over the prompt (Keyformer the
// same with Gumbel noise and a temperature). For kv-head g, key t < n_visible[i] and each softmax
// s of the call:
//   x[i, h, t] = (scale · q[i, h] · k[g, t] + noise_s[i, h, t]) · inv_tau_s       (h in g's group)
//   mass_s[g][t] = Σ_i Σ_h softmax_t(x[i, h])[t]
// Every softmax of a call shares its one Q·Kᵀ (the bulk of the work): H2O's and Keyformer's
// scores of a prompt cost one pass, and each softmax's sums are the bits a call of it alone gives.
// Keys are fp32 rows as the forward pass makes them: key t of kv-head g at k + t * ld_k + g *
// head_dim. Work items are (query tile, kv-head) pairs as in prefill_attention; each item's sums
// go to a buffer of its own, so that a caller can add the items of a kv-head in item order and
// get the same bits whatever the thread split.

struct AttentionMassArgs {
  const float* q = nullptr;  // [n_rows][ld_q], head h of row i at q + i * ld_q + h * head_dim
  int64_t ld_q = 0;
  int64_t n_rows = 0;
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  float scale = 1.0f;
  const float* k = nullptr;
  int64_t ld_k = 0;
  // The dtype of the cache the keys were rounded to: bf16 keys take the tiled kernel's bf16 Q·Kᵀ
  // where it runs in bf16 (prefill_attention_bf16.h), so that the scores have its bits.
  DType k_dtype = DType::F32;
  const int64_t* n_visible = nullptr;  // [n_rows]: row i attends keys [0, n_visible[i])
  std::span<const MassSoftmax> softmax;  // at least one
  bool bf16 = true;  // as PrefillAttentionArgs::bf16, and must be the same for the same bits
};

// Per-thread workspace: the item's pre-scaled query tile, its scores over every visible key, and
// one row of them for a softmax that is not the call's last.
struct AttentionMassScratch {
  std::vector<float> q, x, row;
  Bf16AttentionScratch bf16;
};

int64_t attention_mass_items(const AttentionMassArgs& a);
// The keys an item's rows see (its buffers' length): the largest n_visible of its rows.
int64_t attention_mass_keys(const AttentionMassArgs& a, int64_t item);
// Item `item`: mass[s][t] for softmax s and t < attention_mass_keys(a, item), overwritten, with
// the active ISA.
void attention_mass(const AttentionMassArgs& a, int64_t item, float* const* mass, AttentionMassScratch& scratch);
void attention_mass_isa(CpuIsa isa, const AttentionMassArgs& a, int64_t item, float* const* mass,
                        AttentionMassScratch& scratch);
// Scalar twin: one row and head at a time, dot products in a loop, softmax in double (tests).
void attention_mass_scalar(const AttentionMassArgs& a, int64_t item, float* const* mass);

}  // namespace hg::cpu
