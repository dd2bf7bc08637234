// What the hybrid attention kernels (CPU twin and CUDA) read: the device-resident tokens of one
// sequence's layer (a slot table, or a ring's parameters), the host's part, and the arguments of
// one call. The kernels know nothing of windows or eviction: HybridKv's token map (src/kv/)
// decides which tokens the device holds, in which cache slots, and describes them.
#pragma once
#include <cstdint>

#include "hybridgen/dtype.h"

namespace hg {

// Device tokens of one sequence's layer, per kv-head, in position order, in one of two forms.
// Table: row g of the table (row 0 for every kv-head when stride == 0) lists `count` tokens:
// slot[g * stride + j] is the cache slot (of the [n_kv_heads][capacity][head_dim] K/V caches)
// holding the j-th one and pos[g * stride + j] its position, increasing in j; both arrays are
// device memory (host memory on the CPU device). Any set of tokens per kv-head can be expressed:
// kept heavy hitters (h2o, keyformer) need it.
// Ring (ring == true, no arrays): the n_lead sinks in slots and at positions [0, n_lead), then
// count - n_lead tokens at positions ring_pos0 + j in slots ring_base + (ring_head + j) % ring_slots,
// the same for every kv-head: the window of hybrid, streaming and the selection policies, passed
// as kernel arguments, so nothing is copied to the device when the window moves.
// A query row at position p attends over the device tokens with pos <= p.
struct DeviceTokens {
  const int32_t* slot = nullptr;
  const int32_t* pos = nullptr;
  int count = 0;   // tokens per kv-head
  int stride = 0;  // elements between kv-heads' rows; 0: one row shared by every kv-head
  // The first n_lead device tokens (the sinks) precede the host's tokens in the union, the rest
  // follow them: the union is in position order, as full attention visits it.
  int n_lead = 0;
  bool ring = false;
  int ring_base = 0;   // ring form: the ring's first cache slot
  int ring_slots = 0;  // the ring's slots
  int ring_head = 0;   // the slot (from ring_base) of the ring's oldest token
  int ring_pos0 = 0;   // the ring's oldest token's position (ring positions are consecutive)
};

#if defined(__CUDACC__)
#define HG_TOKENS_FN __host__ __device__ __forceinline__
#else
#define HG_TOKENS_FN inline
#endif

// Cache slot and position of kv-head g's j-th device token (0 <= j < count).
HG_TOKENS_FN int32_t token_slot(const DeviceTokens& t, int g, int j) {
  if (!t.ring) return t.slot[static_cast<int64_t>(g) * t.stride + j];
  return j < t.n_lead ? j : t.ring_base + (t.ring_head + (j - t.n_lead)) % t.ring_slots;
}
HG_TOKENS_FN int32_t token_pos(const DeviceTokens& t, int g, int j) {
  if (!t.ring) return t.pos[static_cast<int64_t>(g) * t.stride + j];
  return j < t.n_lead ? j : t.ring_pos0 + (j - t.n_lead);
}

// Device tokens of kv-head g a row at position p sees: the table's prefix of positions <= p
// (a binary search), or for a ring the visible sinks and ring tokens, counted.
HG_TOKENS_FN int visible_tokens(const DeviceTokens& t, int g, int64_t p) {
  if (t.ring) {
    const int64_t sinks = p + 1 < t.n_lead ? p + 1 : t.n_lead;
    const int64_t in_ring = p + 1 - t.ring_pos0;
    const int64_t ring = in_ring < 0 ? 0 : (in_ring > t.count - t.n_lead ? t.count - t.n_lead : in_ring);
    return static_cast<int>((sinks < 0 ? 0 : sinks) + ring);
  }
  const int32_t* pos = t.pos + static_cast<int64_t>(g) * t.stride;
  int lo = 0, hi = t.count;
  while (lo < hi) {
    const int mid = (lo + hi) >> 1;
    if (pos[mid] <= p)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

// What the host shipped for one sequence's layer (device memory). Logits and KeyValue both put
// K host tokens per kv-head into the union; KeyValue (InfiniGen's fetch) carries their K rows, so
// the device computes their logits with its own, true query.
// Compact shipments (HostShipment over a 16-bit cache): K and V rows in the cache's dtype, as the
// host store holds them (lossless), and logits in f16 less their head's maximum (logit_max), which
// keeps the largest weights' logits to within 2^-11 of a unit; half the bytes of fp32.
struct HostPart {
  enum class Kind { None, Logits, KeyValue, Partial };
  Kind kind = Kind::None;
  int K = 0;                         // Logits, KeyValue: host tokens per kv-head
  const void* logits = nullptr;      // Logits: [n_heads][K] in logits_dtype, already scaled, in token order
  DType logits_dtype = DType::F32;   // F32, or F16 (then logit_max[h] + logits[h][j] is the logit)
  const float* logit_max = nullptr;  // [n_heads], with f16 logits
  const void* k = nullptr;           // KeyValue: [n_kv_heads][K][head_dim] in rows_dtype, in token order
  const void* v = nullptr;           // Logits, KeyValue: [n_kv_heads][K][head_dim] in rows_dtype
  DType rows_dtype = DType::F32;     // F32, or the cache's kv_dtype
  const float* out = nullptr;        // Partial: [n_rows][n_heads][head_dim]
  const float* lse = nullptr;        // Partial: [n_rows][n_heads]
  // Logits, KeyValue: when set (device memory), the part holds min(*count, K) host tokens per
  // kv-head, and K is only its layout's (the rows per kv-head, the logits per head): a part laid
  // out before the host knew how many tokens it would choose (InfiniGen's alpha rule beside a GPU,
  // whose step is issued ahead of the host's work), the count copied in with it.
  const int32_t* count = nullptr;
};

// Host rows per kv-head in the part's layout (the logits per head): K for a Logits or KeyValue
// part, none otherwise. The kernels stride the part's arrays by it, and their splits cut it.
HG_TOKENS_FN int host_part_rows(const HostPart& h) {
  return h.kind == HostPart::Kind::Logits || h.kind == HostPart::Kind::KeyValue ? h.K : 0;
}

// Host tokens per kv-head the part puts into the union: its rows, or fewer where it carries a
// count (see HostPart::count; read where the part lives, on the device beside a GPU).
HG_TOKENS_FN int host_part_tokens(const HostPart& h) {
  const int rows = host_part_rows(h);
  if (!h.count) return rows;
  return *h.count < 0 ? 0 : (*h.count < rows ? *h.count : rows);
}

#undef HG_TOKENS_FN

// What every attention kernel of the device reads: n query rows of n_heads heads, q and out
// [n][n_heads][head_dim], over the caches k_cache, v_cache [n_kv_heads][capacity][head_dim] in
// kv_dtype; GQA: query head h reads kv-head h / (n_heads / n_kv_heads); scores scaled by `scale`.
// cuda::AttentionArgs (kernels/cuda/kernels.h) and HybridAttentionArgs below add where the rows
// are and which tokens they see.
struct AttentionRows {
  const float* q = nullptr;
  float* out = nullptr;
  const void* k_cache = nullptr;
  const void* v_cache = nullptr;
  DType kv_dtype = DType::F32;
  int64_t capacity = 0;
  int n = 0;
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  float scale = 1.0f;
};

// n query rows at positions pos0 .. pos0+n-1 attend over their visible device tokens merged with
// the host's part: Logits and KeyValue as one softmax over the union (lead tokens, host tokens, the
// rest), Partial by log-sum-exp. q, out: [n][n_heads][head_dim]; k_cache, v_cache:
// [n_kv_heads][capacity][head_dim] in kv_dtype. GQA: query head h reads kv-head h / (n_heads /
// n_kv_heads). The same struct drives cpu::hybrid_attention_items and cuda::hybrid_attention.
struct HybridAttentionArgs : AttentionRows {
  int64_t pos0 = 0;
  DeviceTokens tokens;
  HostPart host;
  // Optional, [n][n_heads][tokens.count]: the softmax probability of each device token (table
  // order; 0 for tokens the row does not see), for the score-based pruning policies (h2o,
  // keyformer). With a Partial host part it is the device part's own softmax.
  float* probs = nullptr;
};

}  // namespace hg
