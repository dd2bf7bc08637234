#include "kv/memory_plan.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "hybridgen/error.h"
#include "kv/kv_cache.h"

namespace hg {

int64_t device_kv_tokens(const Policy& policy, int64_t ctx) {
  if (!policy.splits_kv() || window_covers_context(policy, static_cast<int>(std::min<int64_t>(ctx, INT32_MAX)))) return ctx;
  // as HybridKv sizes it
  const int64_t heavy = !policy.keep_evicted && policy.prune != "none" ? policy.heavy_hitters.heavy : 0;
  return std::min<int64_t>(policy.n_sinks, ctx) + std::min<int64_t>(policy.window, ctx) + heavy;
}

DeviceMemoryPlan plan_device_memory(const Model& model, const Policy& policy, DType kv_dtype, int64_t ctx, int n_seqs,
                                    const std::string& device_name, const DeviceMemory& memory) {
  DeviceMemoryPlan p;
  p.device = device_name;
  p.ctx = ctx;
  p.n_seqs = n_seqs;
  p.memory = memory;
  p.weight_bytes = memory.host ? 0 : model.weight_bytes();
  const uint64_t per_token = KvCache::bytes_per_token(model.spec, kv_dtype);
  const int64_t tokens = device_kv_tokens(policy, ctx);
  p.kv_bytes = per_token * static_cast<uint64_t>(tokens) * static_cast<uint64_t>(n_seqs);
  if (policy.splits_kv() && !policy.keep_evicted && policy.exact_prefill && tokens < ctx)
    p.prefill_kv_bytes = per_token * static_cast<uint64_t>(ctx);
  return p;
}

DeviceMemoryPlan plan_device_memory(const Model& model, const Policy& policy, DType kv_dtype, int64_t ctx, int n_seqs,
                                    const Device& device) {
  const DeviceMemory memory = device.memory();
  DeviceMemoryPlan p = plan_device_memory(model, policy, kv_dtype, ctx, n_seqs, device.name(), memory);
  if (!memory.host) p.weight_bytes = model.weight_bytes([&](const TensorView& t) { return device.stored_bytes(t); });
  return p;
}

std::string DeviceMemoryPlan::problem() const {
  if (fits()) return "";
  return "memory plan does not fit: device " + device + " needs " + mem::format_bytes(needed()) + " (KV cache " +
         mem::format_bytes(kv_bytes) + " for ctx " + std::to_string(ctx) + " x " + std::to_string(n_seqs) +
         " sequences + " +
         (prefill_kv_bytes ? "the exact prefill's full KV " + mem::format_bytes(prefill_kv_bytes) + " + " : "") +
         "weights " + mem::format_bytes(weight_bytes) + "), has " + mem::format_bytes(memory.free) + " available" +
         (memory.host ? " (host memory)" : "") + "; lower --ctx or --batch, or " +
         (prefill_kv_bytes ? "give --exact-prefill false (evicting as the prefill goes)" : "use a hybrid policy");
}

void DeviceMemoryPlan::require_fits() const {
  if (!fits()) throw Error(problem());
}

nlohmann::json DeviceMemoryPlan::to_json() const {
  return {{"device", device},
          {"weight_bytes", weight_bytes},
          {"kv_bytes", kv_bytes},
          {"prefill_kv_bytes", prefill_kv_bytes},
          {"needed_bytes", needed()},
          {"free_bytes", memory.free},
          {"total_bytes", memory.total},
          {"host_memory", memory.host},
          {"fits", fits()}};
}

mem::PlacementPlan plan_host_kv(const ModelSpec& spec, const Policy& policy, DType kv_dtype, int64_t ctx, int n_seqs,
                                const mem::Topology& topology, const mem::Placement& placement) {
  // K and V are separate stores of half the per-token bytes each; HybridKv keeps every token past
  // the sinks on the host (a pruning policy keeps none).
  const uint64_t half = KvCache::bytes_per_token(spec, kv_dtype) / 2 * static_cast<uint64_t>(n_seqs);
  const int64_t host_tokens =
      policy.keep_evicted ? std::max<int64_t>(1, ctx - std::min<int64_t>(policy.n_sinks, ctx)) : 1;
  return mem::plan_placement(half, half, host_tokens, topology, placement);
}

}  // namespace hg
