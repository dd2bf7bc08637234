// The device part runs as runs of consecutive cache slots (a ring of slots lists them in order,
// so a ring costs at most a few runs) through the streaming dot/axpy kernels; host logits are
// spliced into the score buffer after the lead tokens (sinks), so the softmax and P·V visit tokens
// in position order exactly as full attention does. Fetched host tokens (KeyValue) are scored in
// the same place, from their shipped K rows with the row's own query.
#include <algorithm>
#include <cassert>
#include <cmath>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/dot.h"
#include "kernels/cpu/half.h"
#include "kernels/cpu/hybrid_attention.h"

namespace hg::cpu {

namespace {

// Calls fn(first_slot, count) for each run of consecutive slots among kv-head g's device tokens
// [begin, end).
template <typename Fn>
void for_each_slot_run(const DeviceTokens& tok, int g, int64_t begin, int64_t end, Fn&& fn) {
  for (int64_t j = begin; j < end;) {
    const int32_t first = token_slot(tok, g, static_cast<int>(j));
    int64_t run = 1;
    while (j + run < end && token_slot(tok, g, static_cast<int>(j + run)) == first + run) ++run;
    fn(static_cast<int64_t>(first), run);
    j += run;
  }
}

// Head h's n host logits into out, as floats (a compact shipment's f16 values plus their max).
void host_logits_row(const HostPart& host, int h, int64_t n, float* out) {
  const int64_t K = host.K;  // the layout's logits per head
  if (host.logits_dtype == DType::F32) {
    const float* l = static_cast<const float*>(host.logits) + h * K;
    std::copy(l, l + n, out);
    return;
  }
  const auto* l = static_cast<const uint16_t*>(host.logits) + h * K;
  const float m = host.logit_max ? host.logit_max[h] : 0.0f;
  for (int64_t j = 0; j < n; ++j) out[j] = m + f16_to_fp32(l[j]);
}

}  // namespace

void lse_merge(const float* out_a, float lse_a, const float* out_b, float lse_b, int head_dim, float* out) {
  if (lse_a == -INFINITY && lse_b == -INFINITY) {
    std::fill(out, out + head_dim, 0.0f);
    return;
  }
  const float m = std::max(lse_a, lse_b);
  const float wa = std::exp(lse_a - m), wb = std::exp(lse_b - m);
  const float inv = 1.0f / (wa + wb);
  for (int d = 0; d < head_dim; ++d) out[d] = (wa * out_a[d] + wb * out_b[d]) * inv;
}

void hybrid_attention_items(const HybridAttentionArgs& a, int heads_per_item, float* scores, int64_t item_begin,
                            int64_t item_end) {
  const int head_dim = a.head_dim;
  const int group = a.n_heads / a.n_kv_heads;
  const int H = heads_per_item;
  assert(H >= 1 && H <= kMaxItemHeads && group % H == 0);
  const size_t row_bytes = static_cast<size_t>(head_dim) * dtype_block_bytes(a.kv_dtype);
  const HostPart& host = a.host;
  const bool fetched = host.kind == HostPart::Kind::KeyValue;
  const int64_t K = host_part_tokens(host);     // host tokens in the union
  const int64_t K_rows = host_part_rows(host);  // per kv-head in its layout
  const DeviceTokens& tok = a.tokens;
  const int64_t ld = hybrid_attention_scores_per_head(a);  // scores of head j: scores + j * ld
  assert(head_dim <= kMaxHeadDim);                         // checked at model load
  float device_out[kMaxItemHeads * kMaxHeadDim];
  const int64_t items_per_row = a.n_heads / H;
  for (int64_t item = item_begin; item < item_end; ++item) {
    const int64_t i = item / items_per_row;
    const int h0 = static_cast<int>(item % items_per_row) * H;  // the item's heads: h0 .. h0 + H, one kv-head's
    const int g = h0 / group;
    const int64_t rh0 = i * a.n_heads + h0;  // (row, head) index of the first
    const float* q = a.q + rh0 * head_dim;
    float* out = a.out + rh0 * head_dim;
    const auto* kg = static_cast<const uint8_t*>(a.k_cache) + static_cast<size_t>(g) * a.capacity * row_bytes;
    const auto* vg = static_cast<const uint8_t*>(a.v_cache) + static_cast<size_t>(g) * a.capacity * row_bytes;
    // The row sees the device tokens at positions <= its own: a prefix of them.
    const int64_t visible = visible_tokens(tok, g, a.pos0 + i);
    const int64_t lead = std::min<int64_t>(tok.n_lead, visible);
    const size_t host_row_bytes = static_cast<size_t>(head_dim) * dtype_block_bytes(host.rows_dtype);
    const auto* host_v = static_cast<const uint8_t*>(host.v) + static_cast<size_t>(g * K_rows) * host_row_bytes;

    // scores over the union, in position order: lead tokens, host tokens, the rest; the item's
    // heads share each pass over K and V
    int64_t at = 0;
    const auto device_scores = [&](int64_t begin, int64_t end) {
      for_each_slot_run(tok, g, begin, end, [&](int64_t s0, int64_t count) {
        dot_rows_heads(a.kv_dtype, kg + s0 * row_bytes, head_dim, count, q, H, head_dim, head_dim, a.scale, scores + at,
                       ld);
        at += count;
      });
    };
    device_scores(0, lead);
    if (fetched)
      dot_rows_heads(host.rows_dtype,
                     static_cast<const uint8_t*>(host.k) + static_cast<size_t>(g * K_rows) * host_row_bytes, head_dim,
                     K, q, H, head_dim, head_dim, a.scale, scores + at, ld);
    else if (K > 0)
      for (int j = 0; j < H; ++j) host_logits_row(host, h0 + j, K, scores + j * ld + at);
    at += K;
    device_scores(lead, visible);
    const int64_t n_scores = at;
    // one softmax per head, then P·V in the same order
    float* acc = host.kind == HostPart::Kind::Partial ? device_out : out;
    std::fill(acc, acc + static_cast<int64_t>(H) * head_dim, 0.0f);
    float lse[kMaxItemHeads];
    for (int j = 0; j < H; ++j) lse[j] = n_scores > 0 ? softmax_inplace(scores + j * ld, n_scores) : -INFINITY;
    if (n_scores > 0) {
      at = 0;
      const auto device_values = [&](int64_t begin, int64_t end) {
        for_each_slot_run(tok, g, begin, end, [&](int64_t s0, int64_t count) {
          axpy_rows_heads(a.kv_dtype, vg + s0 * row_bytes, head_dim, count, scores + at, H, ld, head_dim, acc,
                          head_dim);
          at += count;
        });
      };
      device_values(0, lead);
      if (K > 0)
        axpy_rows_heads(host.rows_dtype, host_v, head_dim, K, scores + at, H, ld, head_dim, acc, head_dim);
      at += K;
      device_values(lead, visible);
    }
    for (int j = 0; j < H; ++j) {
      const float* sj = scores + j * ld;
      if (a.probs) {  // the device tokens' probabilities, in table order
        float* ph = a.probs + (rh0 + j) * tok.count;
        std::copy(sj, sj + lead, ph);
        std::copy(sj + lead + K, sj + K + visible, ph + lead);
        std::fill(ph + visible, ph + tok.count, 0.0f);
      }
      if (host.kind == HostPart::Kind::Partial)
        lse_merge(acc + j * head_dim, lse[j], host.out + (rh0 + j) * head_dim, host.lse[rh0 + j], head_dim,
                  out + j * head_dim);
    }
  }
}

int64_t hybrid_attention_scores_per_head(const HybridAttentionArgs& a) {
  return a.tokens.count + std::max<int64_t>(a.host.K, 0);
}

int hybrid_attention_heads_per_item(const HybridAttentionArgs& a, int threads) {
  const int group = a.n_heads / a.n_kv_heads;
  // The most heads per item (up to the whole group) that still leaves an item per thread: a group
  // item costs little more than a one-head item (the same pass over K and V), so three group
  // items on two threads beat nine one-head items.
  for (int h = std::min(group, kMaxItemHeads); h > 1; --h)
    if (group % h == 0 && static_cast<int64_t>(a.n) * (a.n_heads / h) >= static_cast<int64_t>(threads)) return h;
  return 1;
}

}  // namespace hg::cpu
