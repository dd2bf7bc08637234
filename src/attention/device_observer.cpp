#include "attention/device_observer.h"

#include "attention/shipment.h"

namespace hg {

DeviceObserver::DeviceObserver(Device& device, const ModelSpec& spec, AttentionObserver& pruner)
    : device_(device), spec_(spec), pruner_(pruner) {}

DeviceObserver::~DeviceObserver() {
  if (probs_dev_) device_.free(probs_dev_);
}

float* DeviceObserver::probs(int n_rows, int count) {
  grow_device_buffers(device_, {&probs_dev_}, capacity_, static_cast<size_t>(n_rows) * spec_.n_heads * count);
  probs_host_.resize(capacity_);
  return probs_dev_;
}

void DeviceObserver::observe(int layer, std::span<const TokenRow> rows, const int32_t* positions, int count,
                             bool prefill) {
  const size_t per_row = static_cast<size_t>(spec_.n_heads) * count;
  device_.copy_to_host(probs_host_.data(), probs_dev_, sizeof(float) * per_row * rows.size());
  ObservedAttention o{.seq = rows[0].seq,
                      .layer = layer,
                      .space = TokenSpace::Position,
                      .n_heads = spec_.n_heads,
                      .n_kv_heads = spec_.n_kv_heads,
                      .prefill = prefill,
                      .count = count,
                      .tokens = positions};
  for (size_t i = 0; i < rows.size(); ++i) {
    o.query_pos = rows[i].pos;
    o.p = probs_host_.data() + per_row * i;
    pruner_.observe(o, 0, spec_.n_kv_heads);
  }
}

}  // namespace hg
