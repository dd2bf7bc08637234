// The window part runs as runs of contiguous slots (the sinks, then the ring in at most two
// pieces around its wrap) through the streaming dot/axpy kernels; host logits are spliced into
// the score buffer between the sinks and the ring, so the softmax and P·V visit tokens in
// position order exactly as full attention does.
#include <algorithm>
#include <cassert>
#include <cmath>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/dot.h"
#include "kernels/cpu/hybrid_attention.h"

namespace hg::cpu {

namespace {

// A piece of the union a query attends to, in position order: a run of contiguous window slots,
// or (slot < 0) the host's selected tokens.
struct Segment {
  int64_t slot;
  int64_t count;
};

// Sinks, then the host tokens, then the ring prefix (in at most two runs around its wrap) that
// the row at position `pos` sees.
int segments_for(const WindowSpan& s, int64_t pos, int64_t host_k, Segment segs[4]) {
  int n = 0;
  const int64_t sinks = std::min<int64_t>(s.n_sinks, pos + 1);
  if (sinks > 0) segs[n++] = {0, sinks};
  if (host_k > 0) segs[n++] = {-1, host_k};
  const int64_t ring = std::clamp<int64_t>(pos + 1 - s.ring_pos0, 0, s.ring_count);
  if (ring > 0) {
    const int64_t first = std::min<int64_t>(ring, s.ring_slots - s.ring_head);
    segs[n++] = {s.sink_slots + s.ring_head, first};
    if (ring > first) segs[n++] = {s.sink_slots, ring - first};
  }
  return n;
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

void hybrid_attention_items(const float* q, int n_heads, int n_kv_heads, int head_dim, DType kv_dtype,
                            const void* k_win, const void* v_win, int64_t capacity, const WindowSpan& span,
                            int64_t pos0, const HostPart& host, float scale, float* out, float* scores,
                            int64_t item_begin, int64_t item_end) {
  const int group = n_heads / n_kv_heads;
  const size_t row_bytes = static_cast<size_t>(head_dim) * dtype_block_bytes(kv_dtype);
  const int64_t K = host.kind == HostPart::Kind::Logits ? host.K : 0;
  assert(head_dim <= kMaxHeadDim);  // checked at model load
  float device_out[kMaxHeadDim];
  for (int64_t item = item_begin; item < item_end; ++item) {
    const int64_t i = item / n_heads;
    const int h = static_cast<int>(item % n_heads);
    const int g = h / group;
    const float* qh = q + item * head_dim;
    float* oh = out + item * head_dim;
    const auto* kg = static_cast<const uint8_t*>(k_win) + static_cast<size_t>(g) * capacity * row_bytes;
    const auto* vg = static_cast<const uint8_t*>(v_win) + static_cast<size_t>(g) * capacity * row_bytes;
    Segment segs[4];
    const int n_segs = segments_for(span, pos0 + i, K, segs);
    const float* host_logits = host.logits + static_cast<int64_t>(h) * K;
    const float* host_v = host.v + static_cast<int64_t>(g) * K * head_dim;

    // scores over the union, in position order
    int64_t at = 0;
    for (int sgi = 0; sgi < n_segs; ++sgi) {
      const Segment& sg = segs[sgi];
      if (sg.slot < 0)
        std::copy(host_logits, host_logits + sg.count, scores + at);
      else
        dot_rows(kv_dtype, kg + sg.slot * row_bytes, head_dim, sg.count, qh, head_dim, scale, scores + at);
      at += sg.count;
    }
    // one softmax, then P·V in the same order
    float* acc = host.kind == HostPart::Kind::Partial ? device_out : oh;
    std::fill(acc, acc + head_dim, 0.0f);
    float lse = -INFINITY;
    if (at > 0) {
      lse = softmax_inplace(scores, at);
      at = 0;
      for (int sgi = 0; sgi < n_segs; ++sgi) {
        const Segment& sg = segs[sgi];
        if (sg.slot < 0)
          axpy_rows(DType::F32, host_v, head_dim, sg.count, scores + at, head_dim, acc);
        else
          axpy_rows(kv_dtype, vg + sg.slot * row_bytes, head_dim, sg.count, scores + at, head_dim, acc);
        at += sg.count;
      }
    }
    if (host.kind == HostPart::Kind::Partial)
      lse_merge(acc, lse, host.out + item * head_dim, host.lse[item], head_dim, oh);
  }
}

}  // namespace hg::cpu
