// The KV cache of the `full` policy: per sequence and layer, a device buffer
// [n_kv_heads][capacity][head_dim] in the cache dtype, slot = position.
#pragma once
#include <vector>

#include "device/device.h"

namespace hg {

class KvCache {
 public:
  KvCache(Device& device, const ModelSpec& spec, DType dtype, int capacity, int n_seqs);
  ~KvCache();
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;

  const KvView& view(int seq, int layer) const { return views_[static_cast<size_t>(seq * n_layers_ + layer)]; }
  int capacity() const { return capacity_; }
  int length(int seq) const { return lengths_[static_cast<size_t>(seq)]; }
  void set_length(int seq, int n) { lengths_[static_cast<size_t>(seq)] = n; }
  size_t bytes() const { return bytes_; }
  // Bytes of K plus V one token takes over all layers.
  static size_t bytes_per_token(const ModelSpec& spec, DType dtype);

 private:
  Device& device_;
  int n_layers_;
  int capacity_;
  size_t bytes_ = 0;
  std::vector<KvView> views_;
  std::vector<int> lengths_;
};

}  // namespace hg
