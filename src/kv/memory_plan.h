// The memory plan of an engine, computed before anything is allocated (a plan that does
// not fit is one error line, said before any allocation). The device side: weights copied to the
// device and the KV the device holds (the whole cache for `full`, the window + sinks for hybrid
// policies), against the device's free memory. The host side (hybrid policies): the host K and V
// stores per NUMA node, against each node's free memory (mem::PlacementPlan).
#pragma once
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "device/device.h"
#include "hybridgen/model.h"
#include "hybridgen/policy.h"
#include "mem/placement.h"

namespace hg {

struct DeviceMemoryPlan {
  std::string device;  // the device's name
  int64_t ctx = 0;     // tokens per sequence
  int n_seqs = 1;
  uint64_t weight_bytes = 0;  // weights copied to the device (0 where they stay mapped in host memory)
  uint64_t kv_bytes = 0;      // KV the device holds
  // A dropping policy's exact prefill (streaming, h2o, keyformer with --exact-prefill true): the
  // whole prompt, up to ctx tokens of one sequence, on a full-attention stage beside the policy's
  // own KV while it runs (engine.cpp, Engine::prefill), as H2O's code holds it on the GPU.
  uint64_t prefill_kv_bytes = 0;
  DeviceMemory memory;  // what the device has

  uint64_t needed() const { return weight_bytes + kv_bytes + prefill_kv_bytes; }
  bool fits() const { return memory.free == 0 || needed() <= memory.free; }  // unknown free: not checked
  // "" when it fits, else one line: "memory plan does not fit: device cpu (...) needs 20.95 TiB
  // (KV cache 20.95 TiB for ctx 1000000000 x 1 sequences + weights 0 B), has 11.2 GiB available".
  std::string problem() const;
  void require_fits() const;  // hg::Error with problem()
  nlohmann::json to_json() const;
};

// Tokens of one sequence the device holds: ctx for `full` (or a window that covers it), else the
// window + sinks (+ the heavy hitters of a pruning policy).
int64_t device_kv_tokens(const Policy& policy, int64_t ctx);
DeviceMemoryPlan plan_device_memory(const Model& model, const Policy& policy, DType kv_dtype, int64_t ctx, int n_seqs,
                                    const std::string& device_name, const DeviceMemory& memory);
// The same for `device`, with the weights counted as it stores them (Device::stored_bytes: a
// CUDA device holds GGUF block types as bf16).
DeviceMemoryPlan plan_device_memory(const Model& model, const Policy& policy, DType kv_dtype, int64_t ctx, int n_seqs,
                                    const Device& device);
// Host K and V stores of a hybrid policy (tokens past the sinks, for every sequence) per NUMA node.
mem::PlacementPlan plan_host_kv(const ModelSpec& spec, const Policy& policy, DType kv_dtype, int64_t ctx, int n_seqs,
                                const mem::Topology& topology, const mem::Placement& placement);

}  // namespace hg
