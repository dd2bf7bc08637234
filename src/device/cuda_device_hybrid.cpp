// CudaDevice::hybrid_attention: the window + host merge of the hybrid policies. Argument checks
// on the host (the span must fit the window, the host part must carry what its kind needs), then
// the split-K kernel of kernels/cuda/hybrid_attention.cu on the compute stream. Its split
// partials share the decode attention's scratch: both run on the compute stream, in order.
#include <string>

#include "device/cuda_device.h"
#include "hybridgen/error.h"
#include "kernels/cuda/kernels.h"

namespace hg {

namespace {

void check_window(const KvView& w, const WindowSpan& s) {
  if (w.dtype != DType::F32 && w.dtype != DType::F16 && w.dtype != DType::BF16)
    throw Error("hybrid_attention: window dtype " + std::string(dtype_name(w.dtype)) +
                " is not supported (f32, f16, bf16)");
  const auto bad = [&](const std::string& what) {
    throw Error("hybrid_attention: window span " + what + " (n_sinks " + std::to_string(s.n_sinks) + ", sink_slots " +
                std::to_string(s.sink_slots) + ", ring_slots " + std::to_string(s.ring_slots) + ", ring_head " +
                std::to_string(s.ring_head) + ", ring_count " + std::to_string(s.ring_count) + ", capacity " +
                std::to_string(w.capacity) + ")");
  };
  if (s.n_sinks < 0 || s.n_sinks > s.sink_slots) bad("has more sinks than sink slots");
  if (s.ring_slots < 0 || static_cast<int64_t>(s.sink_slots) + s.ring_slots > w.capacity)
    bad("does not fit the window's capacity");
  if (s.ring_count < 0 || s.ring_count > s.ring_slots) bad("holds more ring tokens than ring slots");
  if (s.ring_count > 0 && (s.ring_head < 0 || s.ring_head >= s.ring_slots)) bad("has its ring head outside the ring");
}

void check_host(const HostPart& h) {
  switch (h.kind) {
    case HostPart::Kind::None:
      return;
    case HostPart::Kind::Logits:
      if (h.K < 0) throw Error("hybrid_attention: negative host K " + std::to_string(h.K));
      if (h.K > 0 && (!h.logits || !h.v)) throw Error("hybrid_attention: host logits part without logits or V rows");
      return;
    case HostPart::Kind::Partial:
      if (!h.out || !h.lse) throw Error("hybrid_attention: host partial part without its output or log-sum-exp");
      return;
  }
}

}  // namespace

void CudaDevice::hybrid_attention(const float* q, int n, int n_heads, const KvView& window, const WindowSpan& span,
                                  int pos0, const HostPart& host, float scale, float* out) {
  if (n <= 0) return;
  check_window(window, span);
  check_host(host);
  make_current();
  cuda::HybridAttentionArgs a;
  a.q = q;
  a.out = out;
  a.k_win = window.k;
  a.v_win = window.v;
  a.kv_dtype = window.dtype;
  a.capacity = window.capacity;
  a.n = n;
  a.n_heads = n_heads;
  a.n_kv_heads = window.n_kv_heads;
  a.head_dim = window.head_dim;
  a.pos0 = pos0;
  a.span = span;
  a.host = host;
  a.scale = scale;
  const int splits = cuda::hybrid_attention_splits(a, prop_.multiProcessorCount);
  const size_t ws_floats = cuda::hybrid_attention_workspace_floats(a, splits);
  float* ws = ws_floats ? static_cast<float*>(grow(attention_ws_, sizeof(float) * ws_floats)) : nullptr;
  cuda::hybrid_attention(a, splits, ws, compute_);
}

}  // namespace hg
