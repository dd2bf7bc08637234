#include "attention/kv_fill.h"

#include <algorithm>

#include "hybridgen/error.h"
#include "util/hash.h"

namespace hg {

namespace {

// Uniform on [-√3, √3): mean 0, variance 1.
void fill_row(uint64_t state, int n, float* out) {
  for (int i = 0; i < n; ++i) {
    const uint64_t h = splitmix64(state ^ (static_cast<uint64_t>(i) * 0xd1b54a32d192ed03ull));
    out[i] = (static_cast<float>(h >> 40) * (1.0f / 16777216.0f) * 2.0f - 1.0f) * 1.7320508f;
  }
}

}  // namespace

void random_kv_rows(uint64_t seed, int layer, int64_t pos0, int64_t n, int kv_dim, float* k, float* v) {
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t row = splitmix64(seed ^ (static_cast<uint64_t>(layer) << 48) ^ static_cast<uint64_t>(pos0 + i));
    fill_row(row * 2, kv_dim, k + i * kv_dim);
    fill_row(row * 2 + 1, kv_dim, v + i * kv_dim);
  }
}

KvRowSource random_kv_source(uint64_t seed, int kv_dim) {
  return [seed, kv_dim](int layer, int64_t pos0, int64_t n, float* k, float* v) {
    random_kv_rows(seed, layer, pos0, n, kv_dim, k, v);
  };
}

KvFill::KvFill(Device& device, int kv_dim, int chunk)
    : device_(device),
      kv_dim_(kv_dim),
      chunk_(std::clamp(chunk, 1, kChunk)),
      k_host_(static_cast<size_t>(kChunk) * kv_dim),
      v_host_(static_cast<size_t>(kChunk) * kv_dim) {
  k_dev_ = device_.alloc(sizeof(float) * k_host_.size());
  v_dev_ = device_.alloc(sizeof(float) * v_host_.size());
}

KvFill::~KvFill() {
  device_.free(k_dev_);
  device_.free(v_dev_);
}

void LayerAttention::fill(int, int, const KvRowSource&) {
  throw Error("the attention stage '" + describe() + "' cannot be filled without a prefill");
}

}  // namespace hg
