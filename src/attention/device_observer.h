// The observer of the device's attention, for the policies that prune the device's tokens (h2o,
// keyformer): the device writes the probability each of its tokens received (per row and head)
// beside its attention; they are copied back and given to the pruner, whose accumulated scores
// decide, when tokens leave the window, which of them stay (TokenRetainer::retain, called by
// HybridKv).
#pragma once
#include <span>
#include <vector>

#include "attention/layer_attention.h"
#include "attention/selectors/selector.h"

namespace hg {

class DeviceObserver {
 public:
  DeviceObserver(Device& device, const ModelSpec& spec, AttentionObserver& pruner);
  ~DeviceObserver();
  DeviceObserver(const DeviceObserver&) = delete;
  DeviceObserver& operator=(const DeviceObserver&) = delete;

  // Where the device writes the probabilities of n_rows rows over `count` tokens (device memory).
  float* probs(int n_rows, int count);
  // After the attention: the rows' probabilities over the tokens at `positions` (count per kv-head)
  // to the pruner; rows of one sequence.
  void observe(int layer, std::span<const TokenRow> rows, const int32_t* positions, int count, bool prefill);

 private:
  Device& device_;
  const ModelSpec& spec_;
  AttentionObserver& pruner_;
  float* probs_dev_ = nullptr;
  size_t capacity_ = 0;  // floats probs_dev_ holds
  std::vector<float> probs_host_;
};

}  // namespace hg
