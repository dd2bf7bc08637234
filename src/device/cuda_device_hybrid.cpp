// CudaDevice::hybrid_attention: the device tokens + host merge of the hybrid policies. Argument
// checks on the host (the device tokens must fit the cache, the host part must carry what its
// kind needs; a slot table's contents live on the GPU and are trusted), then
// the split-K kernel of kernels/cuda/hybrid_attention.cu on the compute stream. Its split
// partials share the decode attention's scratch: both run on the compute stream, in order.
#include <string>

#include "device/cuda_device.h"
#include "hybridgen/error.h"
#include "kernels/cuda/kernels.h"

namespace hg {
inline namespace HG_CUDA_BACKEND {

namespace {

void check_tokens(const HybridAttentionArgs& a) {
  if (a.kv_dtype != DType::F32 && a.kv_dtype != DType::F16 && a.kv_dtype != DType::BF16)
    throw Error("hybrid_attention: cache dtype " + std::string(dtype_name(a.kv_dtype)) +
                " is not supported (f32, f16, bf16)");
  const DeviceTokens& t = a.tokens;
  const auto bad = [&](const std::string& what) {
    throw Error("hybrid_attention: device tokens " + what + " (count " + std::to_string(t.count) + ", stride " +
                std::to_string(t.stride) + ", n_lead " + std::to_string(t.n_lead) + ", ring " +
                (t.ring ? std::to_string(t.ring_base) + "+" + std::to_string(t.ring_slots) : std::string("no")) +
                ", capacity " + std::to_string(a.capacity) + ")");
  };
  if (t.count < 0 || t.count > a.capacity) bad("are more than the cache has slots");
  if (t.n_lead < 0 || t.n_lead > t.count) bad("lead with more tokens than they hold");
  if (t.ring) {
    if (t.ring_slots < 0 || t.count - t.n_lead > t.ring_slots) bad("overfill their ring");
    if (t.n_lead > t.ring_base || t.ring_base + static_cast<int64_t>(t.ring_slots) > a.capacity)
      bad("have a ring outside the cache or over the sinks");
    if (t.ring_slots > 0 && (t.ring_head < 0 || t.ring_head >= t.ring_slots)) bad("have a ring head outside the ring");
    if (t.count > t.n_lead && t.ring_pos0 < t.n_lead) bad("have ring positions before the sinks'");
    return;
  }
  if (t.stride != 0 && t.stride < t.count) bad("have table rows shorter than their count");
  if (t.count > 0 && (!t.slot || !t.pos)) bad("have no slot or position array");
}

void check_host(const HostPart& h) {
  switch (h.kind) {
    case HostPart::Kind::None:
      return;
    case HostPart::Kind::Logits:
      if (h.K < 0) throw Error("hybrid_attention: negative host K " + std::to_string(h.K));
      if (h.K > 0 && (!h.logits || !h.v)) throw Error("hybrid_attention: host logits part without logits or V rows");
      return;
    case HostPart::Kind::KeyValue:
      if (h.K < 0) throw Error("hybrid_attention: negative fetched K " + std::to_string(h.K));
      if (h.K > 0 && (!h.k || !h.v)) throw Error("hybrid_attention: fetched host part without K or V rows");
      return;
    case HostPart::Kind::Partial:
      if (!h.out || !h.lse) throw Error("hybrid_attention: host partial part without its output or log-sum-exp");
      return;
  }
}

}  // namespace

void CudaDevice::hybrid_attention(const HybridAttentionArgs& a) {
  if (a.n <= 0) return;
  if (a.probs)
    throw Error(
        "hybrid_attention: the device tokens' probabilities (h2o, keyformer) are not implemented on the CUDA "
        "device yet; use --device cpu");
  check_tokens(a);
  check_host(a.host);
  issue();
  const cuda::HybridLaunch plan = cuda::hybrid_attention_plan(a, prop_.multiProcessorCount);
  const size_t ws_floats = cuda::hybrid_attention_workspace_floats(a, plan);
  float* ws = ws_floats ? static_cast<float*>(grow(attention_ws_, sizeof(float) * ws_floats)) : nullptr;
  cuda::hybrid_attention(a, plan, ws, compute_);
}

}  // namespace HG_CUDA_BACKEND
}  // namespace hg
