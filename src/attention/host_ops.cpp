#include "attention/host_ops.h"

#include <algorithm>
#include <cmath>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/dot.h"
#include "kernels/cpu/matmul.h"

namespace hg {

namespace {

// Calls fn(t0, count, rows) for each run of consecutive tokens [t_begin, t_end) of kv-head g that
// is contiguous in the store (one token block).
template <typename Fn>
void for_each_run(const KvLayout& l, int g, int64_t t_begin, int64_t t_end, Fn&& fn) {
  for (int64_t t = t_begin; t < t_end;) {
    const int64_t run = std::min<int64_t>(t_end - t, l.block_tokens - t % l.block_tokens);
    fn(t, run, l.row(g, t));
    t += run;
  }
}

}  // namespace

void host_logits(const KvLayout& k, const float* q, int n_heads, float scale, int g_begin, int g_end,
                 int64_t t_begin, int64_t t_end, float* logits, int64_t ld) {
  const int group = n_heads / k.n_kv_heads;
  for (int g = g_begin; g < g_end; ++g) {
    const int64_t h0 = static_cast<int64_t>(g) * group;
    for_each_run(k, g, t_begin, t_end, [&](int64_t t0, int64_t count, const void* rows) {
      cpu::dot_rows_heads(k.dtype, rows, k.head_dim, count, q + h0 * k.head_dim, group, k.head_dim, k.head_dim, scale,
                          logits + h0 * ld + t0, ld);
    });
  }
}

void host_logits_selected(const KvLayout& k, const float* q, int n_heads, float scale, const int32_t* idx, int K,
                          int g_begin, int g_end, float* out) {
  const int group = n_heads / k.n_kv_heads;
  for (int g = g_begin; g < g_end; ++g)
    for (int j = 0; j < K; ++j) {
      const int64_t h0 = static_cast<int64_t>(g) * group;
      cpu::dot_rows_heads(k.dtype, k.row(g, idx[g * K + j]), k.head_dim, 1, q + h0 * k.head_dim, group, k.head_dim,
                          k.head_dim, scale, out + h0 * K + j, K);
    }
}

void gather_rows(const KvLayout& rows, const int32_t* idx, int K, int g_begin, int g_end, float* rows_out) {
  for (int g = g_begin; g < g_end; ++g)
    for (int j = 0; j < K; ++j)
      cpu::dequantize_row(rows.dtype, rows.row(g, idx[g * K + j]), rows.head_dim, 0,
                          rows_out + (static_cast<int64_t>(g) * K + j) * rows.head_dim);
}

void partial_attention(const float* logits, const float* v_sel, int n_heads, int n_kv_heads, int K, int head_dim,
                       int h_begin, int h_end, float* out, float* lse, std::vector<float>& p) {
  const int group = n_heads / n_kv_heads;
  p.resize(static_cast<size_t>(K));
  for (int h = h_begin; h < h_end; ++h) {
    float* oh = out + static_cast<int64_t>(h) * head_dim;
    std::fill(oh, oh + head_dim, 0.0f);
    if (K == 0) {
      lse[h] = -INFINITY;
      continue;
    }
    std::copy(logits + static_cast<int64_t>(h) * K, logits + static_cast<int64_t>(h + 1) * K, p.begin());
    lse[h] = cpu::softmax_inplace(p.data(), K);
    const int g = h / group;
    cpu::axpy_rows(DType::F32, v_sel + static_cast<int64_t>(g) * K * head_dim, head_dim, K, p.data(), head_dim, oh);
  }
}

void prefix_attention(const KvLayout& k, const KvLayout& v, const float* q, int n_heads, float scale,
                      int64_t n_tokens, int h_begin, int h_end, float* out, float* lse, std::vector<float>& scratch) {
  const int group = n_heads / k.n_kv_heads;
  const int hd = k.head_dim;
  const int64_t ld = std::max<int64_t>(n_tokens, 1);
  scratch.resize(static_cast<size_t>(ld * group));
  for (int h = h_begin; h < h_end;) {
    const int g = h / group;
    const int n_run = std::min(h_end, (g + 1) * group) - h;  // this range's heads of kv-head g
    if (n_tokens > 0)
      for_each_run(k, g, 0, n_tokens, [&](int64_t t0, int64_t count, const void* rows) {
        cpu::dot_rows_heads(k.dtype, rows, hd, count, q + static_cast<int64_t>(h) * hd, n_run, hd, hd, scale,
                            scratch.data() + t0, ld);
      });
    float* oh = out + static_cast<int64_t>(h) * hd;
    std::fill(oh, oh + static_cast<int64_t>(n_run) * hd, 0.0f);
    for (int j = 0; j < n_run; ++j)
      lse[h + j] = n_tokens == 0 ? -INFINITY : cpu::softmax_inplace(scratch.data() + j * ld, n_tokens);
    if (n_tokens > 0)  // the run's heads share each pass over the values
      for_each_run(v, g, 0, n_tokens, [&](int64_t t0, int64_t count, const void* rows) {
        cpu::axpy_rows_heads(v.dtype, rows, hd, count, scratch.data() + t0, n_run, ld, hd, oh, hd);
      });
    h += n_run;
  }
}

void HostPrefillAttention::run(ThreadPool& pool, const KvLayout& k, const KvLayout& v, const float* q,
                               int64_t n_rows, int n_heads, float scale, const int64_t* visible, float* out,
                               float* lse, bool bf16) {
  cpu::PrefillAttentionArgs a = cpu::dense_prefill_args(q, n_rows, n_heads, k.n_kv_heads, k.head_dim, scale, k, v,
                                                        visible, out, lse);
  a.bf16 = bf16;
  tiled_.run(pool, a);
}

}  // namespace hg
